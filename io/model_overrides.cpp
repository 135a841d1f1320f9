#include "io/model_overrides.h"

#include "common/error.h"
#include "io/cli_checks.h"

namespace evsim {

void ModelOverrides::addOptions(CLI::App& app) {
  const std::string group = "Model overrides (Megatron-LM names)";
  auto positive = [&](const char* name, std::optional<int64_t>& field, int64_t max,
                      const char* help) {
    app.add_option(name, field, help)->check(CLI::Range(int64_t{1}, max))->group(group);
  };
  positive("--seq-length", seq_length, kMaxSeqLength, "sequence length");
  positive("--num-layers", num_layers, kMaxLayers, "transformer layers (single-stack models)");
  positive("--hidden-size", hidden_size, kMaxHidden, "hidden size h");
  positive("--num-attention-heads", num_heads, kMaxHeads, "attention heads a");
  positive("--ffn-hidden-size", ffn_hidden_size, kMaxFfnHidden, "MLP hidden size f");
  positive("--num-query-groups", num_query_groups, kMaxHeads, "key/value heads (GQA)");
  positive("--kv-channels", kv_channels, kMaxHidden,
           "channels per attention head (default hidden size / heads)");
  positive("--vocab-size", vocab_size, kMaxVocab, "vocabulary (padded as Megatron does)");
  app.add_flag("--group-query-attention", group_query_attention,
               "grouped-query attention (with --num-query-groups)")
      ->group(group);
  app.add_flag("--qk-layernorm", qk_layernorm, "a norm over each Q and K head (Qwen3)")
      ->group(group);
  app.add_flag("--use-flash-attn", flash_attention, "fused attention, no s x s scores kept")
      ->group(group);
  app.add_flag("--swiglu", swiglu, "SwiGLU MLP")->group(group);
  app.add_option("--normalization", normalization, "LayerNorm | RMSNorm")
      ->check(CLI::IsMember({"LayerNorm", "RMSNorm"}))
      ->group(group);
  app.add_option("--position-embedding-type", position_embedding, "learned_absolute | rope")
      ->check(CLI::IsMember({"learned_absolute", "rope"}))
      ->group(group);
  app.add_flag("--disable-bias-linear", disable_bias_linear, "no biases on linear layers")
      ->group(group);
  app.add_flag("--untie-embeddings-and-output-weights", untie_embeddings,
               "the output layer has its own weight")
      ->group(group);
  app.add_option("--fp8-format", fp8_format, "hybrid | e4m3: GEMMs in FP8 (Transformer Engine)")
      ->check(CLI::IsMember({"hybrid", "e4m3"}))
      ->group(group);
  app.add_option("--fp8-recipe", fp8_recipe,
                 "delayed | tensorwise | rowwise | blockwise | mxfp8: how FP8 operands are scaled "
                 "(implies FP8 GEMMs; default delayed)")
      ->check(CLI::IsMember({"delayed", "tensorwise", "rowwise", "blockwise", "mxfp8"}))
      ->group(group);
  auto* bf16_flag = app.add_flag("--bf16", bf16, "bf16 mixed precision")->group(group);
  app.add_flag("--fp16", fp16, "fp16 mixed precision")->excludes(bf16_flag)->group(group);
  app.add_option("--hidden-dropout", hidden_dropout, "dropout probability (0: no dropout ops)")
      ->check(finiteInRange(0.0, 1.0))  // CLI11's Range let nan through
      ->group(group);
  app.add_option("--attention-dropout", attention_dropout,
                 "attention dropout probability (0: none)")
      ->check(finiteInRange(0.0, 1.0))  // CLI11's Range let nan through
      ->group(group);
  app.add_flag_callback(
         "--use-rotary-position-embeddings", [this] { position_embedding = "rope"; },
         "Megatron's older name for --position-embedding-type rope")
      ->group(group);
}

bool ModelOverrides::any() const {
  return seq_length || num_layers || hidden_size || num_heads || ffn_hidden_size ||
         num_query_groups || vocab_size || kv_channels || qk_layernorm || group_query_attention ||
         flash_attention || swiglu || disable_bias_linear || untie_embeddings ||
         !normalization.empty() || !position_embedding.empty() || !fp8_format.empty() ||
         !fp8_recipe.empty() || bf16 || fp16 || hidden_dropout || attention_dropout;
}

void ModelOverrides::apply(ModelConfig& model) const {
  if (group_query_attention && !num_query_groups) {
    EVSIM_THROW(InputError, "--group-query-attention: give --num-query-groups too");
  }
  // Multi-head attention stays multi-head under a new head count (unless K/V heads are given).
  const bool multi_head = model.queryGroups() == model.num_heads;
  if (seq_length) model.seq_length = *seq_length;
  if (hidden_size) model.hidden_size = *hidden_size;
  if (num_heads) model.num_heads = *num_heads;
  if (ffn_hidden_size) model.ffn_hidden_size = *ffn_hidden_size;
  if (vocab_size) model.vocab_size = *vocab_size;
  if ((kv_channels || qk_layernorm) && model.mla.enabled()) {
    EVSIM_THROW(InputError, "--kv-channels / --qk-layernorm: not with multi-latent attention ({})",
                model.name);
  }
  if (kv_channels) model.kv_channels = *kv_channels;
  if (qk_layernorm) model.spec.qk_layernorm = true;
  if (num_query_groups) {
    model.spec.query_groups = *num_query_groups;
  } else if (num_heads && multi_head) {
    model.spec.query_groups = *num_heads;
  }
  if (num_layers) {
    for (const TransformerBlock& b : model.blocks) {
      if (!(b == model.blocks.front())) {
        EVSIM_THROW(InputError,
                    "--num-layers {}: {} stacks different blocks (encoder and decoder); edit "
                    "its YAML instead",
                    *num_layers, model.name);
      }
    }
    model.blocks.assign(static_cast<size_t>(*num_layers), model.blocks.front());
  }
  if (flash_attention) model.spec.flash_attention = true;
  if (swiglu) model.spec.mlp = MlpKind::kSwiGlu;
  if (!normalization.empty()) {
    model.spec.norm = normalization == "RMSNorm" ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  }
  if (!position_embedding.empty()) {
    model.spec.position =
        position_embedding == "rope" ? PositionKind::kRope : PositionKind::kLearned;
  }
  if (disable_bias_linear) model.spec.bias = false;
  if (untie_embeddings) model.spec.untied_output = true;
  if (!fp8_format.empty()) model.spec.fp8 = true;
  if (!fp8_recipe.empty()) {
    model.spec.fp8 = true;
    model.spec.fp8_recipe = parseFp8Recipe(fp8_recipe, "--fp8-recipe");
  }
  if (bf16) model.dtype = DType::kBf16;
  if (fp16) model.dtype = DType::kFp16;
  if (hidden_dropout) model.spec.hidden_dropout = *hidden_dropout > 0;
  if (attention_dropout) model.spec.attention_dropout = *attention_dropout > 0;
  if (model.kv_channels == 0 && model.hidden_size % model.num_heads != 0) {
    EVSIM_THROW(InputError, "--num-attention-heads {} does not divide --hidden-size {}",
                model.num_heads, model.hidden_size);
  }
  if (model.num_heads % model.queryGroups() != 0) {
    EVSIM_THROW(InputError, "--num-query-groups {} does not divide the {} attention heads",
                model.queryGroups(), model.num_heads);
  }
}

}  // namespace evsim

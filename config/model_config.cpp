#include "config/model_config.h"

#include <array>
#include <cctype>
#include <filesystem>

#include "common/error.h"
#include "common/input_file.h"
#include "common/yaml_reader.h"
#include "config/hf_config.h"

namespace evsim {

namespace {

// `key`'s value among `names` (index), or `fallback` when the key is absent.
int choice(const YamlReader& root, const std::string& key, std::initializer_list<const char*> names,
           int fallback) {
  if (!root.has(key)) return fallback;
  const std::string value = root.str(key);
  int i = 0;
  for (const char* name : names) {
    if (value == name) return i;
    ++i;
  }
  root.fail(key, fmt::format("'{}': must be {}", value, fmt::join(names, " or ")));
}

bool flag(const YamlReader& root, const std::string& key, bool fallback) {
  return root.has(key) ? root.boolean(key) : fallback;
}

// A dropout probability (Megatron's default 0.1 when absent): only whether it is 0 changes the
// work.
bool dropout(const YamlReader& root, const std::string& key) {
  if (!root.has(key)) return true;
  const double p = root.nonNegativeDouble(key, 1.0);
  if (p >= 1) root.fail(key, fmt::format("{}: must be < 1", p));
  return p > 0;
}

BlockSpec readBlockSpec(const YamlReader& root, int64_t heads) {
  BlockSpec spec;
  spec.query_groups =
      root.has("num_query_groups") ? root.positiveInt("num_query_groups", kMaxHeads) : heads;
  if (heads % spec.query_groups != 0) {
    root.fail("num_query_groups",
              fmt::format("{} does not divide num_heads {}", spec.query_groups, heads));
  }
  spec.norm = static_cast<NormKind>(choice(root, "normalization", {"layernorm", "rmsnorm"}, 0));
  spec.mlp = static_cast<MlpKind>(choice(root, "activation", {"gelu", "swiglu"}, 0));
  spec.position =
      static_cast<PositionKind>(choice(root, "position_embedding", {"learned", "rope"}, 0));
  spec.bias = flag(root, "add_bias_linear", true);
  spec.untied_output = flag(root, "untie_embeddings_and_output_weights", false);
  spec.flash_attention = flag(root, "flash_attention", false);
  spec.qk_layernorm = flag(root, "qk_layernorm", false);
  spec.fp8 = flag(root, "fp8", false);
  if (root.has("fp8_recipe")) {
    spec.fp8_recipe = parseFp8Recipe(root.str("fp8_recipe"), root.where("fp8_recipe"));
    if (root.has("fp8") && !spec.fp8) root.fail("fp8_recipe", "given with fp8: false");
    spec.fp8 = true;
  }
  spec.hidden_dropout = dropout(root, "hidden_dropout");
  spec.attention_dropout = dropout(root, "attention_dropout");
  return spec;
}

MoeSpec readMoe(const YamlReader& root, int64_t ffn) {
  MoeSpec moe;
  if (!root.has("num_experts")) {
    for (const char* key :
         {"moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
          "moe_expert_capacity_factor", "moe_load_imbalance", "moe_router_num_groups",
          "moe_router_group_topk"}) {
      if (root.has(key)) root.fail(key, "needs num_experts");
    }
    return moe;
  }
  moe.num_experts = root.positiveInt("num_experts", kMaxExperts);
  moe.top_k = root.positiveInt("moe_router_topk", kMaxExperts);
  if (moe.top_k > moe.num_experts) {
    root.fail("moe_router_topk",
              fmt::format("{} is more than num_experts {}", moe.top_k, moe.num_experts));
  }
  moe.expert_ffn = root.has("moe_ffn_hidden_size")
                       ? root.positiveInt("moe_ffn_hidden_size", kMaxFfnHidden)
                       : ffn;
  moe.shared_ffn = root.has("moe_shared_expert_intermediate_size")
                       ? root.positiveInt("moe_shared_expert_intermediate_size", kMaxFfnHidden)
                       : 0;
  // Bounded so that the routed rows (tokens x k x factor) stay within the planner's int64 range.
  constexpr double kMaxTokenFactor = 64;
  if (root.has("moe_expert_capacity_factor")) {
    moe.capacity_factor = root.positiveDouble("moe_expert_capacity_factor", kMaxTokenFactor);
  }
  if (root.has("moe_load_imbalance")) {
    moe.load_imbalance = root.positiveDouble("moe_load_imbalance", kMaxTokenFactor);
    if (moe.load_imbalance < 1) {
      root.fail("moe_load_imbalance",
                fmt::format("{}: the busiest rank holds at least the average (>= 1)",
                            moe.load_imbalance));
    }
  }
  if (root.has("moe_router_num_groups") != root.has("moe_router_group_topk")) {
    root.fail(root.has("moe_router_num_groups") ? "moe_router_num_groups" : "moe_router_group_topk",
              "give moe_router_num_groups and moe_router_group_topk together");
  }
  if (root.has("moe_router_num_groups")) {
    moe.router_groups = root.positiveInt("moe_router_num_groups", moe.num_experts);
    if (moe.num_experts % moe.router_groups != 0) {
      root.fail("moe_router_num_groups", fmt::format("{} does not divide num_experts {}",
                                                     moe.router_groups, moe.num_experts));
    }
    moe.router_group_topk = root.positiveInt("moe_router_group_topk", moe.router_groups);
    if (moe.router_group_topk * (moe.num_experts / moe.router_groups) < moe.top_k) {
      root.fail("moe_router_group_topk",
                fmt::format("{} groups of {} experts hold fewer than moe_router_topk {}",
                            moe.router_group_topk, moe.num_experts / moe.router_groups, moe.top_k));
    }
  }
  return moe;
}

MlaSpec readMla(const YamlReader& root, const BlockSpec& spec, int64_t heads) {
  MlaSpec mla;
  const bool on = flag(root, "multi_latent_attention", false);
  for (const char* key :
       {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"}) {
    if (!on && root.has(key)) root.fail(key, "needs multi_latent_attention: true");
  }
  if (!on) return mla;
  if (root.has("num_query_groups") && spec.query_groups != heads) {
    root.fail("num_query_groups", "multi-latent attention has one K/V head per query head");
  }
  mla.q_lora_rank = root.has("q_lora_rank") ? root.positiveInt("q_lora_rank", kMaxHidden) : 0;
  mla.kv_lora_rank = root.positiveInt("kv_lora_rank", kMaxHidden);
  mla.qk_head_dim = root.positiveInt("qk_head_dim", kMaxHidden);
  mla.qk_pos_emb_head_dim = root.positiveInt("qk_pos_emb_head_dim", kMaxHidden);
  mla.v_head_dim = root.positiveInt("v_head_dim", kMaxHidden);
  if (mla.qk_pos_emb_head_dim % 2 != 0) {
    root.fail("qk_pos_emb_head_dim",
              fmt::format("{}: RoPE needs an even head dim", mla.qk_pos_emb_head_dim));
  }
  return mla;
}

ModelConfig readModel(const YamlReader& root) {
  root.allowOnly({"name",
                  "dtype",
                  "hidden_size",
                  "num_heads",
                  "ffn_hidden_size",
                  "seq_length",
                  "vocab_size",
                  "layers",
                  "description",
                  "num_query_groups",
                  "kv_channels",
                  "qk_layernorm",
                  "normalization",
                  "activation",
                  "position_embedding",
                  "add_bias_linear",
                  "untie_embeddings_and_output_weights",
                  "flash_attention",
                  "fp8",
                  "fp8_recipe",
                  "hidden_dropout",
                  "attention_dropout",
                  "num_experts",
                  "moe_router_topk",
                  "moe_ffn_hidden_size",
                  "moe_shared_expert_intermediate_size",
                  "moe_expert_capacity_factor",
                  "moe_load_imbalance",
                  "moe_router_num_groups",
                  "moe_router_group_topk",
                  "multi_latent_attention",
                  "q_lora_rank",
                  "kv_lora_rank",
                  "qk_head_dim",
                  "qk_pos_emb_head_dim",
                  "v_head_dim",
                  "mtp_num_layers"});
  ModelConfig model;
  model.source = root.file();
  model.name = root.str("name");
  model.dtype = parseDType(root.str("dtype"), root.where("dtype"));
  if (isFp8(model.dtype)) {
    root.fail("dtype", "fp8 is not a model dtype: use bf16 with fp8: true");
  }
  // Bounds ~100x beyond any model trained today, so that the products the planner forms
  // (parameters ~ 12 h^2 layers, tokens x hidden, vocabulary x hidden) stay far inside int64.
  model.hidden_size = root.positiveInt("hidden_size", kMaxHidden);
  model.num_heads = root.positiveInt("num_heads", kMaxHeads);
  model.ffn_hidden_size = root.positiveInt("ffn_hidden_size", kMaxFfnHidden);
  model.seq_length = root.positiveInt("seq_length", kMaxSeqLength);
  model.vocab_size = root.positiveInt("vocab_size", kMaxVocab);
  if (root.has("kv_channels")) {
    model.kv_channels = root.positiveInt("kv_channels", kMaxHidden);
  } else if (model.hidden_size % model.num_heads != 0) {
    root.fail("num_heads",
              fmt::format("{} does not divide hidden_size {}", model.num_heads, model.hidden_size));
  }
  // Bounded like the hidden size: the query width a x d feeds the same int64 products.
  if (model.num_heads * model.headDim() > kMaxHidden) {
    root.fail("kv_channels", fmt::format("num_heads x kv_channels = {} is more than {}",
                                         model.num_heads * model.headDim(), kMaxHidden));
  }
  model.spec = readBlockSpec(root, model.num_heads);
  model.moe = readMoe(root, model.ffn_hidden_size);
  model.mla = readMla(root, model.spec, model.num_heads);
  if (model.mla.enabled()) {
    for (const char* key : {"kv_channels", "qk_layernorm"}) {
      if (root.has(key)) root.fail(key, "not with multi_latent_attention (it sets its own heads)");
    }
  }
  const bool has_experts = model.moe.num_experts > 0;

  bool seen_embedding = false, seen_head = false, seen_encoder = false, seen_cross = false;
  std::vector<YamlReader> groups = root.items("layers");
  for (size_t i = 0; i < groups.size(); ++i) {
    const YamlReader& group = groups[i];
    std::string type = group.str("type");
    bool last = i + 1 == groups.size();
    if (type == "embedding") {
      group.allowOnly({"type"});
      if (i != 0 || seen_embedding) group.fail("type", "embedding must be the first layer group");
      seen_embedding = true;
    } else if (type == "head") {
      group.allowOnly({"type"});
      if (!last) group.fail("type", "head must be the last layer group");
      seen_head = true;
    } else if (type == "encoder" || type == "decoder") {
      TransformerBlock block;
      block.type = type == "encoder" ? BlockType::kEncoder : BlockType::kDecoder;
      if (block.type == BlockType::kDecoder) {
        group.allowOnly({"type", "count", "cross_attention", "moe"});
        block.cross_attention = group.boolean("cross_attention");
        block.moe = group.has("moe") ? group.boolean("moe") : has_experts;
        if (block.moe && !has_experts) group.fail("moe", "true needs num_experts");
        if (block.cross_attention && !seen_encoder) {
          group.fail("cross_attention", "true needs encoder blocks before this group");
        }
        if (block.cross_attention && model.mla.enabled()) {
          group.fail("cross_attention", "true is not modelled with multi_latent_attention");
        }
        if (block.cross_attention && model.kv_channels > 0 &&
            model.kv_channels * model.num_heads != model.hidden_size) {
          group.fail("cross_attention",
                     "true is not modelled with kv_channels x num_heads != "
                     "hidden_size");
        }
        seen_cross = seen_cross || block.cross_attention;
      } else {
        group.allowOnly({"type", "count"});
        seen_encoder = true;
        if (seen_cross) group.fail("type", "encoder blocks after cross-attention");
      }
      int64_t count = group.positiveInt("count", kMaxLayers);
      // The total is bounded too: many groups of the largest count exhausted memory (found by
      // fuzzing, tests/fuzz).
      if (static_cast<int64_t>(model.blocks.size()) + count > kMaxLayers) {
        group.fail("count", fmt::format("{}: more than {} blocks in all", count, kMaxLayers));
      }
      model.blocks.insert(model.blocks.end(), count, block);
    } else {
      group.fail("type", "'" + type + "': unknown layer type (embedding, encoder, decoder, head)");
    }
  }
  if (!seen_embedding) root.fail("layers", "needs an embedding group first");
  if (!seen_head) root.fail("layers", "needs a head group last");
  if (model.blocks.empty()) root.fail("layers", "needs at least one encoder or decoder group");
  if (root.has("mtp_num_layers")) {
    // Bounded: each depth is a whole block on the last stage.
    model.mtp_layers = root.positiveInt("mtp_num_layers", 64);
    if (seen_encoder || model.blocks.back().type != BlockType::kDecoder) {
      root.fail("mtp_num_layers", "needs a decoder-only model");
    }
  }
  if (has_experts && model.moeLayers() == 0) {
    root.fail("num_experts", "set, but every decoder group says moe: false");
  }
  return model;
}

}  // namespace

bool ModelConfig::hasCrossAttention() const {
  for (const TransformerBlock& b : blocks) {
    if (b.cross_attention) return true;
  }
  return false;
}

int64_t ModelConfig::paddedVocab(int tp) const {
  int64_t multiple = 128 * static_cast<int64_t>(tp);
  return (vocab_size + multiple - 1) / multiple * multiple;
}

int64_t ModelConfig::moeLayers() const {
  int64_t n = 0;
  for (const TransformerBlock& b : blocks) n += b.moe ? 1 : 0;
  return n;
}

ModelConfig loadModelConfig(const std::string& path) {
  const std::string text = readInputFile(path, "YAML input");
  if (!looksLikeJson(text)) return readModel(YamlReader::fromString(text, path));
  // A Hugging Face config.json: named after its folder ("Llama-3.1-8B/config.json").
  namespace fs = std::filesystem;
  const fs::path file(path);
  std::string name = file.stem() == "config" && file.has_parent_path()
                         ? fs::absolute(file).parent_path().filename().string()
                         : file.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return readModel(YamlReader::fromString(huggingFaceModelYaml(text, path, name), path));
}

ModelConfig parseModelConfig(const std::string& yaml_text, const std::string& origin) {
  return readModel(YamlReader::fromString(yaml_text, origin));
}

namespace {
constexpr std::array<std::pair<std::string_view, Fp8Recipe>, 5> kFp8Recipes = {{
    {"delayed", Fp8Recipe::kDelayed},
    {"tensorwise", Fp8Recipe::kTensorwise},
    {"rowwise", Fp8Recipe::kRowwise},
    {"blockwise", Fp8Recipe::kBlockwise},
    {"mxfp8", Fp8Recipe::kMxfp8},
}};
}  // namespace

std::string_view fp8RecipeName(Fp8Recipe recipe) {
  for (const auto& [name, r] : kFp8Recipes) {
    if (r == recipe) return name;
  }
  return "?";
}

DType fp8RecipeDType(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::kRowwise:
      return DType::kFp8Row;
    case Fp8Recipe::kBlockwise:
      return DType::kFp8Block;
    case Fp8Recipe::kMxfp8:
      return DType::kMxfp8;
    case Fp8Recipe::kDelayed:
    case Fp8Recipe::kTensorwise:
      break;
  }
  return DType::kFp8;
}

Fp8Recipe parseFp8Recipe(std::string_view name, std::string_view where) {
  for (const auto& [n, r] : kFp8Recipes) {
    if (n == name) return r;
  }
  EVSIM_THROW(InputError,
              "{}: '{}': unknown FP8 recipe (delayed, tensorwise, rowwise, blockwise or mxfp8)",
              where, name);
}

}  // namespace evsim

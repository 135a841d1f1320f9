#include "config/hf_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"

namespace evsim {

namespace {

using nlohmann::json;

const std::set<std::string> kFamilies = {
    "LlamaForCausalLM",    "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM", "Qwen3ForCausalLM",   "Qwen3MoeForCausalLM"};

// Qwen3 normalises each query and key head (q_norm, k_norm: RMSNorm over head_dim).
const std::set<std::string> kQkNormFamilies = {"Qwen3ForCausalLM", "Qwen3MoeForCausalLM"};

// Keys without effect on the time or the memory of a training iteration.
const std::set<std::string> kWithoutEffect = {"_name_or_path",
                                              "bos_token_id",
                                              "eos_token_id",
                                              "pad_token_id",
                                              "initializer_range",
                                              "transformers_version",
                                              "use_cache",
                                              "pretraining_tp",
                                              "rms_norm_eps",
                                              "rope_theta",
                                              "rope_scaling",
                                              "model_type",
                                              "router_aux_loss_coef",
                                              "output_router_logits",
                                              "router_jitter_noise",
                                              "max_window_layers",
                                              "norm_topk_prob",
                                              "use_sliding_window",
                                              "sliding_window",
                                              "architectures",
                                              "torch_dtype",
                                              "hidden_act",
                                              "tie_word_embeddings",
                                              "attention_bias",
                                              "mlp_bias",
                                              "attention_dropout",
                                              "decoder_sparse_step",
                                              "mlp_only_layers"};

// The keys read into the model.
const std::set<std::string> kMapped = {"hidden_size",
                                       "intermediate_size",
                                       "num_attention_heads",
                                       "num_key_value_heads",
                                       "head_dim",
                                       "num_hidden_layers",
                                       "vocab_size",
                                       "max_position_embeddings",
                                       "num_local_experts",
                                       "num_experts",
                                       "num_experts_per_tok",
                                       "moe_intermediate_size",
                                       "shared_expert_intermediate_size"};

[[noreturn]] void refuse(const std::string& origin, const std::string& key,
                         const std::string& why) {
  EVSIM_THROW(InputError, "{}: {}: {}", origin, key, why);
}

int64_t positive(const json& root, const std::string& origin, const std::string& key) {
  if (!root.contains(key)) refuse(origin, key, "missing (a Hugging Face config.json has it)");
  const json& v = root.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 1)
    refuse(origin, key, "must be an integer >= 1");
  return v.get<int64_t>();
}

std::string modelYaml(const std::string& json_text, const std::string& origin,
                      const std::string& name);

}  // namespace

bool looksLikeJson(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

std::string huggingFaceModelYaml(const std::string& json_text, const std::string& origin,
                                 const std::string& name) {
  try {
    return modelYaml(json_text, origin, name);
  } catch (const json::exception& e) {
    // A key of the wrong type (value() and get() throw type_error): one line, not a crash.
    EVSIM_THROW(InputError, "{}: a key of the wrong type ({})", origin, e.what());
  }
}

namespace {

std::string modelYaml(const std::string& json_text, const std::string& origin,
                      const std::string& name) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    EVSIM_THROW(InputError, "{}: not valid JSON (a Hugging Face config.json is one object)",
                origin);
  }
  for (const auto& [key, value] : root.items()) {
    if (kMapped.count(key) == 0 && kWithoutEffect.count(key) == 0) {
      refuse(origin, key,
             "not mapped (it may change the work: eventsim maps the Llama family's keys; see "
             "config/hf_config.h)");
    }
  }
  const json arch = root.value("architectures", json::array());
  if (!arch.is_array() || arch.size() != 1 || !arch[0].is_string() ||
      kFamilies.count(arch[0].get<std::string>()) == 0) {
    refuse(origin, "architectures",
           fmt::format("{}: not one of the mapped families (LlamaForCausalLM, MistralForCausalLM, "
                       "MixtralForCausalLM, Qwen2ForCausalLM, Qwen2MoeForCausalLM, "
                       "Qwen3ForCausalLM, Qwen3MoeForCausalLM)",
                       arch.dump()));
  }
  const std::string family = arch[0].get<std::string>();
  const int64_t hidden = positive(root, origin, "hidden_size");
  const int64_t heads = positive(root, origin, "num_attention_heads");
  // Qwen3 sets its own head size (128 with 4096 / 64 heads in the 235B): Megatron's kv_channels.
  const bool head_dim = root.contains("head_dim") && !root["head_dim"].is_null();
  if (root.value("hidden_act", std::string("silu")) != "silu") {
    refuse(origin, "hidden_act", "the Llama family's gated MLP is mapped with silu (SwiGLU) only");
  }
  const bool sliding = root.contains("sliding_window") && !root["sliding_window"].is_null() &&
                       root.value("use_sliding_window", true);
  if (sliding) {
    refuse(origin, "sliding_window",
           fmt::format("{}: sliding-window attention is not modelled (full causal attention is)",
                       root["sliding_window"].dump()));
  }
  if (root.contains("mlp_only_layers") && !root["mlp_only_layers"].empty()) {
    refuse(origin, "mlp_only_layers", "dense layers among MoE layers are not mapped");
  }
  if (root.contains("decoder_sparse_step") && root["decoder_sparse_step"] != 1) {
    refuse(origin, "decoder_sparse_step", "only 1 (every layer MoE) is mapped");
  }
  std::string dtype = "bf16";
  const std::string torch_dtype = root.value("torch_dtype", std::string("bfloat16"));
  if (torch_dtype == "float16") dtype = "fp16";
  if (torch_dtype == "float32") dtype = "fp32";
  const bool bias = root.value("attention_bias", false) || root.value("mlp_bias", false);
  const bool tied = root.value("tie_word_embeddings", false);
  const double attention_dropout = root.value("attention_dropout", 0.0);

  std::string yaml = fmt::format(
      "name: {}\ndescription: imported from {}\ndtype: {}\nhidden_size: {}\nnum_heads: {}\n"
      "ffn_hidden_size: {}\nseq_length: {}\nvocab_size: {}\nnum_query_groups: {}\n"
      "normalization: rmsnorm\nactivation: swiglu\nposition_embedding: rope\n"
      "add_bias_linear: {}\nuntie_embeddings_and_output_weights: {}\nflash_attention: true\n"
      "hidden_dropout: 0.0\nattention_dropout: {}\n",
      name, family, dtype, hidden, heads, positive(root, origin, "intermediate_size"),
      positive(root, origin, "max_position_embeddings"), positive(root, origin, "vocab_size"),
      root.contains("num_key_value_heads") ? positive(root, origin, "num_key_value_heads") : heads,
      bias, !tied, attention_dropout);
  if (head_dim) yaml += fmt::format("kv_channels: {}\n", positive(root, origin, "head_dim"));
  if (kQkNormFamilies.count(family) > 0) yaml += "qk_layernorm: true\n";
  const char* experts_key = root.contains("num_local_experts") ? "num_local_experts"
                            : root.contains("num_experts")     ? "num_experts"
                                                               : nullptr;
  if (experts_key != nullptr) {
    yaml +=
        fmt::format("num_experts: {}\nmoe_router_topk: {}\n", positive(root, origin, experts_key),
                    positive(root, origin, "num_experts_per_tok"));
    if (root.contains("moe_intermediate_size")) {
      yaml +=
          fmt::format("moe_ffn_hidden_size: {}\n", positive(root, origin, "moe_intermediate_size"));
    }
    // DeepSeek-V3's group-limited routing (n_group groups, topk_group per token); 1 group: none.
    if (root.contains("n_group") && root.contains("topk_group") && root["n_group"] != 1) {
      yaml += fmt::format("moe_router_num_groups: {}\nmoe_router_group_topk: {}\n",
                          positive(root, origin, "n_group"), positive(root, origin, "topk_group"));
    }
    if (root.contains("shared_expert_intermediate_size") &&
        root["shared_expert_intermediate_size"] != 0) {
      yaml += fmt::format("moe_shared_expert_intermediate_size: {}\n",
                          positive(root, origin, "shared_expert_intermediate_size"));
    }
  }
  yaml += fmt::format(
      "layers:\n  - {{type: embedding}}\n  - {{type: decoder, count: {}, cross_attention: "
      "false}}\n  - {{type: head}}\n",
      positive(root, origin, "num_hidden_layers"));
  return yaml;
}

}  // namespace

}  // namespace evsim

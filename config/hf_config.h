#pragma once
// A Hugging Face `config.json` as a model (`--model path/config.json`): the Llama family as
// transformers writes it (LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM,
// Qwen2ForCausalLM, Qwen2MoeForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM: head_dim is the
// model's kv_channels, and Qwen3 adds its per-head q_norm / k_norm as qk_layernorm). Each key is
// mapped to the model file's (model_config.h) or known to change neither time nor memory (token
// ids, initialisation, rope frequencies, norm epsilon); any other key is refused by name, since it
// may change the work (multi-head latent attention, sliding windows, quantisation). Translated to
// the model YAML and read by the same checks. Choices a config.json does not hold, stated here so
// none is silent: dtype bf16 unless torch_dtype says float16 or float32; fused (flash) attention,
// as every current trainer runs; no hidden dropout (the Llama family has none); seq_length =
// max_position_embeddings, which the command line must override (RunOptions::loadModel asks for
// --seq-length).

#include <string>

#include "config/model_config.h"

namespace evsim {

// True when `text` is JSON (its first non-blank character is '{').
bool looksLikeJson(const std::string& text);

// The model YAML (model_config.h's format) for a config.json's text; throws InputError naming
// `origin` and the key on anything it cannot map.
std::string huggingFaceModelYaml(const std::string& json_text, const std::string& origin,
                                 const std::string& name);

}  // namespace evsim

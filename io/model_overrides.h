#pragma once
// Megatron-LM's model arguments on the command line, so that a bundled model can be resized
// without a new YAML ("--seq-length 32768 --num-layers 40") and a Megatron launch line reads as is:
//   --seq-length --num-layers --hidden-size --num-attention-heads --ffn-hidden-size
//   --num-query-groups (--group-query-attention) --kv-channels --qk-layernorm --vocab-size
//   --use-flash-attn --swiglu
//   --normalization LayerNorm|RMSNorm --position-embedding-type learned_absolute|rope
//   --disable-bias-linear --untie-embeddings-and-output-weights --fp8-format hybrid|e4m3
//   --fp8-recipe delayed|tensorwise|rowwise|blockwise|mxfp8 (implies FP8 GEMMs)
//   --bf16 | --fp16 --hidden-dropout P --attention-dropout P --use-rotary-position-embeddings
// Each replaces the model file's value; the result is checked as a file would be (one line naming
// the flag on an impossible shape).

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "config/model_config.h"

namespace evsim {

struct ModelOverrides {
  std::optional<int64_t> seq_length, num_layers, hidden_size, num_heads, ffn_hidden_size,
      num_query_groups, vocab_size, kv_channels;
  bool group_query_attention = false;
  bool qk_layernorm = false;
  bool flash_attention = false;
  bool swiglu = false;
  bool disable_bias_linear = false;
  bool untie_embeddings = false;
  std::string normalization;
  std::string position_embedding;
  std::string fp8_format;
  std::string fp8_recipe;
  bool bf16 = false, fp16 = false;
  std::optional<double> hidden_dropout, attention_dropout;  // 0 drops the dropout ops

  void addOptions(CLI::App& app);
  // Throws InputError naming the flag when the overridden model is impossible.
  void apply(ModelConfig& model) const;
  bool any() const;
};

}  // namespace evsim

#pragma once
// A transformer model as eventsim sees it: the shapes that decide every op, and its layer groups
// in order. Loaded from configs/models/*.yaml:
//
//   name: gpt2-345m
//   dtype: fp16                 # fp16 | bf16 | fp32
//   hidden_size: 1024
//   num_heads: 16
//   ffn_hidden_size: 4096
//   seq_length: 1024
//   vocab_size: 50257           # padded as Megatron does (multiple of 128 x TP size)
//   layers:                     # in order
//     - {type: embedding}
//     - {type: decoder, count: 24, cross_attention: false}   # self-attention + MLP blocks
//     - {type: head}            # final layernorm, LM head GEMM, cross-entropy
//
// Block types: `encoder` (self-attention + MLP, as BERT and the T5 encoder), `decoder` (causal
// self-attention + MLP, plus cross-attention to the encoder output when cross_attention: true, as
// T5's decoder). Causal masking does not change the work Megatron does, so GPT blocks are decoder
// blocks without cross-attention.

#include <cstdint>
#include <string>
#include <vector>

#include "events/dtype.h"

namespace evsim {

enum class BlockType { kEncoder, kDecoder };

struct TransformerBlock {
  BlockType type = BlockType::kEncoder;
  bool cross_attention = false;
};

struct ModelConfig {
  std::string name;
  std::string source;  // file it was loaded from, for messages
  DType dtype = DType::kFp16;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t ffn_hidden_size = 0;
  int64_t seq_length = 0;
  int64_t vocab_size = 0;
  std::vector<TransformerBlock> blocks;  // one entry per transformer layer, in order

  int64_t numLayers() const { return static_cast<int64_t>(blocks.size()); }
  int64_t headDim() const { return hidden_size / num_heads; }
  bool hasCrossAttention() const;
  // Vocabulary padded to a multiple of 128 * tp, as Megatron's make_vocab_size_divisible_by does.
  int64_t paddedVocab(int tp) const;
  // Parameters of one transformer block (weights + biases + layernorms), unsplit.
  int64_t blockParameters(const TransformerBlock& block) const;
  // Word embedding (padded vocabulary x hidden) plus learned positions (seq x hidden).
  int64_t embeddingParameters(int tp) const;
  int64_t totalParameters() const;
};

// Throws InputError naming the file, key and rule on any bad or unknown entry.
ModelConfig loadModelConfig(const std::string& path);
ModelConfig parseModelConfig(const std::string& yaml_text, const std::string& origin);

}  // namespace evsim

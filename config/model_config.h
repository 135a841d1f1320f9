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
//
// The block's architecture (one block spec for every layer; Megatron-LM's argument names), each
// optional with GPT's choice as the default:
//   num_query_groups: 8          # grouped-query attention: K/V heads (default num_heads: MHA)
//   kv_channels: 128             # channels per attention head (Megatron --kv-channels, Hugging
//                                # Face head_dim; default hidden_size / num_heads): Q is
//                                # num_heads x this wide and the projection reads it (Qwen3)
//   qk_layernorm: true           # the norm on each Q and K head after the QKV GEMM (Megatron
//                                # --qk-layernorm, Qwen3's q_norm / k_norm; weights of one head)
//   normalization: rmsnorm       # layernorm | rmsnorm
//   activation: swiglu           # gelu | swiglu (fc1 is one fused [gate | up] GEMM, as Megatron)
//   position_embedding: rope     # learned | rope
//   add_bias_linear: false       # biases on the linear layers
//   untie_embeddings_and_output_weights: true   # the LM head has its own weight
//   flash_attention: true        # fused attention: no s x s scores saved (Megatron
//                                # --use-flash-attn)
//   fp8: true                    # linear layers' GEMMs in FP8, everything else in `dtype`
//   fp8_recipe: delayed          # delayed | tensorwise | rowwise | blockwise | mxfp8 (implies
//                                # fp8: true; default delayed, Transformer Engine's)
//   hidden_dropout: 0.0          # 0 drops the dropout ops and their masks (default 0.1)
//   attention_dropout: 0.0       # likewise for the attention probabilities (default 0.1)
//
// Mixture of experts (Megatron-LM's argument names; all optional, no experts by default):
//   num_experts: 8               # E routed experts per MoE block
//   moe_router_topk: 2           # k experts per token
//   moe_ffn_hidden_size: 14336   # each expert's FFN size (default ffn_hidden_size)
//   moe_shared_expert_intermediate_size: 0   # shared experts' total FFN size, every token
//   moe_expert_capacity_factor: 1.25         # tokens per expert padded/dropped to cf x T*k/E
//                                            # (absent: dropless)
//   moe_load_imbalance: 1.0      # dropless: the busiest expert rank's tokens / the average
//   moe_router_num_groups: 8     # node-limited (group-limited) routing, DeepSeek-V3's: the
//   moe_router_group_topk: 4     #   experts in G groups, each token routed within its top M
//                                #   groups only (both or neither; absent: no limit)
// Multi-head latent attention (DeepSeek-V2/V3; Megatron-LM's --multi-latent-attention and its
// arguments), replacing the QKV GEMM; all required with multi_latent_attention: true except
// q_lora_rank (absent: Q is one column-parallel GEMM from h, as DeepSeek-V2-Lite):
//   multi_latent_attention: true
//   q_lora_rank: 1536            # Q's low-rank latent (q_down h -> r_q, RMSNorm, q_up)
//   kv_lora_rank: 512            # the K/V latent (kv_down h -> r_kv + d_rope, RMSNorm, kv_up)
//   qk_head_dim: 128             # per-head Q/K channels without position (no RoPE)
//   qk_pos_emb_head_dim: 64      # per-head decoupled RoPE channels (K's one head is shared)
//   v_head_dim: 128              # per-head V channels (the output projection reads a x this)
// Multi-token prediction (DeepSeek-V3; Megatron-LM's --mtp-num-layers), decoder-only models:
//   mtp_num_layers: 1            # depth D: D extra blocks on the last pipeline stage, each fed the
//                                # previous depth's hidden states and the next token's embedding
// Each depth: the embedding of the shifted tokens (the embedding table, shared: a copy on the last
// stage when the embedding is elsewhere), RMSNorms of both inputs, eh_proj (2h -> h), one block of
// the model's last kind, a norm and the shared output layer with its own cross-entropy.
// A decoder group is MoE when num_experts is set unless it says `moe: false` (DeepSeek-V3's first
// dense layers); its MLP becomes router + experts (+ shared experts), the attention is unchanged.
// ops/layer_ops.cpp builds each layer's op list from these; parameters, FLOPs and saved
// activations are summed from those op lists (ops/layer_footprint.h), never from formulas.

#include <cstdint>
#include <string>
#include <vector>

#include "events/dtype.h"

namespace evsim {

// Bounds ~100x beyond any model trained today, so that the products the planner forms (parameters
// ~ 12 h^2 layers, tokens x hidden, vocabulary x hidden) stay far inside int64; the attention
// scores (b x a x s^2) are bounded with the strategy (strategyViolation).
inline constexpr int64_t kMaxHidden = int64_t{1} << 20;
inline constexpr int64_t kMaxHeads = int64_t{1} << 16;
inline constexpr int64_t kMaxFfnHidden = int64_t{1} << 22;
inline constexpr int64_t kMaxSeqLength = int64_t{1} << 24;
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;
inline constexpr int64_t kMaxExperts = int64_t{1} << 12;

enum class BlockType { kEncoder, kDecoder };

struct TransformerBlock {
  BlockType type = BlockType::kEncoder;
  bool cross_attention = false;
  bool moe = false;  // the MLP is the model's mixture of experts (ModelConfig::moe)
  bool operator==(const TransformerBlock&) const = default;
};

enum class NormKind { kLayerNorm, kRmsNorm };
enum class MlpKind { kGelu, kSwiGlu };
// How FP8 GEMM operands are scaled (Transformer Engine's and torchao's recipes; ops/fp8_casts.h
// lists each one's casts, docs/TECHNIQUES.md compares them):
//   delayed     per-tensor scale from the amax history, amax taken inside the cast (TE default)
//   tensorwise  per-tensor scale from the tensor's own amax: a separate amax pass first
//   rowwise     one scale per row (torchao): the wgrad operands are scaled along the other axis,
//               so they are cast again from the 16-bit tensor in the backward
//   blockwise   1x128 activation / 128x128 weight blocks (DeepSeek-V3, TE Float8BlockScaling)
//   mxfp8       MX: an E8M0 scale per 32 elements (Blackwell tensor cores)
enum class Fp8Recipe { kDelayed, kTensorwise, kRowwise, kBlockwise, kMxfp8 };
std::string_view fp8RecipeName(Fp8Recipe recipe);
// The GEMM operand dtype a recipe runs (fp8, fp8_row, fp8_block, mxfp8).
DType fp8RecipeDType(Fp8Recipe recipe);
// Parses a recipe name; InputError naming `where` on anything else.
Fp8Recipe parseFp8Recipe(std::string_view name, std::string_view where);
enum class PositionKind { kLearned, kRope };

// What every transformer block of the model is made of (see the header comment).
struct BlockSpec {
  int64_t query_groups = 0;  // K/V heads; == num_heads for multi-head attention
  NormKind norm = NormKind::kLayerNorm;
  MlpKind mlp = MlpKind::kGelu;
  PositionKind position = PositionKind::kLearned;
  bool bias = true;
  bool untied_output = false;  // untie_embeddings_and_output_weights
  bool flash_attention = false;
  bool qk_layernorm = false;  // a norm over each Q and K head (kv_channels wide)
  bool fp8 = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // with fp8 only
  bool hidden_dropout = true;     // probability > 0: dropout ops after attention, MLP, embedding
  bool attention_dropout = true;  // probability > 0: dropout on the attention probabilities
};

// Multi-head latent attention's sizes (see the header comment); kv_lora_rank 0: not MLA.
struct MlaSpec {
  int64_t q_lora_rank = 0;  // 0: Q projected directly from h
  int64_t kv_lora_rank = 0;
  int64_t qk_head_dim = 0;  // without the RoPE channels
  int64_t qk_pos_emb_head_dim = 0;
  int64_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  int64_t qkHeadDim() const { return qk_head_dim + qk_pos_emb_head_dim; }
  bool operator==(const MlaSpec&) const = default;
};

// The mixture of experts of the model's MoE blocks (see the header comment).
struct MoeSpec {
  int64_t num_experts = 0;  // 0: a dense model
  int64_t top_k = 0;
  int64_t expert_ffn = 0;      // each expert's FFN hidden size
  int64_t shared_ffn = 0;      // shared experts' FFN hidden size (0: none)
  double capacity_factor = 0;  // 0: dropless
  double load_imbalance = 1.0;
  // Group-limited routing (Megatron's --moe-router-num-groups / --moe-router-group-topk; the
  // HF configs' n_group / topk_group): the experts fall into `router_groups` equal groups of
  // consecutive experts and each token picks its k experts inside its best `router_group_topk`
  // groups. 0: no limit. With one group per node of the EP group it bounds the nodes a token is
  // sent to (DeepSeek-V3: 8 groups, 4 per token; ops/moe_dispatch.h).
  int64_t router_groups = 0;
  int64_t router_group_topk = 0;
  // Routed token copies an expert rank processes, relative to T x k tokens: the capacity factor
  // (padded to capacity) or, dropless, the busiest rank's share.
  double tokenFactor() const { return capacity_factor > 0 ? capacity_factor : load_imbalance; }
};

struct ModelConfig {
  std::string name;
  std::string source;  // file it was loaded from, for messages
  DType dtype = DType::kFp16;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t ffn_hidden_size = 0;
  int64_t kv_channels = 0;  // per-head channels; 0: hidden_size / num_heads
  int64_t seq_length = 0;
  int64_t vocab_size = 0;
  BlockSpec spec;
  MoeSpec moe;
  MlaSpec mla;
  int64_t mtp_layers = 0;                // multi-token prediction depth (0: none)
  std::vector<TransformerBlock> blocks;  // one entry per transformer layer, in order

  int64_t numLayers() const { return static_cast<int64_t>(blocks.size()); }
  int64_t headDim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_heads; }
  int64_t queryGroups() const { return spec.query_groups > 0 ? spec.query_groups : num_heads; }
  // The dtype of GEMM operands: the FP8 recipe's with `fp8: true`, the model dtype otherwise.
  DType gemmDtype() const { return spec.fp8 ? fp8RecipeDType(spec.fp8_recipe) : dtype; }
  // FSDP gathers the blocks' linear weights in fp8 (torchao's float8 all-gather, Megatron's
  // --fp8-param-gather): every recipe but rowwise, whose forward and backward need the weight
  // scaled along different axes and so gather it in 16 bits.
  bool fp8WeightGather() const { return spec.fp8 && spec.fp8_recipe != Fp8Recipe::kRowwise; }
  bool hasCrossAttention() const;
  // Vocabulary padded to a multiple of 128 * tp, as Megatron's make_vocab_size_divisible_by does.
  int64_t paddedVocab(int tp) const;
  int64_t moeLayers() const;
};

// Throws InputError naming the file, key and rule on any bad or unknown entry.
ModelConfig loadModelConfig(const std::string& path);
ModelConfig parseModelConfig(const std::string& yaml_text, const std::string& origin);

}  // namespace evsim

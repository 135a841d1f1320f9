#pragma once
// Megatron-LM op lists of one micro-batch under tensor parallelism t, per rank:
//
// Block forward: layernorm; QKV GEMM (column-parallel, 3h/t outputs); attention scores batched GEMM
// (b*a/t heads); fused scale + mask + softmax; attention dropout; attention x V batched GEMM;
// output projection GEMM (row-parallel, input h/t) then all-reduce over the t group; dropout;
// residual add; layernorm; fc1 (column-parallel) + GeLU; fc2 (row-parallel) then all-reduce;
// dropout; residual add. Cross-attention blocks (T5 decoder) add a layernorm, Q and KV GEMMs, the
// attention core over the encoder sequence, projection + all-reduce, dropout and add.
// Backward runs the reverse: per GEMM a data-gradient and a weight-gradient GEMM, the element-wise
// backward ops, and the all-reduce of the input gradient of each column-parallel GEMM (Megatron's
// `f` operator), i.e. two per self-attention block.
// Embedding (vocabulary-parallel lookup + all-reduce, position add, dropout) on the first stage;
// final layernorm, LM head GEMM (vocabulary-parallel) and the vocab-parallel cross-entropy (three
// fp32 all-reduces of one value per token) on the last.
//
// Sequence parallelism (Megatron, Korthikanti et al. 2022 section 4.2.2): the layernorm, dropout
// and residual-add regions hold s/t tokens; the all-reduce after each row-parallel GEMM becomes a
// reduce-scatter and an all-gather precedes each column-parallel GEMM. Backward runs the reverse
// (all-gather of the output gradient before a row-parallel GEMM, reduce-scatter of the input
// gradient after a column-parallel one) plus Megatron's re-all-gather of the column-parallel input
// for its weight gradient. The embedding output is reduce-scattered; the head all-gathers before
// the LM head GEMM. Collectives carry the full buffer in message_bytes (nccl-tests' "size").
//
// Activation recomputation: `full` re-runs a block's forward ops (TP collectives included) at the
// start of its backward; `selective` re-runs the attention core (scores, scale+mask+softmax,
// attention dropout, x V) right before the attention core's backward. Recomputed ops are the
// forward events again, marked OpInstance::recompute.
//
// GEMMs follow PyTorch's Linear: forward Y = X W^T (layout nt), dgrad dX = dY W (nn), wgrad
// dW = dY^T X (tn).
//
// The model's block spec (model_config.h) changes the lists: grouped-query attention narrows the
// QKV GEMM to (h + 2*g*d)/t outputs and the attention core's K/V to g/t heads; RMSNorm replaces
// LayerNorm (no bias); SwiGLU makes fc1 one fused [gate | up] GEMM of 2f/t outputs followed by
// swiglu_fwd (Megatron's --swiglu: the FLOPs of Llama's three GEMMs); RoPE rotates Q and K after
// the QKV GEMM instead of adding learned positions in the embedding; without biases the weights
// lose them; flash attention replaces the scores / softmax / dropout / x V ops with one fused op
// that saves no s x s tensor (selective recomputation then has nothing left to recompute); a zero
// dropout probability removes the dropout ops; fp8 makes the linear layers' GEMMs fp8 (the
// attention core, the embedding and the LM head stay in the model dtype, as Transformer Engine
// runs Megatron).
//
// Every forward op carries what it owns and keeps (OpInstance::weights, ::saved_bytes), so that
// parameters and activation memory are sums over op lists (layer_footprint.h). Saved bytes follow
// Korthikanti et al. 2022 op by op: a norm keeps its input; a linear layer its input (1 byte per
// element for fp8 GEMMs, as Transformer Engine saves the cast input); the attention scores GEMM Q
// and K, the softmax its output, attention dropout its 1-byte mask, x V the dropout output and V;
// GeLU / SwiGLU their input; dropout its mask. Selective recomputation drops the s x s ones; full
// recomputation keeps only the block input (on the block's first op).
//
// TP communication overlap (Megatron's --tp-comm-overlap, Transformer Engine's userbuffers with
// its default ub_cfgs; dense self-attention and MLP blocks, the four linears TE names qkv, proj,
// fc1, fc2):
//   - ring exchange (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): the sequence-parallel
//     all-gather before the GEMM becomes t-1 point-to-point steps of one shard (s*b/t tokens) to
//     the TP ring neighbour, each beside the GEMM of the shard already present; the GEMM runs as t
//     chunks of s*b/t rows: [p2p, gemm] x (t-1), gemm. Exposed: g + (t-1) max(g', c), g' the
//     chunk slowed beside the transfer (overlap_slowdown.h);
//   - pipelined reduce-scatter (proj_fprop, fc2_fprop; num_splits 4): the GEMM runs as 4 chunks of
//     s*b/4 rows and each chunk's reduce-scatter (a quarter of the buffer) runs beside the next
//     chunk: gemm, [rs, gemm] x 3, rs. Exposed: g + 3 max(g', r) + r;
//   - bulk (qkv_dgrad/wgrad, fc1_dgrad/wgrad): the input's re-gather runs beside the dgrad GEMM
//     and the input gradient's reduce-scatter beside the wgrad GEMM (a split backward defers the
//     wgrad to W: the reduce-scatter then runs alone in B).
// Each chunk or overlapped collective is an op with OpInstance::overlap_ops = 1 (or the ops it
// covers); the first GEMM chunk carries the layer's weights and saved bytes. TE launches the
// chunks from one call: beyond the first GEMM chunk and the first transfer (the GEMM and the
// collective they replace) each is OpInstance::issued_with_previous (no host time of its own). Cross-attention, MLA
// and MoE experts keep their plain collectives (TE's userbuffers name no other GEMM).
//
// FP8 GEMMs (the model's fp8 recipe) add their casts as ops of their own before the GEMM that
// reads them (ops/fp8_casts.h): the input's before each forward GEMM, the output gradient's before
// each dgrad, rowwise's column-scaled input before each wgrad; the weights' once per iteration
// beside the optimizer step (plan/).

#include <cstdint>
#include <span>
#include <vector>

#include "config/model_config.h"
#include "events/event.h"
#include "events/event_table.h"
#include "ops/cp_comm.h"
#include "ops/eager_ops.h"
#include "ops/fp8_casts.h"
#include "ops/op_list.h"
#include "ops/recompute.h"

namespace evsim {

struct LayerShape {
  int64_t micro_batch = 1;   // b
  int64_t seq = 1;           // s (decoder and encoder use the same length)
  int64_t hidden = 1;        // h
  int64_t heads = 1;         // a
  int64_t query_groups = 1;  // g (== a without grouped-query attention)
  int64_t head_dim = 1;      // d (h/a unless the model sets kv_channels)
  int64_t ffn = 1;           // f
  int64_t vocab = 1;         // padded vocabulary
  int tp = 1;                // t
  int cp = 1;                // C: the rank holds s/C tokens of each sequence
  CpComm cp_comm = CpComm::kP2p;  // how attention's inputs are exchanged (ops/cp_comm.h)
  int cp_a2a = 0;                 // a2a+p2p: the a2a group's size (its first hierarchical size)
  int ep = 1;                // E: the rank holds num_experts/E experts of each MoE block
  int etp = 1;               // expert TP: each routed expert's FFN split over etp ranks
  MoeSpec moe;
  MlaSpec mla;  // multi-latent attention's sizes (mla.enabled(): its op list, ops/mla_ops.cpp)
  int64_t mtp_layers = 0;      // multi-token prediction depth (ops/mtp_ops.cpp)
  TransformerBlock mtp_block;  // each depth's block: the model's last
  DType dtype = DType::kFp16;
  DType gemm_dtype = DType::kFp16;  // linear layers' GEMMs (fp8 with the model's fp8: true)
  BlockSpec spec;
  Placement tp_group;              // where the t ranks sit (group_size == tp)
  Placement cp_ring;               // a ring neighbour pair of the CP group (CP > 1)
  Placement cp_group;              // the CP collectives' group (a2a, allgather; a2a+p2p's a2a)
  Placement ep_group;              // the E ranks exchanging tokens (EP > 1)
  Placement etp_group;             // the etp ranks splitting the experts (all-gather tokens)
  bool sequence_parallel = false;  // needs tp >= 2 and tp dividing seq
  // Transformer Engine's userbuffers overlap (Megatron's --tp-comm-overlap; needs SP and the
  // tokens splitting into tp x 4 chunks): the op lists below with the TP communication chunked
  // beside the GEMMs.
  bool tp_comm_overlap = false;
  // DeepEP's dispatch and combine (Megatron's flex dispatcher with --moe-enable-deepep) instead of
  // the all-to-all of every routed copy (ops/moe_dispatch.h).
  bool deepep = false;
  // xformers' fused SwiGLU (Strategy::swiglu_recompute_product): fc2 keeps no input; the
  // backward recomputes the product silu(gate) * up before fc2's gradients.
  bool swiglu_recompute_product = false;
  Recompute recompute = Recompute::kNone;
  // Eager PyTorch (torchtitan without torch.compile; ops/eager_ops.h): the blocks' norms, RoPE and
  // SwiGLU run as eager kernels, each a memory_pass of its own (eager_blocks), and so do the
  // loss's cross-entropy (eager_loss) and the final norm (eager_final_norm: outside the blocks
  // torchtitan compiles, so eager even with torch.compile on).
  bool eager_blocks = false;
  bool eager_loss = false;
  bool eager_final_norm = false;
  // torchtitan's Llama rotates Q and K through complex64 views (apply_rotary_emb). Inductor
  // generates no code for complex tensors and falls back to the aten kernels (torch/_inductor/
  // lowering.py: view_as_complex a fallback that needs a contiguous input, "Torchinductor does not
  // support code generation for complex operators"), so RoPE runs as eager's three kernels per
  // rotated tensor whether or not the blocks are compiled (ops/eager_ops.h).
  bool complex_rope = false;
  // torchtitan's repeat_kv: under GQA (g < a) K and V are copied to every query head before SDPA,
  // compiled or not (a materialised expand + reshape), and autograd sums the copies' gradients
  // back (ops/eager_ops.h).
  bool repeat_kv = false;
  // Transformer Engine's ring attention (Megatron's CP p2p and a2a+p2p): the K/V packing, output
  // corrections and gradient accumulations (ops/cp_ring_copies.h) beside its fused-attention
  // calls. PyTorch's own ring (torchtitan) merges otherwise: not modelled.
  bool te_ring_copies = false;
  // PyTorch's DTensor tensor parallelism (torchtitan: PrepareModuleInput all-gathers a sequence-
  // parallel input before the column-parallel linears, whose autograd then keeps the gathered
  // tensor): QKV, FC1 and the LM head save all T tokens of their input, where Megatron/TE's
  // linears keep their T / t shard and re-gather it in the backward. Same as the shard without SP.
  bool saves_gathered_input = false;
  // The K/V heads the fused attention kernel reads, saves for its backward and (under CP)
  // exchanges: every query head's copy after repeat_kv, else the model's groups.
  int64_t kvHeadsIntoAttention() const { return repeat_kv ? heads : query_groups; }

  // The sequence's tokens on this rank: s/C under context parallelism.
  int64_t localSeq() const { return seq / cp; }
  int cpA2a() const { return cpA2aSize(cp_comm, cp, cp_a2a); }
  int cpRing() const { return cpRingSize(cp_comm, cp, cp_a2a); }
  int64_t tokens() const { return micro_batch * localSeq(); }
  int64_t headDim() const { return head_dim; }
  // Output features of the QKV GEMM on one rank: a query heads and 2g key/value heads of d, over t.
  int64_t qkvWidth() const { return (heads + 2 * query_groups) * head_dim / tp; }
  // The attention output's features on one rank (the projection's input): a x d over t.
  int64_t attnWidth() const { return heads * head_dim / tp; }
  // Tokens of the layernorm / dropout / residual regions on one rank: s*b/t with SP.
  int64_t regionTokens() const { return sequence_parallel ? tokens() / tp : tokens(); }
  // Tokens of a column-parallel linear's saved input: the region, or all of them when gathered.
  int64_t columnInputTokens() const { return saves_gathered_input ? tokens() : regionTokens(); }
};

// The model's sizes and block spec at micro-batch `micro_batch` on `tp` tensor-parallel ranks,
// every other parallelism and technique off (plan/layer_shape.h adds a strategy's).
LayerShape modelLayerShape(const ModelConfig& model, int64_t micro_batch, int tp);

class LayerOpBuilder {
 public:
  LayerOpBuilder(const LayerShape& shape, EventTable& table) : shape_(shape), table_(table) {}

  void blockForward(const TransformerBlock& block, int layer, OpList& out);
  void blockBackward(const TransformerBlock& block, int layer, OpList& out);
  // `streams` = 2 for T5-style models that embed encoder and decoder inputs on the first stage.
  // The embedding's and the head's ops: ops/embedding_head_ops.cpp.
  void embeddingForward(int streams, OpList& out);
  void embeddingBackward(int streams, OpList& out);
  // `owns_output_weight`: the LM head GEMM's weight is this chunk's own (untied, or tied but on a
  // different chunk than the embedding, as Megatron keeps a copy on the last stage).
  // With multi-token prediction the head runs its depths after the main loss (mtpForward);
  // `owns_mtp_embedding`: the depths' embedding table is this chunk's own copy (the embedding is
  // on another chunk).
  void headForward(OpList& out, bool owns_output_weight, bool owns_mtp_embedding = false);
  void headBackward(OpList& out);
  // The multi-token-prediction depths alone (ops/mtp_ops.cpp), on the head's layer index.
  void mtpForward(OpList& out, bool owns_embedding);
  void mtpBackward(OpList& out);

 private:
  // The vocabulary-parallel cross-entropy's three fp32 all-reduces over TP, on the head's layer:
  // the main loss's, or (`mtp`) an MTP depth's, named apart (ops/embedding_head_ops.cpp).
  void vocabParallelLossAllReduces(OpList& out, bool mtp);
  // `weights`: parameter elements the op owns on this rank; `saved`: activation bytes it keeps
  // for its backward (forward ops only; zero for recomputed ops and, under full recomputation,
  // inside a block).
  void compute(OpList& out, int layer, std::string_view name, const Event& event,
               int64_t weights = 0, int64_t saved = 0);
  void norm(OpList& out, int layer, std::string_view name, bool backward);
  // Eager kernels (ops/eager_ops.h) as memory_pass ops; the first carries `weights` and `saved`.
  // A view: a single kernel is passed as a span of one, not a vector built per call.
  void eagerKernels(OpList& out, int layer, std::span<const EagerKernel> kernels,
                    int64_t weights = 0, int64_t saved = 0);
  // RoPE on Q and K heads, and SwiGLU, fused or eager (ops/eager_ops.h).
  void rope(OpList& out, int layer, bool backward);
  void repeatKv(OpList& out, int layer, bool backward);
  void swiglu(OpList& out, int layer, bool backward);
  // torchtitan's separate wq/wk/wv (w1/w3) read one input: eager autograd sums their input
  // gradients (`readers` - 1 kernels); Megatron's fused QKV / FC1 GEMM and Inductor have none.
  void eagerInputGradientSums(OpList& out, int layer, std::string_view name, int readers);
  void dropout(OpList& out, int layer, std::string_view name, int64_t elems, bool backward);
  void tpAllReduce(OpList& out, int layer, std::string_view name, int64_t bytes, DType dtype);
  void tpCollective(OpList& out, int layer, std::string_view name, EventKind kind, int64_t bytes);
  // SP: all-gather of a column-parallel GEMM's input (forward, and again for its wgrad backward).
  void gatherInput(OpList& out, int layer, std::string_view name);
  // Row-parallel output (forward) or column-parallel input gradient (backward): all-reduce, or
  // reduce-scatter with SP.
  void reduceOutput(OpList& out, int layer, std::string_view allreduce_name,
                    std::string_view reduce_scatter_name);
  void attentionCore(OpList& out, int layer);
  // The attention core without flash attention, Q and K of `qk_dim` and V of `v_dim` channels per
  // head (MLA's differ), forward or backward (with selective recomputation's re-run first).
  void unfusedAttentionCore(OpList& out, int layer, int64_t qk_dim, int64_t v_dim, bool backward);
  // A linear layer: `bias` bias elements on this rank (0 without biases); `saved_input` the
  // activation elements it keeps (its input, or its input's sequence shard under SP).
  void linearForward(OpList& out, int layer, std::string_view name, int64_t rows,
                     int64_t out_features, int64_t in_features, int64_t bias, int64_t saved_input);
  void linearBackward(OpList& out, int layer, std::string_view dgrad, std::string_view wgrad,
                      int64_t rows, int64_t out_features, int64_t in_features);
  // TP communication overlap (above): the column-parallel forward with its input's ring exchange,
  // the row-parallel forward with its pipelined reduce-scatter, the row-parallel backward with
  // its output gradient's ring exchange, and the column-parallel backward with the bulk re-gather
  // and reduce-scatter (ops/layer_tp_overlap_ops.cpp).
  void ringGatherLinearForward(OpList& out, int layer, std::string_view ring,
                               std::string_view gemm, int64_t out_features, int64_t bias,
                               int64_t saved_input);
  void linearForwardReduceScatter(OpList& out, int layer, std::string_view gemm,
                                  std::string_view reduce_scatter, int64_t in_features,
                                  int64_t bias);
  void ringGatherLinearBackward(OpList& out, int layer, std::string_view ring,
                                std::string_view dgrad, std::string_view wgrad,
                                int64_t in_features);
  void bulkOverlapLinearBackward(OpList& out, int layer, std::string_view regather,
                                 std::string_view dgrad, std::string_view wgrad,
                                 std::string_view reduce_scatter, int64_t out_features);
  // One ring step: a shard of the activation to the TP ring neighbour, beside the next op.
  void tpRingStep(OpList& out, int layer, std::string_view name, bool issued_with_previous);
  // FP8 GEMMs' casts (ops/fp8_casts.h) before the GEMM that reads them; `weight_grad` marks
  // those only the wgrad needs (zero-bubble W tasks run them).
  void fp8Casts(OpList& out, int layer, const std::vector<Fp8Cast>& casts,
                bool weight_grad = false);
  // Bytes per element a GEMM of `dtype` keeps of its input for the wgrad.
  int64_t savedInputBytes(DType dtype) const;
  // Attention's forward, backward, core and qk-norm: ops/attention_ops.cpp.
  void attentionForward(OpList& out, int layer, bool cross);
  // Multi-latent attention (ops/mla_ops.cpp) in place of the QKV GEMM, core and projection.
  void mlaForward(OpList& out, int layer);
  void mlaBackward(OpList& out, int layer);
  void mlaCore(OpList& out, int layer, bool backward);
  void attentionBackward(OpList& out, int layer, bool cross);
  // qk_layernorm: the norm over each of the rank's Q and K heads (d channels, weights replicated).
  void qkNorm(OpList& out, int layer, bool backward);
  void mlpForward(OpList& out, int layer);
  void mlpBackward(OpList& out, int layer);
  // torchtitan's per-op selective checkpointing (Recompute::kSelectiveOp, ops/op_checkpoint.cpp):
  // the bytes a block keeps (its input and the saved ops' outputs), and the forward ops its
  // backward re-runs first (every op but the saved ones).
  int64_t opCheckpointSavedBytes() const;
  void opCheckpointRecompute(OpList& out, int layer);
  // The fused attention core, forward or backward, under the shape's --cp-comm-type
  // (ops/cp_attention.cpp; one fused op without CP).
  void flashAttentionCore(OpList& out, int layer, bool backward);
  // One fused attention call: a causal block of `seq` queries over the rank's heads / `head_split`
  // (ring step: s/C, or s/R under a2a+p2p; a2a: the whole sequence).
  Event flashAttentionStep(bool backward, int64_t seq, int head_split) const;
  // The K/V (and, backward, their gradients) exchange with the ring neighbours, beside the step.
  void cpRingExchange(OpList& out, int layer, std::string_view name, int64_t bytes);
  // Transformer Engine's ring attention (AttnFuncWithCPAndKVP2P), the one loop both attention
  // kinds run (ops/cp_attention.cpp: GQA/MHA under p2p and a2a+p2p; ops/mla_ops.cpp: MLA): `ring`
  // fused calls of `step`, the first keeping `saved_bytes`, with the K/V block exchanges beside
  // them, and TE's copies around them when `copies`.
  struct RingAttention {
    Event step;                  // one fused call (forward or backward)
    int ring = 1;                // steps (ranks of the ring); 1: one call, no exchange
    int64_t kv_block_bytes = 0;  // the rank's K and V together, as exchanged
    int64_t saved_bytes = 0;     // what the forward's first call keeps
    bool copies = false;         // TE's ring copies (ops/cp_ring_copies.h; K and V equal sizes)
    int64_t q_bytes = 0;         // the rank's Q (the copies' output corrections and dQ sums)
  };
  void ringAttention(OpList& out, int layer, bool backward, const RingAttention& ring);
  // An exposed collective over the CP collectives' group (a2a, allgather).
  void cpCollective(OpList& out, int layer, std::string_view name, EventKind kind, int64_t bytes);
  // Mixture of experts (ops/moe_ops.cpp): router, dispatch, experts, combine, shared experts.
  void moeForward(OpList& out, int layer);
  void moeBackward(OpList& out, int layer);
  // One token exchange over the EP group of `tokens` tokens' routed copies (none at E = 1): the
  // all-to-all of k x factor copies each, or DeepEP's two hops (ops/moe_dispatch.h): its RDMA hop
  // over the rail group (one rank per node) pipelined with its NVLink hop inside the node, or
  // the NVLink hop alone when the group is one node. `names`: {all-to-all, RDMA, NVLink}.
  struct ExchangeNames {
    std::string_view all_to_all, rdma, nvlink;
  };
  void epExchange(OpList& out, int layer, const ExchangeNames& names, int64_t tokens);
  void epAllToAll(OpList& out, int layer, std::string_view name, int64_t bytes, Placement group);
  // A collective over the expert-TP group (none at ETP 1).
  void etpCollective(OpList& out, int layer, std::string_view name, EventKind kind, int64_t bytes);
  // Routed token copies of `tokens` tokens (k x the token factor each, rounded up); the region's
  // copies are what the all-to-all sends, the rank's (after the TP gather) what its experts
  // process per micro-batch, in all and per local expert.
  int64_t routedRows(int64_t tokens) const;
  // The rank's tokens after the ETP gather: its region's, from each of the ETP ranks.
  int64_t expertRows() const { return routedRows(shape_.regionTokens() * shape_.etp); }
  int64_t rowsPerLocalExpert() const;

  // Saved bytes per element of what is kept in a fixed type, whatever the model dtype.
  static constexpr int64_t kMaskBytes = 1;     // dropout masks are stored as bytes
  static constexpr int64_t kLseBytes = 4;      // flash attention's fp32 log-sum-exp per query row
  static constexpr int64_t kTokenIdBytes = 8;  // Megatron's 8*s*b for token and position ids
  static constexpr int64_t kLogitBytes = 4;    // logits are upcast to fp32 for the cross-entropy

  int64_t e() const { return dtypeBytes(shape_.dtype); }
  int64_t bias(int64_t elements) const { return shape_.spec.bias ? elements : 0; }

  const LayerShape& shape_;
  EventTable& table_;
  bool mtp_block_ = false;    // building an MTP depth's block: its linear layers use the GEMM dtype
  bool recomputing_ = false;  // ops pushed now are recomputed forward ops
  bool saving_ = true;        // forward ops keep their saved bytes (false inside a fully
                              // recomputed block)
};

}  // namespace evsim

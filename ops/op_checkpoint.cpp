// torchtitan's per-op selective activation checkpointing (activation_checkpoint.py, ac mode
// "selective" with selective_ac_option "op"), for a dense block of attention and MLP with flash
// attention (plan/strategy_technique_checks.cpp refuses other blocks). Each block runs under a
// checkpoint whose policy saves the outputs of the ops in its save list (matmuls, the attention
// kernels, the functional reduce-scatter) except every second matmul, counted in forward order per
// block. In torchtitan's Llama the matmuls are wq 1, wk 2, wv 3, wo 4, then w1 5, w3 6, w2 7
// (SwiGLU) or fc1 5, fc2 6 (GELU): the odd ones are kept. Between the forward and the backward a
// block therefore holds its input and those outputs; before its backward it re-runs every other
// forward op (norms, the even matmuls, RoPE, the activation, residual adds, the SP all-gathers),
// reading the saved outputs instead of recomputing them. eventsim fuses wq/wk/wv into one QKV GEMM
// and w1/w3 into one FC1 GEMM, so the recomputed wk and w3 are GEMMs of those parts' widths.

#include "ops/layer_ops.h"

namespace evsim {

int64_t LayerOpBuilder::opCheckpointSavedBytes() const {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, d = s.headDim();
  const int64_t q_width = s.heads * d / t, kv_width = s.query_groups * d / t;
  const bool swiglu = s.spec.mlp == MlpKind::kSwiGlu;
  const bool reduce_scatter = s.sequence_parallel && t > 1;
  int64_t elems = s.regionTokens() * h;  // the block's input (the checkpoint's argument)
  elems += T * q_width;                  // wq (matmul 1)
  elems += T * kv_width;                 // wv (matmul 3)
  elems += T * q_width;                  // the attention output (flash attention)
  if (reduce_scatter) elems += s.regionTokens() * h;  // wo's reduce-scatter output
  elems += T * s.ffn / t;                             // w1 / fc1 (matmul 5)
  if (swiglu) {
    elems += T * h;  // w2 (matmul 7): its output before the TP reduction
    if (reduce_scatter) elems += s.regionTokens() * h;
  } else if (reduce_scatter) {
    elems += s.regionTokens() * h;  // fc2 (matmul 6) is rebuilt, its reduce-scatter kept
  }
  const int64_t heads = s.micro_batch * s.heads / t;
  return e() * elems + kLseBytes * heads * s.localSeq();
}

void LayerOpBuilder::opCheckpointRecompute(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, f = s.ffn;
  const int64_t kv_width = s.query_groups * s.headDim() / t;
  const int64_t region = s.regionTokens() * h;
  const bool swiglu = s.spec.mlp == MlpKind::kSwiGlu;
  // Without SP the row-parallel outputs are all-reduced, not in the save list: re-run.
  const auto rowParallelReduce = [&](std::string_view name) {
    if (!s.sequence_parallel) tpAllReduce(out, layer, name, T * h * e(), s.dtype);
  };
  norm(out, layer, "layernorm", false);
  gatherInput(out, layer, "qkv_input_allgather");
  linearForward(out, layer, "k_gemm", T, kv_width, h, 0, 0);  // wk, matmul 2
  qkNorm(out, layer, false);  // qk_layernorm: the norms re-run on the recomputed heads
  rope(out, layer, false);
  repeatKv(out, layer, false);  // SDPA's inputs are not in the save list: rebuilt
  linearForward(out, layer, "attn_proj_gemm", T, h, s.attnWidth(), 0, 0);  // wo, matmul 4
  rowParallelReduce("attn_proj_allreduce");
  dropout(out, layer, "dropout", region, false);
  compute(out, layer, "residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
  norm(out, layer, "mlp_layernorm", false);
  gatherInput(out, layer, "fc1_input_allgather");
  if (swiglu) {
    linearForward(out, layer, "fc1_up_gemm", T, f / t, h, 0, 0);  // w3, matmul 6
    this->swiglu(out, layer, false);
  } else {
    compute(out, layer, "gelu", makeCompute("gelu_fwd", {{"elems", T * f / t}}, "", s.dtype));
    linearForward(out, layer, "fc2_gemm", T, h, f / t, 0, 0);  // fc2, matmul 6
    rowParallelReduce("fc2_allreduce");
  }
  if (swiglu) rowParallelReduce("fc2_allreduce");  // w2's output is saved, its all-reduce is not
  dropout(out, layer, "mlp_dropout", region, false);
  compute(out, layer, "mlp_residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

}  // namespace evsim

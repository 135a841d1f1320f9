// Multi-token prediction (DeepSeek-V3 section 2.2; Megatron-Core's MultiTokenPredictionBlock), on
// the last pipeline stage after the main loss, per depth, for T tokens (region R = T/t with SP):
//
//   forward   embedding of the shifted tokens (vocabulary-parallel lookup, all-reduce or
//             reduce-scatter with SP); RMSNorm of it (enorm) and of the hidden states (hnorm);
//             eh_proj, column-parallel 2h -> h/t (with SP its concatenated input all-gathered),
//             its output all-gathered over TP; one transformer block of the model's last kind
//             (an MoE block for DeepSeek-V3); the final norm, the shared output layer and its
//             vocabulary-parallel cross-entropy (three fp32 all-reduces per token).
//   backward  the reverse; eh_proj's input gradient all-reduced (reduce-scattered with SP).
//
// Weights: the block, eh_proj and the three norms are the depth's own; the output layer is the
// main head's (its weight gradient accumulates there); the embedding table is the model's, held
// as a copy when the embedding is on another chunk (`owns_embedding`, as Megatron keeps one on
// the last stage). Saved bytes follow layer_ops.h's rules.
#include "ops/layer_ops.h"

namespace evsim {

void LayerOpBuilder::mtpForward(OpList& out, bool owns_embedding) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, v = s.vocab / s.tp;
  const int64_t region = s.regionTokens() * h;
  const int L = kHeadLayer;
  for (int64_t depth = 0; depth < s.mtp_layers; ++depth) {
    compute(out, L, "mtp_embedding",
            makeCompute("embedding_fwd", {{"tokens", T}, {"hidden", h}, {"vocab", v}}, "", s.dtype),
            owns_embedding && depth == 0 ? v * h : 0, kTokenIdBytes * T + e() * region);
    reduceOutput(out, L, "mtp_embedding_allreduce", "mtp_embedding_reduce_scatter");
    norm(out, L, "mtp_enorm", false);
    norm(out, L, "mtp_hnorm", false);
    if (s.sequence_parallel) {
      tpCollective(out, L, "mtp_eh_proj_input_allgather", EventKind::kAllGather, 2 * T * h * e());
    }
    mtp_block_ = true;
    linearForward(out, L, "mtp_eh_proj_gemm", T, h / t, 2 * h, bias(h / t), 2 * region);
    tpCollective(out, L, "mtp_eh_proj_output_allgather", EventKind::kAllGather, T * h * e());
    blockForward(s.mtp_block, L, out);
    mtp_block_ = false;
    norm(out, L, "mtp_final_layernorm", false);
    gatherInput(out, L, "mtp_lm_head_input_allgather");
    compute(out, L, "mtp_lm_head_gemm", makeGemm(T, v, h, "nt", s.dtype), 0,
            e() * s.regionTokens() * h);
    compute(out, L, "mtp_cross_entropy",
            makeCompute("cross_entropy_fwd", {{"rows", T}, {"cols", v}}, "", s.dtype), 0,
            kLogitBytes * T * v);
    vocabParallelLossAllReduces(out, /*mtp=*/true);
  }
}

void LayerOpBuilder::mtpBackward(OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, v = s.vocab / s.tp;
  const int L = kHeadLayer;
  for (int64_t depth = 0; depth < s.mtp_layers; ++depth) {
    compute(out, L, "mtp_cross_entropy_bwd",
            makeCompute("cross_entropy_bwd", {{"rows", T}, {"cols", v}}, "", s.dtype));
    gatherInput(out, L, "mtp_lm_head_input_regather");
    linearBackward(out, L, "mtp_lm_head_dgrad", "mtp_lm_head_wgrad", T, v, h);
    reduceOutput(out, L, "mtp_lm_head_input_grad_allreduce",
                 "mtp_lm_head_input_grad_reduce_scatter");
    norm(out, L, "mtp_final_layernorm_bwd", true);
    mtp_block_ = true;
    blockBackward(s.mtp_block, L, out);
    if (s.sequence_parallel) {
      tpCollective(out, L, "mtp_eh_proj_input_regather", EventKind::kAllGather, 2 * T * h * e());
    }
    linearBackward(out, L, "mtp_eh_proj_dgrad", "mtp_eh_proj_wgrad", T, h / t, 2 * h);
    mtp_block_ = false;
    if (s.sequence_parallel) {
      tpCollective(out, L, "mtp_eh_proj_input_grad_reduce_scatter", EventKind::kReduceScatter,
                   2 * T * h * e());
    } else {
      tpAllReduce(out, L, "mtp_eh_proj_input_grad_allreduce", 2 * T * h * e(), s.dtype);
    }
    norm(out, L, "mtp_hnorm_bwd", true);
    norm(out, L, "mtp_enorm_bwd", true);
    gatherInput(out, L, "mtp_embedding_grad_allgather");
    compute(
        out, L, "mtp_embedding_bwd",
        makeCompute("embedding_bwd", {{"tokens", T}, {"hidden", h}, {"vocab", v}}, "", s.dtype));
  }
}

}  // namespace evsim

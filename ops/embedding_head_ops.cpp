#include <array>
#include <string_view>

#include "ops/layer_ops.h"

namespace evsim {

// Megatron's first-stage extras (theoretical_memory_usage.py): the token and position ids (8 bytes
// per token), the embedding output and its dropout mask. A T5-style model embeds two streams
// (encoder and decoder inputs) through one shared table.
void LayerOpBuilder::embeddingForward(int streams, OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden;
  const int64_t region = s.regionTokens() * h;
  const bool learned = s.spec.position == PositionKind::kLearned;
  for (int i = 0; i < streams; ++i) {
    compute(out, kEmbeddingLayer, "word_embedding",
            makeCompute("embedding_fwd", {{"tokens", T}, {"hidden", h}, {"vocab", s.vocab / s.tp}},
                        "", s.dtype),
            i == 0 ? s.vocab / s.tp * h : 0, kTokenIdBytes * T + e() * region);
    reduceOutput(out, kEmbeddingLayer, "embedding_allreduce", "embedding_reduce_scatter");
    if (learned) {
      compute(out, kEmbeddingLayer, "position_add",
              makeCompute("add", {{"elems", region}}, "", s.dtype), i == 0 ? s.seq * h : 0);
    }
    dropout(out, kEmbeddingLayer, "embedding_dropout", region, false);
  }
}

void LayerOpBuilder::embeddingBackward(int streams, OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden;
  const int64_t region = s.regionTokens() * h;
  for (int i = 0; i < streams; ++i) {
    dropout(out, kEmbeddingLayer, "embedding_dropout_bwd", region, true);
    gatherInput(out, kEmbeddingLayer, "embedding_grad_allgather");
    compute(out, kEmbeddingLayer, "word_embedding_bwd",
            makeCompute("embedding_bwd", {{"tokens", T}, {"hidden", h}, {"vocab", s.vocab / s.tp}},
                        "", s.dtype));
  }
}

void LayerOpBuilder::headForward(OpList& out, bool owns_output_weight, bool owns_mtp_embedding) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, v = s.vocab / s.tp;
  norm(out, kHeadLayer, "final_layernorm", false);
  gatherInput(out, kHeadLayer, "lm_head_input_allgather");
  // The LM head keeps its input (the region: with SP its shard, re-gathered for the wgrad; under
  // DTensor TP the gathered input).
  compute(out, kHeadLayer, "lm_head_gemm", makeGemm(T, v, h, "nt", s.dtype),
          owns_output_weight ? v * h : 0, e() * s.columnInputTokens() * h);
  // The logits are kept in fp32 for the cross-entropy backward (eager: log_softmax's output).
  if (s.eager_loss) {
    eagerKernels(out, kHeadLayer, eagerCrossEntropyForward(T, v, e()), 0, kLogitBytes * T * v);
  } else {
    compute(out, kHeadLayer, "cross_entropy",
            makeCompute("cross_entropy_fwd", {{"rows", T}, {"cols", v}}, "", s.dtype), 0,
            kLogitBytes * T * v);
  }
  vocabParallelLossAllReduces(out, /*mtp=*/false);
  mtpForward(out, owns_mtp_embedding);
}

// Vocab-parallel cross-entropy: max logit, target logit and sum of exponentials, fp32 per token.
void LayerOpBuilder::vocabParallelLossAllReduces(OpList& out, bool mtp) {
  // Op names are string_views into static storage (op_list.h): one fixed set for each loss.
  static constexpr std::array<std::string_view, 3> kMainNames = {
      "ce_max_allreduce", "ce_target_allreduce", "ce_sumexp_allreduce"};
  static constexpr std::array<std::string_view, 3> kMtpNames = {
      "mtp_ce_max_allreduce", "mtp_ce_target_allreduce", "mtp_ce_sumexp_allreduce"};
  const int64_t per_token = shape_.tokens() * dtypeBytes(DType::kFp32);
  for (std::string_view name : mtp ? kMtpNames : kMainNames) {
    tpAllReduce(out, kHeadLayer, name, per_token, DType::kFp32);
  }
}

void LayerOpBuilder::headBackward(OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, v = s.vocab / s.tp;
  mtpBackward(out);  // the depths' gradients reach the main head's output through the hidden states
  if (s.eager_loss) {
    eagerKernels(out, kHeadLayer, eagerCrossEntropyBackward(T, v, e()));
  } else {
    compute(out, kHeadLayer, "cross_entropy_bwd",
            makeCompute("cross_entropy_bwd", {{"rows", T}, {"cols", v}}, "", s.dtype));
  }
  gatherInput(out, kHeadLayer, "lm_head_input_regather");
  linearBackward(out, kHeadLayer, "lm_head_dgrad", "lm_head_wgrad", T, v, h);
  reduceOutput(out, kHeadLayer, "lm_head_input_grad_allreduce",
               "lm_head_input_grad_reduce_scatter");
  norm(out, kHeadLayer, "final_layernorm_bwd", true);
}

}  // namespace evsim

#include "events/layer_ops.h"

#include "common/error.h"

namespace evsim {

std::string_view streamName(Stream stream) {
  switch (stream) {
    case Stream::kCompute:
      return "compute";
    case Stream::kTpComm:
      return "tp-comm";
    case Stream::kPpComm:
      return "pp-comm";
    case Stream::kDpComm:
      return "dp-comm";
  }
  return "?";
}

std::string_view phaseName(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kGradSync:
      return "grad-sync";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kRecompute:
      return "recompute";
  }
  return "?";
}

LayerShape layerShape(const ModelConfig& model, const Strategy& strategy, Placement tp_group) {
  LayerShape shape;
  shape.micro_batch = strategy.micro_batch;
  shape.seq = model.seq_length;
  shape.hidden = model.hidden_size;
  shape.heads = model.num_heads;
  shape.ffn = model.ffn_hidden_size;
  shape.vocab = model.paddedVocab(strategy.tp);
  shape.tp = strategy.tp;
  shape.dtype = model.dtype;
  shape.tp_group = tp_group;
  shape.sequence_parallel = strategy.sequence_parallel;
  shape.recompute = strategy.recompute;
  return shape;
}

void LayerOpBuilder::compute(OpList& out, int layer, std::string_view name, const Event& event) {
  out.push_back(OpInstance{table_.intern(event), Stream::kCompute, layer, name, recomputing_});
}

void LayerOpBuilder::tpAllReduce(OpList& out, int layer, std::string_view name, int64_t bytes,
                                 DType dtype) {
  if (shape_.tp == 1) return;  // a group of one has nothing to reduce
  Event e = makeCommunication(EventKind::kAllReduce, bytes, shape_.tp_group, dtype);
  out.push_back(OpInstance{table_.intern(e), Stream::kTpComm, layer, name, recomputing_});
}

void LayerOpBuilder::tpCollective(OpList& out, int layer, std::string_view name, EventKind kind,
                                  int64_t bytes) {
  if (shape_.tp == 1) return;
  Event e = makeCommunication(kind, bytes, shape_.tp_group, shape_.dtype);
  out.push_back(OpInstance{table_.intern(e), Stream::kTpComm, layer, name, recomputing_});
}

void LayerOpBuilder::gatherInput(OpList& out, int layer, std::string_view name) {
  if (!shape_.sequence_parallel) return;
  // Full buffer: the s*b*h activation every rank ends up with.
  tpCollective(out, layer, name, EventKind::kAllGather,
               shape_.tokens() * shape_.hidden * dtypeBytes(shape_.dtype));
}

void LayerOpBuilder::reduceOutput(OpList& out, int layer, std::string_view allreduce_name,
                                  std::string_view reduce_scatter_name) {
  const int64_t bytes = shape_.tokens() * shape_.hidden * dtypeBytes(shape_.dtype);
  if (shape_.sequence_parallel) {
    tpCollective(out, layer, reduce_scatter_name, EventKind::kReduceScatter, bytes);
  } else {
    tpAllReduce(out, layer, allreduce_name, bytes, shape_.dtype);
  }
}

void LayerOpBuilder::linearForward(OpList& out, int layer, std::string_view name, int64_t rows,
                                   int64_t out_features, int64_t in_features) {
  compute(out, layer, name, makeGemm(rows, out_features, in_features, "nt", shape_.dtype));
}

void LayerOpBuilder::linearBackward(OpList& out, int layer, std::string_view dgrad,
                                    std::string_view wgrad, int64_t rows, int64_t out_features,
                                    int64_t in_features) {
  compute(out, layer, dgrad, makeGemm(rows, in_features, out_features, "nn", shape_.dtype));
  compute(out, layer, wgrad, makeGemm(out_features, in_features, rows, "tn", shape_.dtype));
}

// Scores bGEMM, fused scale + mask + softmax, attention dropout, x V bGEMM: what selective
// recomputation re-runs (Megatron's checkpointed core_attention).
void LayerOpBuilder::attentionCore(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t d = s.hidden / s.heads;
  const int64_t heads = s.micro_batch * s.heads / s.tp;  // attention heads on this rank, times b
  compute(out, layer, "attn_scores", makeBatchedGemm(heads, s.seq, s.seq, d, "nt", s.dtype));
  compute(out, layer, "scale_mask_softmax",
          makeCompute("softmax_fwd", {{"rows", heads * s.seq}, {"cols", s.seq}}, "", s.dtype));
  compute(out, layer, "attn_dropout",
          makeCompute("dropout_fwd", {{"elems", heads * s.seq * s.seq}}, "", s.dtype));
  compute(out, layer, "attn_values", makeBatchedGemm(heads, s.seq, d, s.seq, "nn", s.dtype));
}

void LayerOpBuilder::attentionForward(OpList& out, int layer, bool cross) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp;
  const int64_t region = s.regionTokens() * h;
  if (cross) {
    compute(out, layer, "cross_layernorm",
            makeCompute("layernorm_fwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
    gatherInput(out, layer, "cross_q_input_allgather");
    linearForward(out, layer, "cross_q_gemm", T, h / t, h);
    // The encoder output is sequence-parallel too under SP.
    gatherInput(out, layer, "cross_kv_input_allgather");
    linearForward(out, layer, "cross_kv_gemm", T, 2 * h / t, h);  // from the encoder output
  } else {
    compute(out, layer, "layernorm",
            makeCompute("layernorm_fwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
    gatherInput(out, layer, "qkv_input_allgather");
    linearForward(out, layer, "qkv_gemm", T, 3 * h / t, h);
  }
  attentionCore(out, layer);
  linearForward(out, layer, cross ? "cross_proj_gemm" : "attn_proj_gemm", T, h, h / t);
  reduceOutput(out, layer, cross ? "cross_proj_allreduce" : "attn_proj_allreduce",
               cross ? "cross_proj_reduce_scatter" : "attn_proj_reduce_scatter");
  compute(out, layer, "dropout", makeCompute("dropout_fwd", {{"elems", region}}, "", s.dtype));
  compute(out, layer, "residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::attentionBackward(OpList& out, int layer, bool cross) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, d = s.hidden / s.heads;
  const int64_t heads = s.micro_batch * s.heads / t;
  const int64_t region = s.regionTokens() * h;
  compute(out, layer, "dropout_bwd", makeCompute("dropout_bwd", {{"elems", region}}, "", s.dtype));
  gatherInput(out, layer, cross ? "cross_proj_grad_allgather" : "attn_proj_grad_allgather");
  linearBackward(out, layer, cross ? "cross_proj_dgrad" : "attn_proj_dgrad",
                 cross ? "cross_proj_wgrad" : "attn_proj_wgrad", T, h, h / t);
  if (s.recompute == Recompute::kSelective) {
    recomputing_ = true;
    attentionCore(out, layer);
    recomputing_ = false;
  }
  // context = P V: dP = dC V^T, dV = P^T dC
  compute(out, layer, "attn_values_dgrad_p",
          makeBatchedGemm(heads, s.seq, s.seq, d, "nt", s.dtype));
  compute(out, layer, "attn_values_dgrad_v",
          makeBatchedGemm(heads, s.seq, d, s.seq, "tn", s.dtype));
  compute(out, layer, "attn_dropout_bwd",
          makeCompute("dropout_bwd", {{"elems", heads * s.seq * s.seq}}, "", s.dtype));
  compute(out, layer, "softmax_bwd",
          makeCompute("softmax_bwd", {{"rows", heads * s.seq}, {"cols", s.seq}}, "", s.dtype));
  // scores = Q K^T: dQ = dS K, dK = dS^T Q
  compute(out, layer, "attn_scores_dgrad_q",
          makeBatchedGemm(heads, s.seq, d, s.seq, "nn", s.dtype));
  compute(out, layer, "attn_scores_dgrad_k",
          makeBatchedGemm(heads, s.seq, d, s.seq, "tn", s.dtype));
  if (cross) {
    gatherInput(out, layer, "cross_kv_input_regather");  // the wgrad needs the full input again
    linearBackward(out, layer, "cross_kv_dgrad", "cross_kv_wgrad", T, 2 * h / t, h);
    reduceOutput(out, layer, "cross_kv_input_grad_allreduce", "cross_kv_input_grad_reduce_scatter");
    gatherInput(out, layer, "cross_q_input_regather");
    linearBackward(out, layer, "cross_q_dgrad", "cross_q_wgrad", T, h / t, h);
    reduceOutput(out, layer, "cross_q_input_grad_allreduce", "cross_q_input_grad_reduce_scatter");
    compute(out, layer, "cross_layernorm_bwd",
            makeCompute("layernorm_bwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
  } else {
    gatherInput(out, layer, "qkv_input_regather");
    linearBackward(out, layer, "qkv_dgrad", "qkv_wgrad", T, 3 * h / t, h);
    reduceOutput(out, layer, "qkv_input_grad_allreduce", "qkv_input_grad_reduce_scatter");
    compute(out, layer, "layernorm_bwd",
            makeCompute("layernorm_bwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
  }
  compute(out, layer, "residual_grad_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::mlpForward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, f = s.ffn;
  const int64_t region = s.regionTokens() * h;
  compute(out, layer, "mlp_layernorm",
          makeCompute("layernorm_fwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
  gatherInput(out, layer, "fc1_input_allgather");
  linearForward(out, layer, "fc1_gemm", T, f / t, h);
  compute(out, layer, "gelu", makeCompute("gelu_fwd", {{"elems", T * f / t}}, "", s.dtype));
  linearForward(out, layer, "fc2_gemm", T, h, f / t);
  reduceOutput(out, layer, "fc2_allreduce", "fc2_reduce_scatter");
  compute(out, layer, "mlp_dropout", makeCompute("dropout_fwd", {{"elems", region}}, "", s.dtype));
  compute(out, layer, "mlp_residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::mlpBackward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, f = s.ffn;
  const int64_t region = s.regionTokens() * h;
  compute(out, layer, "mlp_dropout_bwd",
          makeCompute("dropout_bwd", {{"elems", region}}, "", s.dtype));
  gatherInput(out, layer, "fc2_grad_allgather");
  linearBackward(out, layer, "fc2_dgrad", "fc2_wgrad", T, h, f / t);
  compute(out, layer, "gelu_bwd", makeCompute("gelu_bwd", {{"elems", T * f / t}}, "", s.dtype));
  gatherInput(out, layer, "fc1_input_regather");
  linearBackward(out, layer, "fc1_dgrad", "fc1_wgrad", T, f / t, h);
  reduceOutput(out, layer, "fc1_input_grad_allreduce", "fc1_input_grad_reduce_scatter");
  compute(out, layer, "mlp_layernorm_bwd",
          makeCompute("layernorm_bwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
  compute(out, layer, "mlp_residual_grad_add",
          makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::blockForward(const TransformerBlock& block, int layer, OpList& out) {
  attentionForward(out, layer, /*cross=*/false);
  if (block.cross_attention) attentionForward(out, layer, /*cross=*/true);
  mlpForward(out, layer);
}

void LayerOpBuilder::blockBackward(const TransformerBlock& block, int layer, OpList& out) {
  if (shape_.recompute == Recompute::kFull) {
    // Megatron's full (uniform) checkpointing: the block's input was kept, the forward re-runs.
    recomputing_ = true;
    blockForward(block, layer, out);
    recomputing_ = false;
  }
  mlpBackward(out, layer);
  if (block.cross_attention) attentionBackward(out, layer, /*cross=*/true);
  attentionBackward(out, layer, /*cross=*/false);
}

void LayerOpBuilder::embeddingForward(int streams, OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden;
  const int64_t region = s.regionTokens() * h;
  for (int i = 0; i < streams; ++i) {
    compute(out, kEmbeddingLayer, "word_embedding",
            makeCompute("embedding_fwd", {{"tokens", T}, {"hidden", h}, {"vocab", s.vocab / s.tp}},
                        "", s.dtype));
    reduceOutput(out, kEmbeddingLayer, "embedding_allreduce", "embedding_reduce_scatter");
    compute(out, kEmbeddingLayer, "position_add",
            makeCompute("add", {{"elems", region}}, "", s.dtype));
    compute(out, kEmbeddingLayer, "embedding_dropout",
            makeCompute("dropout_fwd", {{"elems", region}}, "", s.dtype));
  }
}

void LayerOpBuilder::embeddingBackward(int streams, OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden;
  const int64_t region = s.regionTokens() * h;
  for (int i = 0; i < streams; ++i) {
    compute(out, kEmbeddingLayer, "embedding_dropout_bwd",
            makeCompute("dropout_bwd", {{"elems", region}}, "", s.dtype));
    gatherInput(out, kEmbeddingLayer, "embedding_grad_allgather");
    compute(out, kEmbeddingLayer, "word_embedding_bwd",
            makeCompute("embedding_bwd", {{"tokens", T}, {"hidden", h}, {"vocab", s.vocab / s.tp}},
                        "", s.dtype));
  }
}

void LayerOpBuilder::headForward(OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, v = s.vocab / s.tp;
  compute(out, kHeadLayer, "final_layernorm",
          makeCompute("layernorm_fwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
  gatherInput(out, kHeadLayer, "lm_head_input_allgather");
  linearForward(out, kHeadLayer, "lm_head_gemm", T, v, h);
  compute(out, kHeadLayer, "cross_entropy",
          makeCompute("cross_entropy_fwd", {{"rows", T}, {"cols", v}}, "", s.dtype));
  // Vocab-parallel cross-entropy: max logit, target logit and sum of exponentials, fp32 per token.
  const int64_t per_token = T * dtypeBytes(DType::kFp32);
  tpAllReduce(out, kHeadLayer, "ce_max_allreduce", per_token, DType::kFp32);
  tpAllReduce(out, kHeadLayer, "ce_target_allreduce", per_token, DType::kFp32);
  tpAllReduce(out, kHeadLayer, "ce_sumexp_allreduce", per_token, DType::kFp32);
}

void LayerOpBuilder::headBackward(OpList& out) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, v = s.vocab / s.tp;
  compute(out, kHeadLayer, "cross_entropy_bwd",
          makeCompute("cross_entropy_bwd", {{"rows", T}, {"cols", v}}, "", s.dtype));
  gatherInput(out, kHeadLayer, "lm_head_input_regather");
  linearBackward(out, kHeadLayer, "lm_head_dgrad", "lm_head_wgrad", T, v, h);
  reduceOutput(out, kHeadLayer, "lm_head_input_grad_allreduce",
               "lm_head_input_grad_reduce_scatter");
  compute(out, kHeadLayer, "final_layernorm_bwd",
          makeCompute("layernorm_bwd", {{"rows", s.regionTokens()}, {"cols", h}}, "", s.dtype));
}

}  // namespace evsim

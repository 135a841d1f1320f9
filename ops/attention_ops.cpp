#include "ops/layer_ops.h"

namespace evsim {

// The attention core: with flash attention one fused op keeping Q, K, V and the fp32 log-sum-exp
// (the output is the projection's saved input); otherwise the unfused core below. Grouped-query
// attention: the b*a/t query heads of a rank read its b*g/t key/value heads; the unfused path
// broadcasts K and V to every query head (as Megatron's core attention does), so its GEMMs are
// those of multi-head attention.
void LayerOpBuilder::attentionCore(OpList& out, int layer) {
  const LayerShape& s = shape_;
  if (s.spec.flash_attention) {
    flashAttentionCore(out, layer, false);
    return;
  }
  unfusedAttentionCore(out, layer, s.headDim(), s.headDim(), false);
}

// Scores bGEMM, fused scale + mask + softmax, attention dropout, x V bGEMM: what selective
// recomputation re-runs (Megatron's checkpointed core_attention). Over the whole sequence:
// context parallelism needs the fused kernel (plan/strategy_technique_checks.cpp).
void LayerOpBuilder::unfusedAttentionCore(OpList& out, int layer, int64_t qk_dim, int64_t v_dim,
                                          bool backward) {
  const LayerShape& s = shape_;
  const int64_t heads = s.micro_batch * s.heads / s.tp;  // attention heads on this rank, times b
  const int64_t sq = s.seq, score_elems = heads * sq * sq;
  if (!backward) {
    // Selective recomputation rebuilds the s x s tensors: their ops keep nothing. K and V are
    // kept as broadcast to every query head (what the batched GEMMs' backward holds).
    const bool keep_scores = s.recompute != Recompute::kSelective;
    compute(out, layer, "attn_scores", makeBatchedGemm(heads, sq, sq, qk_dim, "nt", s.dtype), 0,
            2 * e() * heads * sq * qk_dim);  // Q and K
    compute(out, layer, "scale_mask_softmax",
            makeCompute("softmax_fwd", {{"rows", heads * sq}, {"cols", sq}}, "", s.dtype), 0,
            keep_scores ? e() * score_elems : 0);
    if (s.spec.attention_dropout) {
      compute(out, layer, "attn_dropout",
              makeCompute("dropout_fwd", {{"elems", score_elems}}, "", s.dtype), 0,
              keep_scores ? kMaskBytes * score_elems : 0);
    }
    // x V keeps its inputs: the dropout output (s x s; without dropout that is the softmax
    // output, already kept) and V.
    const bool own_probabilities = keep_scores && s.spec.attention_dropout;
    compute(out, layer, "attn_values", makeBatchedGemm(heads, sq, v_dim, sq, "nn", s.dtype), 0,
            (own_probabilities ? e() * score_elems : 0) + e() * heads * sq * v_dim);
    return;
  }
  if (s.recompute == Recompute::kSelective) {
    recomputing_ = true;
    unfusedAttentionCore(out, layer, qk_dim, v_dim, false);
    recomputing_ = false;
  }
  // context = P V: dP = dC V^T, dV = P^T dC
  compute(out, layer, "attn_values_dgrad_p", makeBatchedGemm(heads, sq, sq, v_dim, "nt", s.dtype));
  compute(out, layer, "attn_values_dgrad_v", makeBatchedGemm(heads, sq, v_dim, sq, "tn", s.dtype));
  if (s.spec.attention_dropout) {
    compute(out, layer, "attn_dropout_bwd",
            makeCompute("dropout_bwd", {{"elems", score_elems}}, "", s.dtype));
  }
  compute(out, layer, "softmax_bwd",
          makeCompute("softmax_bwd", {{"rows", heads * sq}, {"cols", sq}}, "", s.dtype));
  // scores = Q K^T: dQ = dS K, dK = dS^T Q
  compute(out, layer, "attn_scores_dgrad_q",
          makeBatchedGemm(heads, sq, qk_dim, sq, "nn", s.dtype));
  compute(out, layer, "attn_scores_dgrad_k",
          makeBatchedGemm(heads, sq, qk_dim, sq, "tn", s.dtype));
}

void LayerOpBuilder::attentionForward(OpList& out, int layer, bool cross) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp;
  const int64_t region = s.regionTokens() * h;
  if (cross) {
    norm(out, layer, "cross_layernorm", false);
    gatherInput(out, layer, "cross_q_input_allgather");
    linearForward(out, layer, "cross_q_gemm", T, h / t, h, bias(h / t), region);
    // The encoder output is sequence-parallel too under SP.
    gatherInput(out, layer, "cross_kv_input_allgather");
    // From the encoder output; its input is the encoder's, kept by the encoder's own blocks.
    linearForward(out, layer, "cross_kv_gemm", T, 2 * h / t, h, bias(2 * h / t), 0);
  } else {
    norm(out, layer, "layernorm", false);
    if (s.tp_comm_overlap) {
      ringGatherLinearForward(out, layer, "qkv_input_ring_exchange", "qkv_gemm", s.qkvWidth(),
                              bias(s.qkvWidth()), region);
    } else {
      gatherInput(out, layer, "qkv_input_allgather");
      linearForward(out, layer, "qkv_gemm", T, s.qkvWidth(), h, bias(s.qkvWidth()),
                    s.columnInputTokens() * h);
    }
    qkNorm(out, layer, false);
    rope(out, layer, false);
    repeatKv(out, layer, false);
  }
  attentionCore(out, layer);
  if (s.tp_comm_overlap && !cross) {
    linearForwardReduceScatter(out, layer, "attn_proj_gemm", "attn_proj_reduce_scatter",
                               s.attnWidth(), bias(h));
  } else {
    linearForward(out, layer, cross ? "cross_proj_gemm" : "attn_proj_gemm", T, h, s.attnWidth(),
                  bias(h), T * s.attnWidth());
    reduceOutput(out, layer, cross ? "cross_proj_allreduce" : "attn_proj_allreduce",
                 cross ? "cross_proj_reduce_scatter" : "attn_proj_reduce_scatter");
  }
  dropout(out, layer, "dropout", region, false);
  compute(out, layer, "residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

// Megatron's --qk-layernorm (Qwen3's q_norm and k_norm): the model's norm over each of the rank's
// a/t query and g/t key heads of d channels, before RoPE; one head's weights each for Q and K,
// replicated over TP. The forward keeps its input, as every norm does.
void LayerOpBuilder::qkNorm(OpList& out, int layer, bool backward) {
  const LayerShape& s = shape_;
  if (!s.spec.qk_layernorm) return;
  const bool rms = s.spec.norm == NormKind::kRmsNorm;
  const char* op = rms ? (backward ? "rmsnorm_bwd" : "rmsnorm_fwd")
                       : (backward ? "layernorm_bwd" : "layernorm_fwd");
  const int64_t rows = s.tokens() * (s.heads + s.query_groups) / s.tp, d = s.headDim();
  compute(out, layer, backward ? "qk_layernorm_bwd" : "qk_layernorm",
          makeCompute(op, {{"rows", rows}, {"cols", d}}, "", s.dtype),
          backward ? 0 : 2 * (rms ? 1 : 2) * d, backward ? 0 : e() * rows * d);
}

void LayerOpBuilder::attentionBackward(OpList& out, int layer, bool cross) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp;
  const int64_t region = s.regionTokens() * h;
  dropout(out, layer, "dropout_bwd", region, true);
  if (s.tp_comm_overlap && !cross) {
    ringGatherLinearBackward(out, layer, "attn_proj_grad_ring_exchange", "attn_proj_dgrad",
                             "attn_proj_wgrad", s.attnWidth());
  } else {
    gatherInput(out, layer, cross ? "cross_proj_grad_allgather" : "attn_proj_grad_allgather");
    linearBackward(out, layer, cross ? "cross_proj_dgrad" : "attn_proj_dgrad",
                   cross ? "cross_proj_wgrad" : "attn_proj_wgrad", T, h, s.attnWidth());
  }
  if (s.spec.flash_attention) {
    flashAttentionCore(out, layer, true);
  } else {
    unfusedAttentionCore(out, layer, s.headDim(), s.headDim(), true);
  }
  if (cross) {
    gatherInput(out, layer, "cross_kv_input_regather");  // the wgrad needs the full input again
    linearBackward(out, layer, "cross_kv_dgrad", "cross_kv_wgrad", T, 2 * h / t, h);
    reduceOutput(out, layer, "cross_kv_input_grad_allreduce", "cross_kv_input_grad_reduce_scatter");
    gatherInput(out, layer, "cross_q_input_regather");
    linearBackward(out, layer, "cross_q_dgrad", "cross_q_wgrad", T, h / t, h);
    reduceOutput(out, layer, "cross_q_input_grad_allreduce", "cross_q_input_grad_reduce_scatter");
    norm(out, layer, "cross_layernorm_bwd", true);
  } else {
    repeatKv(out, layer, true);
    rope(out, layer, true);
    qkNorm(out, layer, true);
    if (s.tp_comm_overlap) {
      bulkOverlapLinearBackward(out, layer, "qkv_input_regather", "qkv_dgrad", "qkv_wgrad",
                                "qkv_input_grad_reduce_scatter", s.qkvWidth());
    } else {
      gatherInput(out, layer, "qkv_input_regather");
      linearBackward(out, layer, "qkv_dgrad", "qkv_wgrad", T, s.qkvWidth(), h);
      reduceOutput(out, layer, "qkv_input_grad_allreduce", "qkv_input_grad_reduce_scatter");
    }
    eagerInputGradientSums(out, layer, "qkv_input_grad_sum", 3);  // wq, wk, wv
    norm(out, layer, "layernorm_bwd", true);
  }
  compute(out, layer, "residual_grad_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

}  // namespace evsim

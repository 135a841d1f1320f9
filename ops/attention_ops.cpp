#include "ops/layer_ops.h"

namespace evsim {

namespace {

constexpr int64_t kMaskBytes = 1;     // dropout masks are stored as bytes

}  // namespace

// The attention core: with flash attention one fused op keeping Q, K, V and the fp32 log-sum-exp
// (the output is the projection's saved input); otherwise scores bGEMM, fused scale + mask +
// softmax, attention dropout, x V bGEMM, what selective recomputation re-runs (Megatron's
// checkpointed core_attention). Grouped-query attention: the b*a/t query heads of a rank read its
// b*g/t key/value heads; the unfused path broadcasts K and V to every query head (as Megatron's
// core attention does), so its GEMMs are those of multi-head attention.
void LayerOpBuilder::attentionCore(OpList& out, int layer) {
  const LayerShape& s = shape_;
  if (s.spec.flash_attention) {
    flashAttentionCore(out, layer, false);
    return;
  }
  const int64_t d = s.headDim();
  const int64_t heads = s.micro_batch * s.heads / s.tp;  // attention heads on this rank, times b
  const int64_t q_bytes = e() * heads * s.localSeq() * d;
  // Selective recomputation rebuilds the s x s tensors: their ops keep nothing. K and V are kept
  // as broadcast to every query head (what the batched GEMMs' backward holds).
  const bool keep_scores = s.recompute != Recompute::kSelective;
  const int64_t score_elems = heads * s.seq * s.seq;
  const int64_t broadcast_kv_bytes = q_bytes;
  compute(out, layer, "attn_scores", makeBatchedGemm(heads, s.seq, s.seq, d, "nt", s.dtype), 0,
          q_bytes + broadcast_kv_bytes);
  compute(out, layer, "scale_mask_softmax",
          makeCompute("softmax_fwd", {{"rows", heads * s.seq}, {"cols", s.seq}}, "", s.dtype), 0,
          keep_scores ? e() * score_elems : 0);
  if (s.spec.attention_dropout) {
    compute(out, layer, "attn_dropout",
            makeCompute("dropout_fwd", {{"elems", score_elems}}, "", s.dtype), 0,
            keep_scores ? kMaskBytes * score_elems : 0);
  }
  // x V keeps its inputs: the dropout output (s x s; without dropout that is the softmax output,
  // already kept) and V.
  const bool own_probabilities = keep_scores && s.spec.attention_dropout;
  compute(out, layer, "attn_values", makeBatchedGemm(heads, s.seq, d, s.seq, "nn", s.dtype), 0,
          (own_probabilities ? e() * score_elems : 0) + broadcast_kv_bytes);
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
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, d = s.headDim();
  const int64_t heads = s.micro_batch * s.heads / t;
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
    if (s.spec.attention_dropout) {
      compute(out, layer, "attn_dropout_bwd",
              makeCompute("dropout_bwd", {{"elems", heads * s.seq * s.seq}}, "", s.dtype));
    }
    compute(out, layer, "softmax_bwd",
            makeCompute("softmax_bwd", {{"rows", heads * s.seq}, {"cols", s.seq}}, "", s.dtype));
    // scores = Q K^T: dQ = dS K, dK = dS^T Q
    compute(out, layer, "attn_scores_dgrad_q",
            makeBatchedGemm(heads, s.seq, d, s.seq, "nn", s.dtype));
    compute(out, layer, "attn_scores_dgrad_k",
            makeBatchedGemm(heads, s.seq, d, s.seq, "tn", s.dtype));
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

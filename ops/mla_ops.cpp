// Multi-head latent attention (DeepSeek-V2/V3; Megatron-Core's MLASelfAttention), per rank, for
// T = b*s/C tokens of which the rank's region holds R = T/t under sequence parallelism:
//
//   forward   norm; the down projections, duplicated on every TP rank (Megatron's
//             parallel_mode="duplicated") and run on the region's R tokens: q_down h -> r_q and
//             kv_down h -> r_kv + d_rope (the latent and the one shared RoPE key head); with SP an
//             all-gather of each latent over TP (r_q and r_kv + d_rope channels, not h);
//             q_layernorm and kv_layernorm on the latents; the column-parallel up projections
//             q_up r_q -> a/t x (d_nope + d_rope) and kv_up r_kv -> a/t x (d_nope + d_v); RoPE
//             on the a/t query heads' and the shared key head's d_rope channels; the attention
//             core over a/t heads with Q/K of d_nope + d_rope and V of d_v channels; the
//             row-parallel output projection a/t x d_v -> h and its all-reduce (reduce-scatter
//             with SP); dropout; residual add.
//   backward  the reverse; the latents' input gradients (from the column-parallel up projections
//             and the head-shared RoPE key) are all-reduced over TP (reduce-scattered with SP)
//             before the duplicated down projections' backward, which then needs no reduction.
//
// Without q_lora_rank, Q is one column-parallel GEMM from the (gathered, with SP) block input.
// Saved for the backward, as layer_ops.h's rules: each norm and linear layer its input (the block
// input once, for both down projections), the core Q, K, V (and the log-sum-exp, fused), the
// output projection its input.
#include "ops/layer_ops.h"

namespace evsim {

namespace {

// The per-TP-rank widths of MLA's projections, shared by the forward and the backward.
struct MlaWidths {
  int64_t q;          // query up projection (or the plain query GEMM): a/t heads x (nope + rope)
  int64_t kv;         // key/value up projection: a/t heads x (qk nope + v)
  int64_t v;          // the value heads the output projection reads
  int64_t kv_latent;  // kv down projection: the compressed latent plus the shared RoPE key
};

MlaWidths mlaWidths(const LayerShape& s) {
  const MlaSpec& m = s.mla;
  return {s.heads * m.qkHeadDim() / s.tp, s.heads * (m.qk_head_dim + m.v_head_dim) / s.tp,
          s.heads * m.v_head_dim / s.tp, m.kv_lora_rank + m.qk_pos_emb_head_dim};
}
}  // namespace

void LayerOpBuilder::mlaCore(OpList& out, int layer, bool backward) {
  const LayerShape& s = shape_;
  const MlaSpec& m = s.mla;
  const int64_t heads = s.micro_batch * s.heads / s.tp;
  const int64_t dqk = m.qkHeadDim(), dv = m.v_head_dim;
  if (s.spec.flash_attention) {
    const Event step = makeCompute(
        backward ? "mla_attn_bwd" : "mla_attn_fwd",
        {{"batch", heads}, {"seq", s.localSeq()}, {"qk_dim", dqk}, {"v_dim", dv}, {"causal", 1}},
        "", s.dtype);
    const int64_t q_bytes = e() * heads * s.localSeq() * dqk;
    const int64_t kv_bytes = e() * heads * s.localSeq() * (dqk + dv);  // K and V
    // Ring attention over the CP group (only p2p is modelled with MLA: strategy checks).
    RingAttention r;
    r.step = step;
    r.ring = s.cp;
    r.kv_block_bytes = kv_bytes;
    r.saved_bytes = backward ? 0 : q_bytes + kv_bytes + kLseBytes * heads * s.localSeq();
    // TE's ring copies are not modelled for MLA: their byte rules (ops/cp_ring_copies.h) take K
    // and V of one head size, and MLA's V heads are narrower than its Q/K heads.
    r.copies = false;
    ringAttention(out, layer, backward, r);
    return;
  }
  unfusedAttentionCore(out, layer, dqk, dv, backward);
}

void LayerOpBuilder::mlaForward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const MlaSpec& m = s.mla;
  const int64_t T = s.tokens(), R = s.regionTokens(), h = s.hidden, t = s.tp, a = s.heads;
  const auto [q_width, kv_width, v_width, kv_latent] = mlaWidths(s);
  const bool rms = s.spec.norm == NormKind::kRmsNorm;
  const auto latentNorm = [&](std::string_view name, int64_t cols) {
    compute(out, layer, name,
            makeCompute(rms ? "rmsnorm_fwd" : "layernorm_fwd", {{"rows", T}, {"cols", cols}}, "",
                        s.dtype),
            (rms ? 1 : 2) * cols, e() * T * cols);
  };
  norm(out, layer, "layernorm", false);
  // The block input is kept once, by kv_down, for both down projections' weight gradients.
  linearForward(out, layer, "kv_down_gemm", R, kv_latent, h, bias(kv_latent), R * h);
  if (m.q_lora_rank > 0) {
    linearForward(out, layer, "q_down_gemm", R, m.q_lora_rank, h, bias(m.q_lora_rank), 0);
    if (s.sequence_parallel) {
      tpCollective(out, layer, "q_latent_allgather", EventKind::kAllGather,
                   T * m.q_lora_rank * e());
    }
    latentNorm("q_layernorm", m.q_lora_rank);
    linearForward(out, layer, "q_up_gemm", T, q_width, m.q_lora_rank, bias(q_width),
                  T * m.q_lora_rank);
  } else {
    gatherInput(out, layer, "q_input_allgather");
    linearForward(out, layer, "q_gemm", T, q_width, h, bias(q_width), 0);
  }
  if (s.sequence_parallel) {
    tpCollective(out, layer, "kv_latent_allgather", EventKind::kAllGather, T * kv_latent * e());
  }
  latentNorm("kv_layernorm", m.kv_lora_rank);
  linearForward(out, layer, "kv_up_gemm", T, kv_width, m.kv_lora_rank, bias(kv_width),
                T * m.kv_lora_rank);
  // The a/t query heads' RoPE channels and the one key head shared by all of them.
  compute(
      out, layer, "rope",
      makeCompute("rope_fwd", {{"tokens", T}, {"heads", a / t + 1}, {"dim", m.qk_pos_emb_head_dim}},
                  "", s.dtype));
  mlaCore(out, layer, false);
  linearForward(out, layer, "attn_proj_gemm", T, h, v_width, bias(h), T * v_width);
  reduceOutput(out, layer, "attn_proj_allreduce", "attn_proj_reduce_scatter");
  dropout(out, layer, "dropout", R * h, false);
  compute(out, layer, "residual_add", makeCompute("add", {{"elems", R * h}}, "", s.dtype));
}

void LayerOpBuilder::mlaBackward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const MlaSpec& m = s.mla;
  const int64_t T = s.tokens(), R = s.regionTokens(), h = s.hidden, t = s.tp, a = s.heads;
  const auto [q_width, kv_width, v_width, kv_latent] = mlaWidths(s);
  const bool rms = s.spec.norm == NormKind::kRmsNorm;
  const auto latentNormBwd = [&](std::string_view name, int64_t cols) {
    compute(out, layer, name,
            makeCompute(rms ? "rmsnorm_bwd" : "layernorm_bwd", {{"rows", T}, {"cols", cols}}, "",
                        s.dtype));
  };
  // The latents' gradients summed over the TP group (each rank's up projections see a/t heads).
  const auto reduceLatent = [&](std::string_view ar, std::string_view rs, int64_t cols) {
    if (s.sequence_parallel) {
      tpCollective(out, layer, rs, EventKind::kReduceScatter, T * cols * e());
    } else {
      tpAllReduce(out, layer, ar, T * cols * e(), s.dtype);
    }
  };
  dropout(out, layer, "dropout_bwd", R * h, true);
  gatherInput(out, layer, "attn_proj_grad_allgather");
  linearBackward(out, layer, "attn_proj_dgrad", "attn_proj_wgrad", T, h, v_width);
  mlaCore(out, layer, true);
  compute(
      out, layer, "rope_bwd",
      makeCompute("rope_bwd", {{"tokens", T}, {"heads", a / t + 1}, {"dim", m.qk_pos_emb_head_dim}},
                  "", s.dtype));
  linearBackward(out, layer, "kv_up_dgrad", "kv_up_wgrad", T, kv_width, m.kv_lora_rank);
  latentNormBwd("kv_layernorm_bwd", m.kv_lora_rank);
  reduceLatent("kv_latent_grad_allreduce", "kv_latent_grad_reduce_scatter", kv_latent);
  if (m.q_lora_rank > 0) {
    linearBackward(out, layer, "q_up_dgrad", "q_up_wgrad", T, q_width, m.q_lora_rank);
    latentNormBwd("q_layernorm_bwd", m.q_lora_rank);
    reduceLatent("q_latent_grad_allreduce", "q_latent_grad_reduce_scatter", m.q_lora_rank);
    linearBackward(out, layer, "q_down_dgrad", "q_down_wgrad", R, m.q_lora_rank, h);
  } else {
    gatherInput(out, layer, "q_input_regather");
    linearBackward(out, layer, "q_dgrad", "q_wgrad", T, q_width, h);
    reduceOutput(out, layer, "q_input_grad_allreduce", "q_input_grad_reduce_scatter");
  }
  linearBackward(out, layer, "kv_down_dgrad", "kv_down_wgrad", R, kv_latent, h);
  norm(out, layer, "layernorm_bwd", true);
  compute(out, layer, "residual_grad_add", makeCompute("add", {{"elems", R * h}}, "", s.dtype));
}

}  // namespace evsim

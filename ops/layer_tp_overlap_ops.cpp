#include "ops/layer_ops.h"

namespace evsim {

// TP communication overlap (layer_ops.h). The shard each ring step moves is what TE's userbuffers
// hold: fp8 when the GEMM runs in fp8 (its all-gather buffers are fp8), else the model dtype.
namespace {
constexpr int64_t kReduceScatterSplits = 4;  // Transformer Engine's num_splits for "pipeline"
// Transformer Engine's default for the "pipeline" reduce-scatter overlap (proj_fprop, fc2_fprop):
// num_sm 16 with set_sm_margin (transformer_engine/pytorch/module/base.py, initialize_ub's
// get_default_config: "num_sm": 16, "set_sm_margin": not ring_exchange). The GEMM chunks are
// then launched on sm_count - 16 SMs (comm_gemm_overlap.cpp: _math_sms = sm_count - num_comm_sm),
// all of them, not only while a reduce-scatter runs. NeMo's H100 70B BF16 config asks 24 for
// proj_fprop and 16 for fc2_fprop (userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192); TE's default
// 16 is taken for every model's pipelined reduce-scatter. The bulk overlaps (dgrad and wgrad
// beside the re-gather and the reduce-scatter, bulkOverlapLinearBackward) keep every SM: TE's own
// default would keep 16 there too, but NeMo's userbuffers configs, the runs eventsim is checked
// against, set BulkOverlapCfg(num_sm=4, set_sm_margin=False) (docs/KERNELS.md, session 18).
constexpr int64_t kPipelineCommSms = 16;
}  // namespace

void LayerOpBuilder::tpRingStep(OpList& out, int layer, std::string_view name,
                                bool issued_with_previous) {
  const LayerShape& s = shape_;
  const DType wire = isFp8(s.gemm_dtype) ? s.gemm_dtype : s.dtype;
  // Neighbours of the TP ring: on one node (strategyViolation keeps the group inside one).
  const Placement pair{2, s.tp_group.interNode() ? 2 : 1, s.tp_group.interNode() ? 1 : 2};
  const int64_t shard_bytes = s.tokens() / s.tp * s.hidden * dtypeBytes(wire);
  Event e = makeCommunication(EventKind::kP2P, shard_bytes, pair, wire);
  OpInstance op{table_.intern(e), Stream::kTpComm, layer, name, recomputing_};
  op.overlap_ops = 1;
  op.issued_with_previous = issued_with_previous;
  out.push_back(op);
}

void LayerOpBuilder::ringGatherLinearForward(OpList& out, int layer, std::string_view ring,
                                             std::string_view gemm, int64_t out_features,
                                             int64_t bias, int64_t saved_input) {
  const LayerShape& s = shape_;
  const int64_t shard = s.tokens() / s.tp;
  const DType dtype = s.gemm_dtype;
  // TE casts its own shard before the exchange (the gathered input never exists in 16 bits).
  if (isFp8(dtype)) fp8Casts(out, layer, fp8InputCasts(s.spec.fp8_recipe, shard, s.hidden));
  const Event chunk = makeGemm(shard, out_features, s.hidden, "nt", dtype);
  for (int i = 0; i < s.tp; ++i) {
    if (i + 1 < s.tp) tpRingStep(out, layer, ring, i > 0);  // the next shard, beside this chunk
    compute(out, layer, gemm, chunk, i == 0 ? out_features * s.hidden + bias : 0,
            i == 0 ? saved_input * savedInputBytes(dtype) : 0);
    out.back().issued_with_previous = i > 0;
  }
}

void LayerOpBuilder::linearForwardReduceScatter(OpList& out, int layer, std::string_view gemm,
                                                std::string_view reduce_scatter,
                                                int64_t in_features, int64_t bias) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden;
  const DType dtype = s.gemm_dtype;
  if (isFp8(dtype)) fp8Casts(out, layer, fp8InputCasts(s.spec.fp8_recipe, T, in_features));
  const int64_t rows = T / kReduceScatterSplits;
  const Event chunk = makeCompute(
      "gemm", {{"m", rows}, {"n", h}, {"k", in_features}, {"sm_margin", kPipelineCommSms}}, "nt",
      dtype);
  const Event scatter =
      makeCommunication(EventKind::kReduceScatter, rows * h * e(), s.tp_group, s.dtype);
  for (int64_t i = 0; i < kReduceScatterSplits; ++i) {
    compute(out, layer, gemm, chunk, i == 0 ? h * in_features + bias : 0,
            i == 0 ? T * in_features * savedInputBytes(dtype) : 0);
    out.back().issued_with_previous = i > 0;
    OpInstance op{table_.intern(scatter), Stream::kTpComm, layer, reduce_scatter, recomputing_};
    op.overlap_ops = i + 1 < kReduceScatterSplits ? 1 : 0;  // the last one has nothing beside it
    op.issued_with_previous = i > 0;
    out.push_back(op);
  }
}

void LayerOpBuilder::ringGatherLinearBackward(OpList& out, int layer, std::string_view ring,
                                              std::string_view dgrad, std::string_view wgrad,
                                              int64_t in_features) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, shard = T / s.tp;
  const DType dtype = s.gemm_dtype;
  const Fp8Recipe recipe = s.spec.fp8_recipe;
  if (isFp8(dtype)) fp8Casts(out, layer, fp8GradCasts(recipe, shard, h));
  const Event chunk = makeGemm(shard, in_features, h, "nn", dtype);
  for (int i = 0; i < s.tp; ++i) {
    if (i + 1 < s.tp) tpRingStep(out, layer, ring, i > 0);
    compute(out, layer, dgrad, chunk);
    out.back().issued_with_previous = i > 0;
  }
  // The wgrad reads the gathered output gradient the ring left in the userbuffer.
  if (isFp8(dtype)) fp8Casts(out, layer, fp8WgradInputCasts(recipe, T, in_features), true);
  compute(out, layer, wgrad, makeGemm(h, in_features, T, "tn", dtype));
  out.back().weight_grad = true;
}

void LayerOpBuilder::bulkOverlapLinearBackward(OpList& out, int layer, std::string_view regather,
                                               std::string_view dgrad, std::string_view wgrad,
                                               std::string_view reduce_scatter,
                                               int64_t out_features) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden;
  const DType dtype = s.gemm_dtype;
  const Fp8Recipe recipe = s.spec.fp8_recipe;
  const int64_t bytes = T * h * e();
  // The input's re-gather beside the dgrad (and the output gradient's casts before it).
  tpCollective(out, layer, regather, EventKind::kAllGather, bytes);
  const size_t gather = out.size() - 1;
  if (isFp8(dtype)) fp8Casts(out, layer, fp8GradCasts(recipe, T, out_features));
  compute(out, layer, dgrad, makeGemm(T, h, out_features, "nn", dtype));
  out[gather].overlap_ops = static_cast<int>(out.size() - 1 - gather);
  // The input gradient's reduce-scatter beside the wgrad (in W when the backward is split).
  tpCollective(out, layer, reduce_scatter, EventKind::kReduceScatter, bytes);
  const size_t scatter = out.size() - 1;
  if (isFp8(dtype)) fp8Casts(out, layer, fp8WgradInputCasts(recipe, T, h), true);
  compute(out, layer, wgrad, makeGemm(out_features, h, T, "tn", dtype));
  out.back().weight_grad = true;
  out[scatter].overlap_ops = static_cast<int>(out.size() - 1 - scatter);
}

}  // namespace evsim

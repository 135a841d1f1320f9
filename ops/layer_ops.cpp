#include "ops/layer_ops.h"

#include "common/error.h"

namespace evsim {

namespace {

constexpr int64_t kMaskBytes = 1;     // dropout masks are stored as bytes
constexpr int64_t kTokenIdBytes = 8;  // Megatron's 8*s*b for token and position ids
constexpr int64_t kLogitBytes = 4;    // logits are upcast to fp32 for the cross-entropy

}  // namespace

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
    case Stream::kCpComm:
      return "cp-comm";
    case Stream::kEpComm:
      return "ep-comm";
    case Stream::kHost:
      return "host";
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
    case Phase::kWeightGrad:
      return "weight-grad";
  }
  return "?";
}

LayerShape modelLayerShape(const ModelConfig& model, int64_t micro_batch, int tp) {
  LayerShape shape;
  shape.micro_batch = micro_batch;
  shape.seq = model.seq_length;
  shape.hidden = model.hidden_size;
  shape.heads = model.num_heads;
  shape.query_groups = model.queryGroups();
  shape.head_dim = model.headDim();
  shape.ffn = model.ffn_hidden_size;
  shape.vocab = model.paddedVocab(tp);
  shape.tp = tp;
  shape.etp = tp;  // Megatron's default expert TP
  shape.moe = model.moe;
  shape.mla = model.mla;
  shape.mtp_layers = model.mtp_layers;
  shape.mtp_block = model.blocks.back();
  shape.dtype = model.dtype;
  shape.gemm_dtype = model.gemmDtype();
  shape.spec = model.spec;
  shape.tp_group = Placement{tp, 1, tp};
  // Placeholders valid for any sum over op lists; a plan sets the real placements per stage.
  shape.cp_ring = Placement{2, 1, 2};
  shape.cp_group = Placement{2, 1, 2};
  shape.ep_group = Placement{1, 1, 1};
  shape.etp_group = shape.tp_group;
  return shape;
}

void LayerOpBuilder::compute(OpList& out, int layer, std::string_view name, const Event& event,
                             int64_t weights, int64_t saved) {
  OpInstance op{table_.intern(event), Stream::kCompute, layer, name, recomputing_};
  if (!recomputing_) {
    op.weights = weights;
    op.saved_bytes = saving_ ? saved : 0;
  }
  out.push_back(op);
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

// A norm over the region's tokens: LayerNorm (gain and bias) or RMSNorm (gain), replicated over TP.
// The forward keeps its input.
void LayerOpBuilder::norm(OpList& out, int layer, std::string_view name, bool backward) {
  const LayerShape& s = shape_;
  const bool rms = s.spec.norm == NormKind::kRmsNorm;
  const bool eager = layer == kHeadLayer ? s.eager_final_norm : s.eager_blocks;
  if (rms && eager) {
    const int64_t rows = s.regionTokens();
    if (backward) {
      eagerKernels(out, layer, eagerRmsNormBackward(rows, s.hidden, e()));
    } else {
      eagerKernels(out, layer, eagerRmsNormForward(rows, s.hidden, e()), s.hidden,
                   eagerRmsNormSavedBytes(rows, s.hidden, e()));
    }
    return;
  }
  const char* op = rms ? (backward ? "rmsnorm_bwd" : "rmsnorm_fwd")
                       : (backward ? "layernorm_bwd" : "layernorm_fwd");
  const int64_t rows = s.regionTokens();
  compute(out, layer, name, makeCompute(op, {{"rows", rows}, {"cols", s.hidden}}, "", s.dtype),
          (rms ? 1 : 2) * s.hidden, e() * rows * s.hidden);
}

void LayerOpBuilder::eagerKernels(OpList& out, int layer, const EagerKernels& kernels,
                                  int64_t weights, int64_t saved) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    const EagerKernel& k = kernels[i];
    compute(out, layer, k.name,
            makeCompute("memory_pass",
                        {{"read_bytes", k.read_bytes}, {"write_bytes", k.write_bytes}}, "",
                        shape_.dtype),
            i == 0 ? weights : 0, i == 0 ? saved : 0);
  }
}

void LayerOpBuilder::rope(OpList& out, int layer, bool backward) {
  const LayerShape& s = shape_;
  if (s.spec.position != PositionKind::kRope) return;
  const int64_t T = s.tokens(), d = s.headDim();
  if (s.eager_blocks || s.complex_rope) {
    // Q's a/t heads, then K's g/t, each through its own float / multiply / cast.
    for (const int64_t heads : {s.heads / s.tp, s.query_groups / s.tp}) {
      eagerKernels(out, layer,
                   backward ? eagerRopeBackward(T, heads, d, s.localSeq(), e())
                            : eagerRopeForward(T, heads, d, s.localSeq(), e()));
    }
    return;
  }
  // Q and K heads rotated in place; the backward needs only the positions.
  compute(out, layer, backward ? "rope_bwd" : "rope",
          makeCompute(backward ? "rope_bwd" : "rope_fwd",
                      {{"tokens", T}, {"heads", (s.heads + s.query_groups) / s.tp}, {"dim", d}},
                      "", s.dtype));
}

void LayerOpBuilder::repeatKv(OpList& out, int layer, bool backward) {
  const LayerShape& s = shape_;
  if (!s.repeat_kv || s.query_groups >= s.heads) return;
  const int64_t groups = s.query_groups / s.tp, n_rep = s.heads / s.query_groups;
  eagerKernels(out, layer,
               backward ? eagerRepeatKvBackward(s.tokens(), groups, n_rep, s.headDim(), e())
                        : eagerRepeatKvForward(s.tokens(), groups, n_rep, s.headDim(), e()));
}

void LayerOpBuilder::swiglu(OpList& out, int layer, bool backward) {
  const LayerShape& s = shape_;
  const int64_t elems = s.tokens() * s.ffn / s.tp;
  if (s.eager_blocks) {
    // silu keeps its input, the multiply both of its inputs: 3 x e x elems.
    if (backward) {
      eagerKernels(out, layer, eagerSwiGluBackward(elems, e()));
    } else {
      eagerKernels(out, layer, eagerSwiGluForward(elems, e()), 0, 3 * e() * elems);
    }
    return;
  }
  // The activation keeps its input (the fc1 output).
  compute(out, layer, backward ? "swiglu_bwd" : "swiglu",
          makeCompute(backward ? "swiglu_bwd" : "swiglu_fwd", {{"elems", elems}}, "", s.dtype),
          0, backward ? 0 : e() * 2 * elems);
}

void LayerOpBuilder::eagerInputGradientSums(OpList& out, int layer, std::string_view name,
                                            int readers) {
  if (!shape_.eager_blocks) return;
  const int64_t elems = shape_.tokens() * shape_.hidden;
  const EagerKernel sum = inputGradientSum(name, elems, e());
  eagerKernels(out, layer, EagerKernels(static_cast<size_t>(readers - 1), sum));
}

// Hidden dropout over `elems` (none when the model's hidden dropout is 0); keeps a 1-byte mask.
void LayerOpBuilder::dropout(OpList& out, int layer, std::string_view name, int64_t elems,
                             bool backward) {
  if (!shape_.spec.hidden_dropout) return;
  compute(
      out, layer, name,
      makeCompute(backward ? "dropout_bwd" : "dropout_fwd", {{"elems", elems}}, "", shape_.dtype),
      0, kMaskBytes * elems);
}

void LayerOpBuilder::linearForward(OpList& out, int layer, std::string_view name, int64_t rows,
                                   int64_t out_features, int64_t in_features, int64_t bias,
                                   int64_t saved_input) {
  const DType dtype = layer >= 0 || mtp_block_ ? shape_.gemm_dtype : shape_.dtype;
  if (isFp8(dtype)) fp8Casts(out, layer, fp8InputCasts(shape_.spec.fp8_recipe, rows, in_features));
  compute(out, layer, name, makeGemm(rows, out_features, in_features, "nt", dtype),
          out_features * in_features + bias, saved_input * savedInputBytes(dtype));
}

void LayerOpBuilder::fp8Casts(OpList& out, int layer, const std::vector<Fp8Cast>& casts,
                              bool weight_grad) {
  for (const Fp8Cast& c : casts) {
    compute(out, layer, c.name, c.event);
    out.back().weight_grad = weight_grad;
  }
}

int64_t LayerOpBuilder::savedInputBytes(DType dtype) const {
  return isFp8(dtype) ? fp8SavedInputBytes(shape_.spec.fp8_recipe, shape_.dtype)
                      : dtypeBytes(dtype);
}

void LayerOpBuilder::linearBackward(OpList& out, int layer, std::string_view dgrad,
                                    std::string_view wgrad, int64_t rows, int64_t out_features,
                                    int64_t in_features) {
  const DType dtype = layer >= 0 || mtp_block_ ? shape_.gemm_dtype : shape_.dtype;
  const Fp8Recipe recipe = shape_.spec.fp8_recipe;
  if (isFp8(dtype)) fp8Casts(out, layer, fp8GradCasts(recipe, rows, out_features));
  compute(out, layer, dgrad, makeGemm(rows, in_features, out_features, "nn", dtype));
  if (isFp8(dtype)) fp8Casts(out, layer, fp8WgradInputCasts(recipe, rows, in_features), true);
  compute(out, layer, wgrad, makeGemm(out_features, in_features, rows, "tn", dtype));
  // Zero-bubble W tasks run these (and moe_ops.cpp's expert and router weight gradients).
  out.back().weight_grad = true;
}

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

void LayerOpBuilder::mlpForward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, f = s.ffn;
  const int64_t region = s.regionTokens() * h;
  const bool swiglu = s.spec.mlp == MlpKind::kSwiGlu;
  const int64_t fc1_width = (swiglu ? 2 : 1) * f / t;  // SwiGLU: [gate | up] in one GEMM
  norm(out, layer, "mlp_layernorm", false);
  if (s.tp_comm_overlap) {
    ringGatherLinearForward(out, layer, "fc1_input_ring_exchange", "fc1_gemm", fc1_width,
                            bias(fc1_width), region);
  } else {
    gatherInput(out, layer, "fc1_input_allgather");
    linearForward(out, layer, "fc1_gemm", T, fc1_width, h, bias(fc1_width),
                  s.columnInputTokens() * h);
  }
  // The activation keeps its input (the fc1 output), fc2 its input (the activation's output);
  // xformers' fused SwiGLU keeps only the fc1 output and recomputes the product in the backward.
  const bool keep_product = !(swiglu && s.swiglu_recompute_product);
  if (swiglu) {
    this->swiglu(out, layer, false);
  } else {
    compute(out, layer, "gelu", makeCompute("gelu_fwd", {{"elems", T * f / t}}, "", s.dtype), 0,
            e() * T * fc1_width);
  }
  if (s.tp_comm_overlap) {
    linearForwardReduceScatter(out, layer, "fc2_gemm", "fc2_reduce_scatter", f / t, bias(h));
  } else {
    linearForward(out, layer, "fc2_gemm", T, h, f / t, bias(h), keep_product ? T * f / t : 0);
    reduceOutput(out, layer, "fc2_allreduce", "fc2_reduce_scatter");
  }
  dropout(out, layer, "mlp_dropout", region, false);
  compute(out, layer, "mlp_residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::mlpBackward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t T = s.tokens(), h = s.hidden, t = s.tp, f = s.ffn;
  const int64_t region = s.regionTokens() * h;
  const bool swiglu = s.spec.mlp == MlpKind::kSwiGlu;
  const int64_t fc1_width = (swiglu ? 2 : 1) * f / t;
  dropout(out, layer, "mlp_dropout_bwd", region, true);
  if (swiglu && s.swiglu_recompute_product) {
    // xformers' silu_bw_fused writes the product beside the gate/up gradients; costed as the
    // forward's product kernel run again (its reads of both fc1 halves and its write).
    compute(out, layer, "swiglu_product_recompute",
            makeCompute("swiglu_fwd", {{"elems", T * f / t}}, "", s.dtype));
    out.back().recompute = true;  // hardware work, not model FLOPs
  }
  if (s.tp_comm_overlap) {
    ringGatherLinearBackward(out, layer, "fc2_grad_ring_exchange", "fc2_dgrad", "fc2_wgrad", f / t);
  } else {
    gatherInput(out, layer, "fc2_grad_allgather");
    linearBackward(out, layer, "fc2_dgrad", "fc2_wgrad", T, h, f / t);
  }
  if (swiglu) {
    this->swiglu(out, layer, true);
  } else {
    compute(out, layer, "gelu_bwd", makeCompute("gelu_bwd", {{"elems", T * f / t}}, "", s.dtype));
  }
  if (s.tp_comm_overlap) {
    bulkOverlapLinearBackward(out, layer, "fc1_input_regather", "fc1_dgrad", "fc1_wgrad",
                              "fc1_input_grad_reduce_scatter", fc1_width);
  } else {
    gatherInput(out, layer, "fc1_input_regather");
    linearBackward(out, layer, "fc1_dgrad", "fc1_wgrad", T, fc1_width, h);
    reduceOutput(out, layer, "fc1_input_grad_allreduce", "fc1_input_grad_reduce_scatter");
  }
  if (swiglu) eagerInputGradientSums(out, layer, "fc1_input_grad_sum", 2);  // w1, w3
  norm(out, layer, "mlp_layernorm_bwd", true);
  compute(out, layer, "mlp_residual_grad_add",
          makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::blockForward(const TransformerBlock& block, int layer, OpList& out) {
  // Full recomputation keeps only the block's input: on its first op, the ops themselves nothing.
  // Per-op selective checkpointing keeps the input and the saved ops' outputs, put on the first op
  // the same way (op_checkpoint.cpp).
  const bool op_checkpoint = shape_.recompute == Recompute::kSelectiveOp && !recomputing_;
  const bool full = (shape_.recompute == Recompute::kFull || op_checkpoint) && !recomputing_;
  const size_t first = out.size();
  if (full) saving_ = false;
  if (shape_.mla.enabled()) {
    mlaForward(out, layer);
  } else {
    attentionForward(out, layer, /*cross=*/false);
  }
  if (block.cross_attention) attentionForward(out, layer, /*cross=*/true);
  if (block.moe) {
    moeForward(out, layer);
  } else {
    mlpForward(out, layer);
  }
  saving_ = true;
  if (full) {
    out[first].saved_bytes =
        op_checkpoint ? opCheckpointSavedBytes() : e() * shape_.regionTokens() * shape_.hidden;
  }
}

void LayerOpBuilder::blockBackward(const TransformerBlock& block, int layer, OpList& out) {
  if (shape_.recompute == Recompute::kFull) {
    // Megatron's full (uniform) checkpointing: the block's input was kept, the forward re-runs.
    recomputing_ = true;
    blockForward(block, layer, out);
    recomputing_ = false;
  } else if (shape_.recompute == Recompute::kSelectiveOp) {
    recomputing_ = true;
    opCheckpointRecompute(out, layer);
    recomputing_ = false;
  }
  if (block.moe) {
    moeBackward(out, layer);
  } else {
    mlpBackward(out, layer);
  }
  if (block.cross_attention) attentionBackward(out, layer, /*cross=*/true);
  if (shape_.mla.enabled()) {
    mlaBackward(out, layer);
  } else {
    attentionBackward(out, layer, /*cross=*/false);
  }
}

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
  // Vocab-parallel cross-entropy: max logit, target logit and sum of exponentials, fp32 per token.
  const int64_t per_token = T * dtypeBytes(DType::kFp32);
  tpAllReduce(out, kHeadLayer, "ce_max_allreduce", per_token, DType::kFp32);
  tpAllReduce(out, kHeadLayer, "ce_target_allreduce", per_token, DType::kFp32);
  tpAllReduce(out, kHeadLayer, "ce_sumexp_allreduce", per_token, DType::kFp32);
  mtpForward(out, owns_mtp_embedding);
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

#include "ops/layer_ops.h"

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

void LayerOpBuilder::eagerKernels(OpList& out, int layer, std::span<const EagerKernel> kernels,
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

}  // namespace evsim

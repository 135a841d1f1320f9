#include "ops/layer_footprint.h"

#include "common/error.h"

namespace evsim {

namespace {

void addOps(const EventTable& table, const OpList& ops, bool forward, LayerFootprint& out) {
  for (const OpInstance& op : ops) {
    const double flops = table[op.event].event.flops;
    out.work_flops += flops;
    if (op.recompute) continue;
    out.model_flops += flops;
    if (forward) {
      out.weights += op.weights;
      if (op.expert) out.expert_weights += op.weights;
      out.saved_bytes += op.saved_bytes;
    }
    // A W task's GEMMs keep their inputs until it runs (an FP8 cast in the W task reads one of
    // those inputs: nothing of its own).
    if (op.weight_grad && isGemmOp(table[op.event].event.op)) {
      out.weight_grad_input_bytes += weightGradInputBytes(table[op.event].event);
    }
  }
}

}  // namespace

int64_t weightGradInputBytes(const Event& wgrad) {
  // A batched GEMM (MoE's grouped expert GEMMs) reads `batch` pairs of inputs.
  const int64_t batch = wgrad.hasDim("batch") ? wgrad.dim("batch") : 1;
  return batch * (wgrad.dim("m") + wgrad.dim("n")) * wgrad.dim("k") * dtypeBytes(wgrad.dtype);
}

const LayerFootprint& ModelFootprint::block(const TransformerBlock& block) const {
  for (const auto& [kind, footprint] : blocks) {
    if (kind == block) return footprint;
  }
  EVSIM_THROW(Error, "no footprint for a block of type {} (cross_attention {}, moe {})",
              static_cast<int>(block.type), block.cross_attention, block.moe);
}

LayerFootprint footprintOf(const EventTable& table, const OpList& forward, const OpList& backward) {
  LayerFootprint out;
  addOps(table, forward, /*forward=*/true, out);
  addOps(table, backward, /*forward=*/false, out);
  return out;
}

int embeddingStreams(const ModelConfig& model) { return model.hasCrossAttention() ? 2 : 1; }

ModelFootprint modelFootprint(const ModelConfig& model, const LayerShape& shape) {
  EventTable scratch;
  LayerOpBuilder builder(shape, scratch);
  ModelFootprint out;
  for (const TransformerBlock& block : model.blocks) {
    bool known = false;
    for (const auto& entry : out.blocks) known = known || entry.first == block;
    if (known) continue;
    OpList forward, backward;
    builder.blockForward(block, 0, forward);
    builder.blockBackward(block, 0, backward);
    out.blocks.emplace_back(block, footprintOf(scratch, forward, backward));
  }
  OpList forward, backward;
  builder.embeddingForward(embeddingStreams(model), forward);
  builder.embeddingBackward(embeddingStreams(model), backward);
  out.embedding = footprintOf(scratch, forward, backward);
  forward.clear();
  backward.clear();
  builder.headForward(forward, /*owns_output_weight=*/false);
  builder.headBackward(backward);
  out.head = footprintOf(scratch, forward, backward);
  out.output_weights = shape.vocab / shape.tp * shape.hidden;
  if (shape.mtp_layers > 0) {
    forward.clear();
    backward.clear();
    builder.mtpForward(forward, /*owns_embedding=*/false);
    builder.mtpBackward(backward);
    out.mtp = footprintOf(scratch, forward, backward);
    out.mtp_embedding_weights = shape.vocab / shape.tp * shape.hidden;
  }
  return out;
}

ModelFootprint unsplitFootprint(const ModelConfig& model) {
  return modelFootprint(model, modelLayerShape(model, /*micro_batch=*/1, /*tp=*/1));
}

}  // namespace evsim

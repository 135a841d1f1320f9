#include "modeler/memory_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/checked.h"
#include "common/error.h"
#include "common/units.h"
#include "events/layer_footprint.h"
#include "modeler/task_graph.h"

namespace evsim {

int64_t modelStateBytesPerParameter(DType dtype) {
  // Megatron-LM theoretical_memory_usage.py: 18 bytes per parameter without the distributed
  // optimizer (16-bit weight 2, fp32 main grad 4, fp32 master weight 4, Adam moments 4 + 4).
  // An fp32 model keeps no master copy: weight 4, gradient 4, moments 4 + 4.
  return dtype == DType::kFp32 ? 16 : 18;
}

double modelStateBytesPerParameter(DType dtype, int zero_stage, int dp) {
  EVSIM_CHECK(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "zero {} over {}", zero_stage, dp);
  // Weight w, gradient g (kept in fp32 for 16-bit models: Megatron's main grad) and optimizer state
  // o (fp32 master copy for 16-bit models, Adam m and v): 2 + 4 + 12 or 4 + 4 + 8.
  const bool fp32 = dtype == DType::kFp32;
  const double w = fp32 ? 4 : 2, g = 4, o = fp32 ? 8 : 12, d = dp;
  switch (zero_stage) {
    case 0:
      return w + g + o;
    case 1:
      return w + g + o / d;
    case 2:
      return w + (g + o) / d;
    default:
      return (w + g + o) / d;
  }
}

int64_t blockActivationBytes(const ModelConfig& model, const TransformerBlock& block,
                             int64_t micro_batch, int tp, Recompute recompute,
                             bool sequence_parallel) {
  Strategy strategy;
  strategy.micro_batch = micro_batch;
  strategy.tp = tp;
  strategy.recompute = recompute;
  strategy.sequence_parallel = sequence_parallel;
  const LayerShape shape = layerShape(model, strategy, Placement{tp, 1, tp});
  return modelFootprint(model, shape).block(block).saved_bytes;
}

MemoryEstimate estimateMemory(const IterationPlan& plan, double headroom) {
  std::vector<ChunkMemoryInput> chunks;
  chunks.reserve(plan.stages.size());
  for (const StagePlan& stage : plan.stages) {
    int64_t saved = 0, weight_grad_inputs = 0;
    // Saturating: a sum beyond int64 is out of memory on any device, not an error (search).
    for (const OpInstance& op : stage.forward) saved = saturatingAdd(saved, op.saved_bytes);
    for (const OpInstance& op : stage.backward) {
      if (!op.weight_grad) continue;
      weight_grad_inputs =
          saturatingAdd(weight_grad_inputs, weightGradInputBytes(plan.events[op.event].event));
    }
    chunks.push_back(
        ChunkMemoryInput{stage.parameters, stage.expert_parameters, saved, weight_grad_inputs});
  }
  return estimateMemory(plan.model, plan.strategy, plan.micro_batches,
                        plan.cluster.device.memoryBytes(), chunks, headroom);
}

MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t micro_batches, int64_t capacity_bytes,
                              const std::vector<ChunkMemoryInput>& chunks, double headroom) {
  EVSIM_CHECK(headroom >= 0 && headroom < 1, "headroom {}", headroom);
  const int P = strategy.pp;
  EVSIM_CHECK(!chunks.empty() && chunks.size() % P == 0, "{} chunks for {} stages", chunks.size(),
              P);
  const int v = static_cast<int>(chunks.size()) / P;
  const int zero = strategy.gradGroupSize() > 1 ? strategy.zero_stage : 0;
  const double dense_state =
      modelStateBytesPerParameter(model.dtype, zero, strategy.gradGroupSize());
  const double expert_state =
      modelStateBytesPerParameter(model.dtype, zero, strategy.expertGradGroupSize());

  MemoryEstimate out;
  out.headroom = headroom;
  out.capacity_bytes = capacity_bytes;
  out.usable_bytes =
      static_cast<int64_t>(std::floor(static_cast<double>(out.capacity_bytes) * (1 - headroom)));
  // The device orders the task graph is built from (pipeline_schedule.h).
  const std::shared_ptr<const DeviceOrders> orders =
      scheduleOrders(strategy.schedule, PipelineShape{P, v, micro_batches});
  for (int device = 0; device < P; ++device) {
    StageMemory mem;
    mem.stage = device;
    // Per chunk of the device: its parameters and its activation bytes per micro-batch.
    std::vector<int64_t> chunk_bytes, chunk_held_bytes;
    int64_t expert_parameters = 0;
    for (int c = 0; c < v; ++c) {
      const ChunkMemoryInput& chunk = chunks[static_cast<size_t>(c) * P + device];
      mem.parameters = saturatingAdd(mem.parameters, chunk.parameters);
      expert_parameters = saturatingAdd(expert_parameters, chunk.expert_parameters);
      chunk_bytes.push_back(chunk.activation_bytes);
      chunk_held_bytes.push_back(chunk.weight_grad_input_bytes);
      mem.activation_bytes_per_micro_batch =
          saturatingAdd(mem.activation_bytes_per_micro_batch, chunk.activation_bytes);
    }
    // Clamped like the sums: llround beyond int64 is unspecified (x86 gives INT64_MIN, a negative).
    const double state_bytes =
        static_cast<double>(mem.parameters - expert_parameters) * dense_state +
        static_cast<double>(expert_parameters) * expert_state;
    mem.model_state_bytes =
        state_bytes < 9.2e18 ? std::llround(state_bytes) : std::numeric_limits<int64_t>::max();
    const ActivationPeak peak = peakActivations((*orders)[device], chunk_bytes, chunk_held_bytes);
    mem.in_flight = peak.in_flight;
    mem.activation_bytes = peak.bytes;
    mem.peak_bytes = saturatingAdd(mem.model_state_bytes, mem.activation_bytes);
    if (mem.peak_bytes > out.peak_bytes) {
      out.peak_bytes = mem.peak_bytes;
      out.peak_stage = mem.stage;
    }
    out.stages.push_back(mem);
  }
  return out;
}

}  // namespace evsim

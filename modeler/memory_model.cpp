#include "modeler/memory_model.h"
#include "plan/layer_shape.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/checked.h"
#include "common/error.h"
#include "common/units.h"
#include "ops/layer_footprint.h"
#include "plan/task_graph.h"

namespace evsim {

int64_t modelStateBytesPerParameter(DType dtype) {
  // Megatron-LM theoretical_memory_usage.py: 18 bytes per parameter without the distributed
  // optimizer (16-bit weight 2, fp32 main grad 4, fp32 master weight 4, Adam moments 4 + 4).
  // An fp32 model keeps no master copy: weight 4, gradient 4, moments 4 + 4.
  return dtype == DType::kFp32 ? 16 : 18;
}

namespace {

// Weight w, gradient g (kept in fp32 for 16-bit models: Megatron's main grad) and optimizer state
// o (fp32 master copy for 16-bit models, Adam m and v): 2 + 4 + 12 or 4 + 4 + 8.
struct StateParts {
  double w, g, o;
};
StateParts stateParts(DType dtype) {
  const bool fp32 = dtype == DType::kFp32;
  return {fp32 ? 4.0 : 2.0, 4.0, fp32 ? 8.0 : 12.0};
}

// Byte sums saturate (beyond int64 is out of memory, not an error), and so does this rounding:
// llround beyond int64 is unspecified (x86 gives INT64_MIN, a negative).
int64_t clampedRound(double bytes) {
  return bytes < 9.2e18 ? std::llround(bytes) : std::numeric_limits<int64_t>::max();
}

}  // namespace

double hostStateBytesPerParameter(DType dtype, int zero_stage, int dp) {
  EVSIM_CHECK(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "zero {} over {}", zero_stage, dp);
  const StateParts p = stateParts(dtype);
  const double host = p.o + 4;  // the state and the fp32 gradients it is stepped with
  return zero_stage > 0 ? host / dp : host;
}

HostCapacity hostCapacity(const ClusterConfig& cluster) {
  HostCapacity out;
  out.gpus_per_node = cluster.gpus_per_node;
  if (cluster.host_memory) {
    out.bytes_per_node = static_cast<int64_t>(cluster.host_memory->gib * kBytesPerGiB);
  }
  return out;
}

double modelStateBytesPerParameter(DType dtype, int zero_stage, int dp, bool offload_optimizer) {
  EVSIM_CHECK(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "zero {} over {}", zero_stage, dp);
  const StateParts p = stateParts(dtype);
  const double w = p.w, g = p.g, o = offload_optimizer ? 0 : p.o, d = dp;
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
    int64_t saved = 0, weight_grad_inputs = 0, layer_saved = 0, largest_layer = 0;
    // Saturating: a sum beyond int64 is out of memory on any device, not an error (search).
    for (size_t i = 0; i < stage.forward.size(); ++i) {
      const OpInstance& op = stage.forward[i];
      saved = saturatingAdd(saved, op.saved_bytes);
      layer_saved = saturatingAdd(layer_saved, op.saved_bytes);
      if (i + 1 == stage.forward.size() || stage.forward[i + 1].layer != op.layer) {
        largest_layer = std::max(largest_layer, layer_saved);
        layer_saved = 0;
      }
    }
    for (const OpInstance& op : stage.backward) {
      if (!op.weight_grad) continue;
      weight_grad_inputs =
          saturatingAdd(weight_grad_inputs, weightGradInputBytes(plan.events[op.event].event));
    }
    chunks.push_back(ChunkMemoryInput{stage.parameters, stage.expert_parameters, saved,
                                      weight_grad_inputs, largest_layer});
  }
  return estimateMemory(plan.model, plan.strategy, plan.micro_batches,
                        plan.cluster.device.memoryBytes(), chunks, headroom,
                        hostCapacity(plan.cluster));
}

MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t micro_batches, int64_t capacity_bytes,
                              const std::vector<ChunkMemoryInput>& chunks, double headroom,
                              const HostCapacity& host) {
  EVSIM_CHECK(headroom >= 0 && headroom < 1, "headroom {}", headroom);
  const int P = strategy.pp;
  EVSIM_CHECK(!chunks.empty() && chunks.size() % P == 0, "{} chunks for {} stages", chunks.size(),
              P);
  const int v = static_cast<int>(chunks.size()) / P;
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, v);
  const int zero = strategy.gradGroupSize() > 1 ? strategy.zero_stage : 0;
  const bool offload_optimizer = offloadsOptimizer(strategy.offload);
  const bool offload_activations = offloadsActivations(strategy.offload);
  const double dense_state =
      modelStateBytesPerParameter(model.dtype, zero, strategy.gradGroupSize(), offload_optimizer);
  const double expert_state = modelStateBytesPerParameter(
      model.dtype, zero, strategy.expertGradGroupSize(), offload_optimizer);
  const double dense_host =
      offload_optimizer ? hostStateBytesPerParameter(model.dtype, zero, strategy.gradGroupSize())
                        : 0;
  const double expert_host =
      offload_optimizer
          ? hostStateBytesPerParameter(model.dtype, zero, strategy.expertGradGroupSize())
          : 0;

  MemoryEstimate out;
  out.headroom = headroom;
  out.capacity_bytes = capacity_bytes;
  out.usable_bytes =
      static_cast<int64_t>(std::floor(static_cast<double>(out.capacity_bytes) * (1 - headroom)));
  out.host_usable_bytes =
      static_cast<int64_t>(std::floor(static_cast<double>(host.bytes_per_node) * (1 - headroom)));
  // The held-activation states of the device orders the task graph is built from (task_graph.h).
  const std::shared_ptr<const std::vector<ActivationStates>> states =
      scheduleActivationStates(strategy.schedule, PipelineShape{P, v, micro_batches});
  for (int device = 0; device < P; ++device) {
    StageMemory mem;
    mem.stage = device;
    // Per chunk of the device: its parameters and its activation bytes per micro-batch.
    std::vector<int64_t> chunk_bytes, chunk_held_bytes;
    int64_t expert_parameters = 0, largest_layer = 0;
    for (int c = 0; c < v; ++c) {
      const ChunkMemoryInput& chunk = chunks[static_cast<size_t>(pipeline.virtualStage(device, c))];
      mem.parameters = saturatingAdd(mem.parameters, chunk.parameters);
      expert_parameters = saturatingAdd(expert_parameters, chunk.expert_parameters);
      chunk_bytes.push_back(chunk.activation_bytes);
      chunk_held_bytes.push_back(chunk.weight_grad_input_bytes);
      largest_layer = std::max(largest_layer, chunk.largest_layer_bytes);
      mem.activation_bytes_per_micro_batch =
          saturatingAdd(mem.activation_bytes_per_micro_batch, chunk.activation_bytes);
    }
    const double dense_parameters = static_cast<double>(mem.parameters - expert_parameters);
    mem.model_state_bytes = clampedRound(dense_parameters * dense_state +
                                         static_cast<double>(expert_parameters) * expert_state);
    mem.host_state_bytes = clampedRound(dense_parameters * dense_host +
                                        static_cast<double>(expert_parameters) * expert_host);
    const ActivationPeak peak = peakActivations((*states)[device], chunk_bytes, chunk_held_bytes);
    mem.in_flight = peak.in_flight;
    mem.activation_bytes = peak.bytes;
    if (offload_activations) {
      mem.host_activation_bytes = peak.bytes;
      mem.activation_bytes = saturatingAdd(largest_layer, largest_layer);
    }
    mem.peak_bytes = saturatingAdd(mem.model_state_bytes, mem.activation_bytes);
    out.host_peak_bytes = std::max(
        out.host_peak_bytes, clampedRound(double(mem.hostBytes()) * double(host.gpus_per_node)));
    if (mem.peak_bytes > out.peak_bytes) {
      out.peak_bytes = mem.peak_bytes;
      out.peak_stage = mem.stage;
    }
    out.stages.push_back(mem);
  }
  return out;
}

}  // namespace evsim

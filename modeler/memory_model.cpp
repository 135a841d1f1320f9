#include "modeler/memory_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "common/checked.h"
#include "common/error.h"
#include "common/units.h"
#include "modeler/memory_components.h"
#include "modeler/stage_memory.h"
#include "ops/layer_footprint.h"
#include "plan/layer_checkpoint.h"
#include "plan/layer_shape.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_core.h"
#include "plan/task_graph.h"
#include "plan/zero2_buckets.h"

namespace evsim {

int64_t modelStateBytesPerParameter(DType dtype) {
  // Megatron-LM theoretical_memory_usage.py: 18 bytes per parameter without the distributed
  // optimizer (16-bit weight 2, fp32 main grad 4, fp32 master weight 4, Adam moments 4 + 4).
  // An fp32 model keeps no master copy: weight 4, gradient 4, moments 4 + 4.
  return std::llround(stateBytesPerParameter(Framework::kMegatron, dtype, 0, 1, false).total());
}

double hostStateBytesPerParameter(DType dtype, int zero_stage, int dp) {
  EVSIM_CHECK(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "zero {} over {}", zero_stage, dp);
  // The state and the fp32 gradients it is stepped with.
  const double host =
      stateBytesPerParameter(Framework::kMegatron, dtype, 0, 1, false).optimizer + 4;
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
  return stateBytesPerParameter(Framework::kMegatron, dtype, zero_stage, dp, offload_optimizer)
      .total();
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

int64_t StageMemory::bufferBytes() const {
  int64_t out = comm_transient_bytes;
  for (int64_t b :
       {dp_buffer_bytes, pending_reduction_bytes, pp_buffer_bytes, fp8_bytes, workspace_bytes}) {
    out = saturatingAdd(out, b);
  }
  return out;
}

int64_t StageMemory::activationPeakBytes() const {
  return saturatingAdd(activation_bytes, activation_transient_bytes);
}

void addLayerFacts(const ModelConfig& model, const ModelFootprint& footprint,
                   const ModelFootprint* unrecomputed, int first_layer, int end_layer,
                   bool has_embedding, bool has_head, ChunkMemoryInput& chunk,
                   const std::vector<char>* recomputed) {
  for (int layer = first_layer; layer < end_layer; ++layer) {
    const TransformerBlock& block = model.blocks[layer];
    const LayerFootprint& kept = footprint.block(block);
    chunk.block_parameters = saturatingAdd(chunk.block_parameters, kept.weights);
    chunk.largest_layer_parameters = std::max(chunk.largest_layer_parameters, kept.weights);
    chunk.largest_block_parameters = std::max(chunk.largest_block_parameters, kept.weights);
    chunk.has_moe = chunk.has_moe || block.moe;
    if (unrecomputed && (!recomputed || (*recomputed)[static_cast<size_t>(layer)])) {
      chunk.recompute_transient_bytes =
          std::max(chunk.recompute_transient_bytes,
                   unrecomputed->block(block).saved_bytes - kept.saved_bytes);
    }
  }
  if (has_embedding) {
    chunk.largest_layer_parameters =
        std::max(chunk.largest_layer_parameters, footprint.embedding.weights);
    chunk.root_parameters = saturatingAdd(chunk.root_parameters, footprint.embedding.weights);
    chunk.embedding_parameters = footprint.embedding.weights;
  }
  if (has_head) {
    const int64_t head = headParameters(model, footprint, has_embedding);
    chunk.largest_layer_parameters = std::max(chunk.largest_layer_parameters, head);
    chunk.root_parameters = saturatingAdd(chunk.root_parameters, head);
    chunk.head_parameters = head;
    chunk.head_gradient_parameters = footprint.output_weights;
  }
  // ZeRO-2's arrivals (zero2Arrivals): the head's come first (its backward runs first), the
  // embedding's last and whole. A head that owns its output weight and has no multi-token
  // prediction's ops (LayerOpBuilder::headBackward: the loss, the output GEMM's dgrad and wgrad,
  // then the final norm) gives the output weight's gradient first, then the rest of its
  // parameters (or all of them at once, at least as many); otherwise nothing is assumed of a_1
  // and the head's later arrivals are at most all of its parameters.
  const bool plain_head = has_head && headOwnsOutputWeight(model, has_embedding) &&
                          footprint.mtp.weights == 0 && footprint.mtp_embedding_weights == 0;
  chunk.first_gradient_elements = plain_head ? footprint.output_weights : 0;
  chunk.later_gradient_elements =
      std::max(chunk.largest_block_parameters,
               plain_head ? chunk.head_parameters - footprint.output_weights
                          : chunk.head_parameters);
}

MemoryEstimate estimateMemory(const IterationPlan& plan, double headroom) {
  return estimateMemory(plan, headroom, std::vector<PendingReductionPeak>{});
}

MemoryEstimate estimateMemory(const IterationPlan& plan, double headroom,
                              const std::vector<PendingReductionPeak>& pending_reductions) {
  std::vector<ChunkMemoryInput> chunks;
  chunks.reserve(plan.stages.size());
  // The footprints the plan's op lists were built from, and without recomputation.
  Strategy unrecomputed_strategy = plan.strategy;
  const Placement tp_group{plan.strategy.tp, 1, plan.strategy.tp};
  const ModelFootprint footprint =
      modelFootprint(plan.model, layerShape(plan.model, plan.strategy, tp_group));
  std::unique_ptr<ModelFootprint> unrecomputed;
  if (plan.strategy.recompute != Recompute::kNone) {
    unrecomputed_strategy.recompute = Recompute::kNone;
    unrecomputed = std::make_unique<ModelFootprint>(
        modelFootprint(plan.model, layerShape(plan.model, unrecomputed_strategy, tp_group)));
  }
  // Per-layer checkpointing (--recompute-every): which blocks recompute, from the plan's split.
  std::vector<int> first_layers;
  for (const StagePlan& stage : plan.stages) first_layers.push_back(stage.first_layer);
  const std::vector<char> recomputed =
      checkpointedBlocks(plan.strategy, first_layers, static_cast<int>(plan.model.numLayers()));
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
      // Only GEMMs hold inputs for a deferred W task (an FP8 cast there reads one of them).
      if (!op.weight_grad || !isGemmOp(plan.events[op.event].event.op)) continue;
      weight_grad_inputs =
          saturatingAdd(weight_grad_inputs, weightGradInputBytes(plan.events[op.event].event));
    }
    ChunkMemoryInput chunk{stage.parameters, stage.expert_parameters, saved, weight_grad_inputs,
                           largest_layer};
    addLayerFacts(plan.model, footprint, unrecomputed.get(), stage.first_layer,
                  stage.first_layer + stage.num_layers, stage.has_embedding, stage.has_head, chunk,
                  plan.strategy.recompute_every > 1 ? &recomputed : nullptr);
    chunks.push_back(chunk);
  }
  std::vector<DeviceChunkSums> devices =
      deviceChunkSums(plan.strategy, plan.micro_batches, chunks);
  if (plan.strategy.zero_stage == 2 && plan.strategy.reducesAtStep()) {
    setLeastFirstBuckets(plan.model, plan.strategy, chunks, devices);
  }
  for (size_t s = 0; s < pending_reductions.size() && s < devices.size(); ++s) {
    devices[s].pending_reductions = pending_reductions[s];
  }
  return estimateMemory(plan.model, plan.strategy, plan.cluster.device.memoryBytes(), devices,
                        headroom, hostCapacity(plan.cluster), plan.cluster.device.memory);
}

std::vector<DeviceChunkSums> deviceChunkSums(const Strategy& strategy, int64_t micro_batches,
                                             const std::vector<ChunkMemoryInput>& chunks) {
  const int P = strategy.pp;
  EVSIM_CHECK(!chunks.empty() && chunks.size() % P == 0, "{} chunks for {} stages", chunks.size(),
              P);
  const int v = static_cast<int>(chunks.size()) / P;
  // The held-activation states of the device orders the task graph is built from (task_graph.h).
  const std::shared_ptr<const std::vector<ActivationStates>> states = scheduleActivationStates(
      strategy.schedule, PipelineShape{P, v, micro_batches, strategy.microbatch_group});
  return deviceChunkSums(strategy, micro_batches, chunks, *states);
}

std::vector<DeviceChunkSums> deviceChunkSums(const Strategy& strategy, int64_t micro_batches,
                                             const std::vector<ChunkMemoryInput>& chunks,
                                             const std::vector<ActivationStates>& states) {
  std::vector<DeviceChunkSums> out;
  DeviceChunkScratch scratch;
  deviceChunkSums(strategy, micro_batches, chunks, states, out, scratch);
  return out;
}

void deviceChunkSums(const Strategy& strategy, int64_t micro_batches,
                     const std::vector<ChunkMemoryInput>& chunks,
                     const std::vector<ActivationStates>& states, std::vector<DeviceChunkSums>& out,
                     DeviceChunkScratch& scratch) {
  const int P = strategy.pp;
  EVSIM_CHECK(!chunks.empty() && chunks.size() % P == 0 && states.size() == static_cast<size_t>(P),
              "{} chunks and {} activation states for {} stages", chunks.size(), states.size(), P);
  const int v = static_cast<int>(chunks.size()) / P;
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, v);
  out.assign(static_cast<size_t>(P), DeviceChunkSums{});
  std::vector<int64_t>& chunk_bytes = scratch.chunk_bytes;
  std::vector<int64_t>& chunk_held_bytes = scratch.chunk_held_bytes;
  // The shard groups of the dense parameters and of the routed experts (the same for every
  // candidate that shares these sums: they differ only in ZeRO stage, offload and DP overlap).
  const double dense_group = strategy.gradGroupSize();
  const double expert_group = strategy.expertGradGroupSize();
  for (int device = 0; device < P; ++device) {
    DeviceChunkSums& sums = out[device];
    sums.micro_batches = micro_batches;
    sums.chunks = v;
    StageLayerFacts& facts = sums.facts;
    facts.model_parts = v;
    double largest_part_shard = -1;
    // Per chunk of the device: its parameters and its activation bytes per micro-batch.
    chunk_bytes.clear();
    chunk_held_bytes.clear();
    for (int c = 0; c < v; ++c) {
      const size_t k = static_cast<size_t>(pipeline.virtualStage(device, c));
      const ChunkMemoryInput& chunk = chunks[k];
      facts.parameters = saturatingAdd(facts.parameters, chunk.parameters);
      sums.expert_parameters = saturatingAdd(sums.expert_parameters, chunk.expert_parameters);
      chunk_bytes.push_back(chunk.activation_bytes);
      chunk_held_bytes.push_back(chunk.weight_grad_input_bytes);
      sums.largest_layer_bytes = std::max(sums.largest_layer_bytes, chunk.largest_layer_bytes);
      sums.activation_bytes_per_micro_batch =
          saturatingAdd(sums.activation_bytes_per_micro_batch, chunk.activation_bytes);
      facts.block_parameters = saturatingAdd(facts.block_parameters, chunk.block_parameters);
      facts.largest_layer_parameters =
          std::max(facts.largest_layer_parameters, chunk.largest_layer_parameters);
      facts.largest_block_parameters =
          std::max(facts.largest_block_parameters, chunk.largest_block_parameters);
      // The two largest parts' roots (at most two parts of a rank have one).
      facts.other_root_parameters = std::max(
          facts.other_root_parameters, std::min(facts.root_parameters, chunk.root_parameters));
      facts.root_parameters = std::max(facts.root_parameters, chunk.root_parameters);
      facts.head_gradient_parameters =
          std::max(facts.head_gradient_parameters, chunk.head_gradient_parameters);
      facts.embedding_parameters =
          std::max(facts.embedding_parameters, chunk.embedding_parameters);
      facts.head_parameters = std::max(facts.head_parameters, chunk.head_parameters);
      facts.recompute_transient_bytes =
          std::max(facts.recompute_transient_bytes, chunk.recompute_transient_bytes);
      facts.has_moe = facts.has_moe || chunk.has_moe;
      facts.has_embedding = facts.has_embedding || k == 0;
      facts.has_head = facts.has_head || k + 1 == chunks.size();
      const double shard =
          static_cast<double>(chunk.parameters - chunk.expert_parameters) / dense_group +
          static_cast<double>(chunk.expert_parameters) / expert_group;
      if (shard > largest_part_shard) {
        largest_part_shard = shard;
        sums.step_part_parameters = chunk.parameters;
        sums.step_part_expert_parameters = chunk.expert_parameters;
      }
    }
    sums.peak = peakActivations(states[device], chunk_bytes, chunk_held_bytes);
  }
  if (strategy.framework == Framework::kFsdp && P > 1) {
    // FSDP under PP accumulates each chunk's gradients unsharded in fp32 from its first backward:
    // the moment where they and the held activations peak together, from each device order's
    // accumulation states (computed once per shape, accumulated_gradients.h).
    const std::shared_ptr<const std::vector<AccumulationStates>> accumulation =
        scheduleAccumulationStates(strategy.schedule,
                                   PipelineShape{P, v, micro_batches, strategy.microbatch_group});
    std::vector<int64_t>& chunk_gradient_bytes = scratch.chunk_gradient_bytes;
    for (int device = 0; device < P; ++device) {
      chunk_bytes.clear();
      chunk_held_bytes.clear();
      chunk_gradient_bytes.clear();
      for (int c = 0; c < v; ++c) {
        const ChunkMemoryInput& chunk =
            chunks[static_cast<size_t>(pipeline.virtualStage(device, c))];
        chunk_bytes.push_back(chunk.activation_bytes);
        chunk_held_bytes.push_back(chunk.weight_grad_input_bytes);
        chunk_gradient_bytes.push_back(
            clampedRound(kFsdpReduceBytes * static_cast<double>(chunk.parameters)));
      }
      out[device].has_accumulation = true;
      out[device].accumulation = peakWithAccumulatedGradients(
          (*accumulation)[static_cast<size_t>(device)], chunk_bytes, chunk_held_bytes,
          chunk_gradient_bytes);
    }
  }
}

void setLeastFirstBuckets(const ModelConfig& model, const Strategy& strategy,
                          const std::vector<ChunkMemoryInput>& chunks,
                          std::vector<DeviceChunkSums>& devices) {
  const int P = strategy.pp;
  EVSIM_CHECK(!chunks.empty() && chunks.size() % P == 0 && devices.size() == static_cast<size_t>(P),
              "{} chunks and {} devices for {} stages", chunks.size(), devices.size(), P);
  for (DeviceChunkSums& sums : devices) sums.pending_reductions = {};
  if (pipelineSchedule(strategy.schedule).splitsBackward() || fusesTasks(strategy)) return;
  const bool experts_unreduced = strategy.expertsSyncApart() && strategy.expertGradGroupSize() < 2;
  const DType wire =
      dataParallelGradDtype(strategy.framework, model.dtype, strategy.grad_reduce_in_bf16);
  const int64_t bucket_elements = zero2BucketElements(strategy, dtypeBytes(wire));
  const double model_bytes = dtypeBytes(model.dtype);
  auto first_bucket_bytes = [&](const ChunkMemoryInput& chunk) -> int64_t {
    if (chunk.expert_parameters > 0 && experts_unreduced) return 0;
    const int64_t first = zero2FirstBucketAtLeast(
        Zero2ChunkGradients{chunk.parameters, chunk.first_gradient_elements,
                            chunk.later_gradient_elements, chunk.embedding_parameters},
        bucket_elements);
    return clampedRound(static_cast<double>(first) * model_bytes);
  };
  const int v = static_cast<int>(chunks.size()) / P;
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, v);
  for (int device = 0; device < P; ++device) {
    // Whichever chunk's backward comes first after the held activations' peak opens its first
    // bucket with them all held, a plateau (DeviceChunkSums::pending_reductions): the least of
    // them.
    int64_t least = std::numeric_limits<int64_t>::max();
    for (int c = 0; c < v; ++c) {
      const size_t k = static_cast<size_t>(pipeline.virtualStage(device, c));
      least = std::min(least, first_bucket_bytes(chunks[k]));
    }
    devices[static_cast<size_t>(device)].pending_reductions = {least, 0};
  }
}

MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t micro_batches, int64_t capacity_bytes,
                              const std::vector<ChunkMemoryInput>& chunks, double headroom,
                              const HostCapacity& host, const MemoryOverheads& overheads) {
  std::vector<DeviceChunkSums> devices = deviceChunkSums(strategy, micro_batches, chunks);
  if (strategy.zero_stage == 2 && strategy.reducesAtStep()) {
    setLeastFirstBuckets(model, strategy, chunks, devices);
  }
  return estimateMemory(model, strategy, capacity_bytes, devices, headroom, host, overheads);
}

MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t capacity_bytes, const std::vector<DeviceChunkSums>& devices,
                              double headroom, const HostCapacity& host,
                              const MemoryOverheads& overheads) {
  const StrategyTerms terms = checkedStrategyTerms(model, strategy, devices, headroom, overheads);
  const int P = strategy.pp;
  MemoryEstimate out;
  out.headroom = headroom;
  out.capacity_bytes = capacity_bytes;
  out.usable_bytes = usableBytes(out.capacity_bytes, headroom);
  out.host_usable_bytes = usableBytes(host.bytes_per_node, headroom);
  out.stages.reserve(P);
  for (int device = 0; device < P; ++device) {
    StageMemory mem = stageMemory(model, strategy, terms, devices[device], device, capacity_bytes,
                                  /*full=*/true);
    out.host_peak_bytes = std::max(out.host_peak_bytes, nodeHostBytes(mem, host));
    out.allocated_peak_bytes = std::max(out.allocated_peak_bytes, mem.allocated_bytes);
    out.reserved_peak_bytes = std::max(out.reserved_peak_bytes, mem.reserved_bytes);
    if (mem.peak_bytes > out.peak_bytes) {
      out.peak_bytes = mem.peak_bytes;
      out.peak_stage = mem.stage;
    }
    out.stages.push_back(mem);
  }
  return out;
}

MemoryPeak estimateMemoryPeak(const ModelConfig& model, const Strategy& strategy,
                              int64_t capacity_bytes, const std::vector<DeviceChunkSums>& devices,
                              double headroom, const HostCapacity& host,
                              const MemoryOverheads& overheads, int64_t bound_from) {
  const StrategyTerms terms = checkedStrategyTerms(model, strategy, devices, headroom, overheads);
  const int P = strategy.pp;
  MemoryPeak out;
  const int64_t usable = usableBytes(capacity_bytes, headroom);
  if (bound_from < std::numeric_limits<int64_t>::max()) {
    // Most of a wide search's candidates are clearly out of memory (the model states and held
    // activations alone exceed the device): their bound decides it.
    for (int device = 0; device < P; ++device) {
      const int64_t bound = stagePeakLowerBound(terms, devices[device]);
      if (bound > out.peak_bytes) {
        out.peak_bytes = bound;
        out.peak_stage = device;
      }
    }
    if (out.peak_bytes > usable && out.peak_bytes >= bound_from) {
      out.exact = false;
      return out;
    }
    out = MemoryPeak{};
  }
  int64_t host_peak_bytes = 0;
  for (int device = 0; device < P; ++device) {
    const StageMemory mem = stageMemory(model, strategy, terms, devices[device], device,
                                        capacity_bytes, /*full=*/false);
    host_peak_bytes = std::max(host_peak_bytes, nodeHostBytes(mem, host));
    if (mem.peak_bytes > out.peak_bytes) {
      out.peak_bytes = mem.peak_bytes;
      out.peak_stage = mem.stage;
    }
  }
  // As MemoryEstimate::fits().
  out.fits = out.peak_bytes <= usable &&
             host_peak_bytes <= usableBytes(host.bytes_per_node, headroom);
  return out;
}

}  // namespace evsim

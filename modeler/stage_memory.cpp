#include "modeler/stage_memory.h"

#include <algorithm>

#include "common/checked.h"
#include "common/error.h"
#include "plan/optimizer_step.h"

namespace evsim {

namespace {

StrategyTerms strategyTerms(const ModelConfig& model, const Strategy& strategy,
                            const MemoryOverheads& overheads) {
  StrategyTerms t;
  t.zero = strategy.gradGroupSize() > 1 ? strategy.zero_stage : 0;
  t.offload_optimizer = offloadsOptimizer(strategy.offload);
  t.offload_activations = offloadsActivations(strategy.offload);
  t.dense_state = stateBytesPerParameter(strategy.framework, model.dtype, t.zero,
                                         strategy.gradGroupSize(), t.offload_optimizer);
  t.expert_state = stateBytesPerParameter(strategy.framework, model.dtype, t.zero,
                                          strategy.expertGradGroupSize(), t.offload_optimizer);
  // ZeRO-2 keeps its partition in the model dtype whatever the wire (stateBytesPerParameter).
  if (t.zero != 2 &&
      dataParallelGradDtype(strategy.framework, model.dtype, strategy.grad_reduce_in_bf16) !=
          dataParallelGradDtype(strategy.framework, model.dtype, false)) {
    // --grad-reduce-in-bf16: Megatron-core's gradient buffer takes the parameters' dtype when
    // grad_reduce_in_fp32 is off (2 bytes, not the fp32 main gradient's 4); the distributed
    // optimizer casts its own shard to fp32 at the step (megatronGradientCopyBytes).
    t.dense_state.gradients /= 2;
    t.expert_state.gradients /= 2;
    t.bf16_main_grad = true;
  }
  t.dense_host = t.offload_optimizer ? hostStateBytesPerParameter(model.dtype, t.zero,
                                                                  strategy.gradGroupSize())
                                     : 0;
  t.expert_host = t.offload_optimizer ? hostStateBytesPerParameter(
                                            model.dtype, t.zero, strategy.expertGradGroupSize())
                                      : 0;
  // The same for every stage: one layer's SP/CP buffers, the pipeline's, the workspace, overhead.
  t.tp_cp_buffer = tensorContextBufferBytes(model, strategy);
  t.sp_grad_input = sequenceParallelGradInputBytes(model, strategy);
  t.pp_buffer = pipelineBufferBytes(model, strategy);
  constexpr double kBytesPerMiB = 1024.0 * 1024.0;
  t.workspace = clampedRound(overheads.cublas_workspace_mib.value * kBytesPerMiB);
  t.communicators = communicatorCount(strategy);
  t.userbuffers = userBufferBytes(model, strategy);
  t.overhead = saturatingAdd(clampedRound((overheads.cuda_context_mib.value +
                                           t.communicators *
                                               overheads.nccl_mib_per_communicator.value) *
                                          kBytesPerMiB),
                             t.userbuffers);
  t.fragmentation = overheads.allocator_fragmentation.value;
  t.fsdp = strategy.framework == Framework::kFsdp;
  return t;
}

// FSDP under PP: the held activations at the moment they peak together with the chunks' fp32
// accumulated gradients (accumulated_gradients.h), which count among the DP buffers.
bool accumulatesGradients(const StrategyTerms& t, const DeviceChunkSums& sums) {
  return t.fsdp && t.zero == 3 && sums.has_accumulation;
}

// The model states' bytes on the device (weights, gradients, optimizer state).
int64_t modelStateBytes(const StrategyTerms& t, const DeviceChunkSums& sums) {
  const double dense_parameters =
      static_cast<double>(sums.facts.parameters - sums.expert_parameters);
  const double experts = static_cast<double>(sums.expert_parameters);
  return clampedRound(dense_parameters * t.dense_state.total() + experts * t.expert_state.total());
}

// The activations held on the device at the backward's moment: the schedule's peak (with FSDP's
// accumulated gradients, at their joint moment), or with activation offload two of the largest
// layer's (the one computed, the one copied).
int64_t heldActivationBytes(const StrategyTerms& t, const DeviceChunkSums& sums) {
  if (t.offload_activations) {
    return saturatingAdd(sums.largest_layer_bytes, sums.largest_layer_bytes);
  }
  return accumulatesGradients(t, sums) ? sums.accumulation.activation_bytes : sums.peak.bytes;
}

}  // namespace

int64_t stagePeakLowerBound(const StrategyTerms& t, const DeviceChunkSums& sums) {
  return saturatingAdd(saturatingAdd(modelStateBytes(t, sums), heldActivationBytes(t, sums)),
                       saturatingAdd(t.workspace, t.overhead));
}

StageMemory stageMemory(const ModelConfig& model, const Strategy& strategy, const StrategyTerms& t,
                        const DeviceChunkSums& sums, int device, int64_t capacity_bytes,
                        bool full) {
  const StageLayerFacts& facts = sums.facts;
  StageMemory mem;
  mem.stage = device;
  mem.parameters = facts.parameters;
  mem.activation_bytes_per_micro_batch = sums.activation_bytes_per_micro_batch;
  const double dense_parameters = static_cast<double>(mem.parameters - sums.expert_parameters);
  const double experts = static_cast<double>(sums.expert_parameters);
  if (full) {
    mem.weight_bytes =
        clampedRound(dense_parameters * t.dense_state.weights + experts * t.expert_state.weights);
    mem.gradient_bytes = clampedRound(dense_parameters * t.dense_state.gradients +
                                      experts * t.expert_state.gradients);
    mem.optimizer_bytes = clampedRound(dense_parameters * t.dense_state.optimizer +
                                       experts * t.expert_state.optimizer);
  }
  mem.model_state_bytes = modelStateBytes(t, sums);
  mem.host_state_bytes = clampedRound(dense_parameters * t.dense_host + experts * t.expert_host);
  const ActivationPeak& peak = sums.peak;
  const bool accumulates = accumulatesGradients(t, sums);
  mem.in_flight = accumulates ? sums.accumulation.in_flight : peak.in_flight;
  mem.activation_bytes = heldActivationBytes(t, sums);
  if (t.offload_activations) mem.host_activation_bytes = peak.bytes;
  // Transients and buffers (memory_components.h).
  mem.recompute_bytes = facts.recompute_transient_bytes;
  mem.loss_bytes = lossTransientBytes(model, strategy, facts.has_head);
  mem.embedding_gradient_bytes = embeddingGradientBytes(model, strategy, facts.has_embedding);
  mem.tp_cp_buffer_bytes = t.tp_cp_buffer;
  mem.moe_dispatch_bytes = moeDispatchBytes(model, strategy, facts.has_moe);
  const int64_t comm = std::max(mem.tp_cp_buffer_bytes, mem.moe_dispatch_bytes);
  const int64_t head_or_embedding = std::max(mem.loss_bytes, mem.embedding_gradient_bytes);
  // The rank's optimizer shard of the device's parameters (ZeRO >= 1; all of them otherwise).
  const double dense_shard = t.zero >= 1 ? strategy.gradGroupSize() : 1;
  const double expert_shard = t.zero >= 1 ? strategy.expertGradGroupSize() : 1;
  const double shard_parameters = dense_parameters / dense_shard + experts / expert_shard;
  // ZeRO-2: a later micro-batch's fresh gradient partition beside the IPG buffers.
  const int64_t dp_at_block = saturatingAdd(
      dataParallelBufferBytes(model, strategy, t.zero, facts),
      zero2LaterBackwardPartitionBytes(model, strategy, t.zero, shard_parameters,
                                       sums.micro_batches));
  bool gather_in_flight = false;
  if (t.fsdp) {
    // A block's gathers (DTensor's SP all-gathers, CP's K/V) are allocations of that block's
    // forward or backward, freed with it: they come with its recompute, never with the loss.
    // Without PP the DP buffers differ by moment too (the root group's and the blocks' gathers,
    // memory_components.h): the larger moment is the peak.
    const int64_t block = saturatingAdd(saturatingAdd(mem.recompute_bytes, comm), dp_at_block);
    const int64_t dp_at_loss = fsdpLossBufferBytes(model, strategy, t.zero, facts);
    const bool block_peak = block >= saturatingAdd(head_or_embedding, dp_at_loss);
    mem.activation_transient_bytes = block_peak ? mem.recompute_bytes : head_or_embedding;
    mem.comm_transient_bytes = block_peak ? comm : 0;
    mem.dp_buffer_bytes = block_peak ? dp_at_block : dp_at_loss;
    gather_in_flight = block_peak && strategy.pp == 1 && strategy.reshardsAfterForward();
  } else {
    // Megatron gathers SP inputs into a global buffer kept for the step: beside the loss too.
    mem.activation_transient_bytes = std::max(mem.recompute_bytes, head_or_embedding);
    mem.comm_transient_bytes = comm;
    mem.dp_buffer_bytes = dp_at_block;
  }
  if (accumulates) {
    mem.dp_buffer_bytes = saturatingAdd(mem.dp_buffer_bytes, sums.accumulation.gradient_bytes);
  }
  mem.pp_buffer_bytes =
      t.fsdp ? torchPipelineBufferBytes(model, strategy,
                                        TorchPipelineDevice{sums.micro_batches, sums.chunks,
                                                            facts.has_embedding, facts.has_head,
                                                            mem.in_flight})
             : t.pp_buffer;
  mem.fp8_bytes = fp8WeightBytes(model, strategy, facts);
  mem.workspace_bytes = t.workspace;
  // --grad-reduce-sync step: the gradient buckets (the one being filled and the queued ones) above
  // the activations' peak, as a timeline walked them (pending_reductions.h), or without one the
  // least first bucket of the device's chunks (memory_model.h's setLeastFirstBuckets), a
  // plateau's. At a bucket's cast the SP input gradient is freed: the larger instant's buckets
  // and communication transient (memory_components.h, bucketMoment).
  if (t.zero == 2 && strategy.reducesAtStep()) {
    const int64_t comm_at_cast =
        std::max(t.tp_cp_buffer - t.sp_grad_input, mem.moe_dispatch_bytes);
    const BucketMoment moment =
        bucketMoment(mem.comm_transient_bytes, comm_at_cast, sums.pending_reductions);
    mem.comm_transient_bytes = moment.comm_transient_bytes;
    mem.pending_reduction_bytes = moment.pending_reduction_bytes;
    mem.peak_at_bucket_cast = moment.at_cast;
  }
  const int64_t dynamic = saturatingAdd(mem.activationPeakBytes(), mem.bufferBytes());
  mem.allocated_bytes = saturatingAdd(mem.model_state_bytes, dynamic);
  // The optimizer step (memory_components.h): the states, foreach's temporary of the largest
  // model part, what pipelining keeps to the next step and the workspace; nothing else held.
  const double part_dense =
      static_cast<double>(sums.step_part_parameters - sums.step_part_expert_parameters);
  const double part_experts = static_cast<double>(sums.step_part_expert_parameters);
  mem.optimizer_step_bytes = optimizerStepTransientBytes(
      strategy, part_dense * t.dense_state.optimizer + part_experts * t.expert_state.optimizer);
  // Megatron's one optimizer steps every chunk of the rank: its shard of the device's parameters;
  // so does DeepSpeed's ZeRO-2, whose fp32 gradients exist only then.
  mem.gradient_copy_bytes =
      saturatingAdd(megatronGradientCopyBytes(strategy, t.bf16_main_grad, shard_parameters),
                    zero2StepGradientBytes(model, strategy, t.zero, shard_parameters));
  mem.output_merge_bytes =
      pipelineOutputMergeBytes(model, strategy, sums.micro_batches, facts.has_head);
  const int64_t step_buffers =
      t.fsdp ? torchPipelineBufferBytes(model, strategy,
                                        TorchPipelineDevice{sums.micro_batches, sums.chunks,
                                                            facts.has_embedding, facts.has_head,
                                                            0})
             : 0;
  // After the backward, two moments with the same buffers: pipelining's output merge (its result
  // dropped before the step) and the optimizer step (its temporary, or Megatron's fp32 copy).
  const int64_t step_transient =
      std::max(saturatingAdd(mem.optimizer_step_bytes, mem.gradient_copy_bytes),
               mem.output_merge_bytes);
  const int64_t step_dynamic =
      saturatingAdd(saturatingAdd(step_transient, step_buffers), t.workspace);
  mem.step_allocated_bytes = saturatingAdd(mem.model_state_bytes, step_dynamic);
  mem.peak_at_optimizer_step = mem.step_allocated_bytes > mem.allocated_bytes;
  mem.allocated_bytes = std::max(mem.allocated_bytes, mem.step_allocated_bytes);
  mem.communicators = t.communicators;
  mem.overhead_bytes = t.overhead;
  mem.userbuffer_bytes = t.userbuffers;
  mem.peak_bytes = saturatingAdd(mem.allocated_bytes, mem.overhead_bytes);
  if (!full) return mem;
  mem.stream_pool_bytes =
      allGatherStreamPoolBytes(model, strategy, t.zero, facts, gather_in_flight);
  // Reserved: the larger moment's, each the states plus (1 + f) x what comes and goes, beside
  // the side stream's idle blocks (cached through the step).
  const int64_t dynamic_reserved = clampedRound(
      static_cast<double>(std::max(dynamic, step_dynamic)) * (1 + t.fragmentation));
  mem.reserved_bytes = saturatingAdd(saturatingAdd(mem.model_state_bytes, dynamic_reserved),
                                     mem.stream_pool_bytes);
  // The allocator cannot reserve more than the device leaves it beside the context and NCCL's
  // buffers: at that point cudaMalloc fails and it frees its cached blocks and retries, so its
  // reserved peak is at most that (and never below what is allocated).
  if (capacity_bytes > 0) {
    const int64_t allocator_limit = std::max<int64_t>(0, capacity_bytes - t.overhead);
    mem.reserved_bytes =
        std::max(mem.allocated_bytes, std::min(mem.reserved_bytes, allocator_limit));
  }
  return mem;
}

StrategyTerms checkedStrategyTerms(const ModelConfig& model, const Strategy& strategy,
                                   const std::vector<DeviceChunkSums>& devices, double headroom,
                                   const MemoryOverheads& overheads) {
  EVSIM_CHECK(headroom >= 0 && headroom < 1, "headroom {}", headroom);
  EVSIM_CHECK(static_cast<int>(devices.size()) == strategy.pp, "{} devices for {} stages",
              devices.size(), strategy.pp);
  return strategyTerms(model, strategy, overheads);
}

int64_t usableBytes(int64_t capacity_bytes, double headroom) {
  return static_cast<int64_t>(std::floor(static_cast<double>(capacity_bytes) * (1 - headroom)));
}

int64_t nodeHostBytes(const StageMemory& mem, const HostCapacity& host) {
  return clampedRound(double(mem.hostBytes()) * double(host.gpus_per_node));
}


}  // namespace evsim

#pragma once
// Where FSDP's accumulated gradients sit against the held activations, along one device's order.
//
// PyTorch FSDP2 under torch.distributed.pipelining (torchtitan) turns gradient sync off until the
// step's last backward (PipelineStage.backward_maybe_with_nosync: set_requires_gradient_sync and
// set_reshard_after_backward False). FSDPParamGroup.post_backward then, per parameter group,
// casts the autograd gradient to the reduce dtype on the chunk's first backward
// (FSDPParam.to_accumulated_grad_if_needed: fp32 with torchtitan's mixed_precision_reduce =
// "float32") and adds later ones into it (accumulate_unsharded_grad_if_needed), so each chunk's
// unsharded fp32 gradients (4 bytes a parameter of the rank's TP shard) exist from the chunk's
// first backward to the step's end, when the pipelining runtime calls every group's post_backward
// and reduce-scatters them. They are absent at any moment before: in 1F1B with m = P the first
// stage holds all P micro-batches before its first backward, and the gradients only after it.
// So the device's peak is the largest, over the moments after each task, of the held
// activations plus the gradients of the chunks whose first backward (first W under a split
// backward, which computes the weight gradients) has run: not the held peak plus all gradients.

#include <cstdint>
#include <memory>
#include <vector>

#include "plan/pipeline_schedule.h"

namespace evsim {

struct AccumulatedGradientPeak {
  int64_t activation_bytes = 0;  // held activations at that moment
  int in_flight = 0;             // micro-batch chunks held then
  int64_t gradient_bytes = 0;    // accumulated gradients allocated then
  int64_t total() const;         // saturating sum of the two byte counts
};

// The walk of a device's order (each task applied in turn, the largest sum after a task kept)
// reduced to the moments whose sum can be the peak for any byte sizes, so that a search costs a
// candidate in a few dot products instead of a walk of every order (the walk per candidate made
// FSDP-with-PP searches 8x slower; tests/modeler/accumulated_gradients_test.cpp keeps it as the
// reference the states are checked against). A state is, per chunk, the micro-batches whose
// activations are held, those whose W inputs are held, and whether its gradients are allocated
// (0/1); the sum is those counts times non-negative sizes, so its largest value is at a state that
// no other state matches or exceeds everywhere. Kept in order of first appearance, each with its
// in_flight. Where a later state covers an earlier one with an equal sum (only possible with
// zero-byte chunks) the later moment is reported, the walk's the earlier: the same bytes.
struct AccumulationStates {
  int chunks = 0;
  std::vector<int> counts;     // per state, 3 x chunks counts
  std::vector<int> in_flight;  // per state
};
AccumulationStates accumulationStates(const std::vector<StageTask>& order, int chunks);
// chunk_bytes / chunk_held_bytes as peakActivations (task_graph.h): an F of chunk c holds
// chunk_bytes[c]; B frees it but keeps chunk_held_bytes[c] until W under a split backward.
// chunk_gradient_bytes[c]: the chunk's accumulated gradients, allocated at its first backward
// (W when split). Returns the first state (in order of appearance) with the largest sum.
AccumulatedGradientPeak peakWithAccumulatedGradients(
    const AccumulationStates& states, const std::vector<int64_t>& chunk_bytes,
    const std::vector<int64_t>& chunk_held_bytes,
    const std::vector<int64_t>& chunk_gradient_bytes);
// Per device, accumulationStates of scheduleOrders(schedule, shape), computed once per (schedule,
// shape) and shared (thread-safe; a schedule file's are not cached).
std::shared_ptr<const std::vector<AccumulationStates>> scheduleAccumulationStates(
    Schedule schedule, const PipelineShape& shape);

}  // namespace evsim

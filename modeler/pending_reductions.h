#pragma once
// --grad-reduce-sync step (ZeRO-2's reductions queued on the DP stream, modeler/timing_engine.h):
// what the queued reductions' gradient buckets add to a device stage's memory peak, read off its
// timeline. Used by the summary (summary_report.cpp); the search's memory check has no timeline
// and counts the least first bucket a device's chunks fill instead (memory_components.h), a lower
// bound of this walk's figure.
//
// A bucket holds its gradients from the moment its first one is written until its reduce-scatter
// ends: while it is being filled in the model dtype (the gradients as autograd makes them), from
// its issue in the reduction's wire dtype (its event's message bytes). When the two differ (bf16
// gradients reduced in fp32, Megatron's default wire) the issue casts the bucket into a new buffer
// and frees the model-dtype one once the copy exists, so both are held at that instant. The
// bucket being filled and the ones queued or in flight are the same buffers at different ages, so
// nothing else counts them (no persistent IPG buffer under step, plan/zero2_buckets.h).
// The first bucket of a gradient task opens at the task's start: DeepSpeed's backward() allocates
// its IPG buffer, torch.empty(reduce_bucket_size), before autograd runs (stage_1_and_2.py), and
// the chunk's saved activations, freed at the task's end, are held anyway. (PyTorch FSDP1 holds
// no such buffer: a unit's gradient grows as autograd makes it; on Meta's 405B plan that and
// FSDP1's other lifetimes move the peak by +0.12 GiB: scripts/fsdp1_meta_whatif.py,
// docs/VALIDATION.md, Session 27, meta29.) A later one opens when the one before
// it closes (DeepSpeed's rule: the gradient that would overflow a bucket closes it and starts the
// next, plan/zero2_buckets.h); the dense and the routed experts' parts of one bucket (issued after
// the same op) open together.
// Sources: PyTorch FSDP (torch/distributed/fsdp/_runtime_utils.py, _post_backward_hook and
// _reduce_grad, PyTorch 2.1-2.5; the FSDP the Llama 3 paper uses, Zhao et al. 2023): with
// MixedPrecision(param_dtype=bf16, reduce_dtype=fp32) the unit's unsharded bf16 gradient is cast
// to fp32 on the post-backward stream, the bf16 one kept (record_stream) at least until that cast
// has run (FSDP1 records the stream when the hook drops it, after queueing the reduce-scatter, so
// in fact until that has run; the walk frees it at the cast, as DeepSpeed's next bucket reuses
// its IPG buffer; the difference is mechanism S of scripts/fsdp1_meta_whatif.py),
// and the fp32 one freed when the reduce-scatter on that stream has finished; the Llama 3 paper
// (Dubey et al. 2024, section 3.3.2): "FP32 gradient accumulation during backward computation over
// multiple micro-batches and also reduce-scatter gradients in FP32 across data parallel workers in
// FSDP" (the fp32 sharded gradient is the ZeRO-2 partition among the model states); DeepSpeed's
// ZeRO-2 (stage_1_and_2.py average_tensor) casts its bucket to communication_data_type the same
// way.
// With a queue bound K (a task that ends with more than K pending waits for the oldest) at most K
// closed buckets are pending while the next task runs, beside the one it fills.
// The issue is a gradient hook's instant, after the op's linear backward has returned: at a cast
// (both copies held) the SP input gradient of that backward is already freed, so the walk keeps
// its cast instants apart from its plateaus (memory_components.h, pendingReductionPeak).

#include <cstdint>
#include <vector>

#include "modeler/memory_components.h"
#include "modeler/simulation.h"
#include "modeler/timing_engine.h"
#include "plan/task_graph.h"

namespace evsim {

// One entry of a chunk's StagePlan::micro_batch_buckets as the memory walk needs it.
struct QueuedBucketBytes {
  int64_t bytes = 0;        // its reduction's message bytes (the wire dtype)
  int ready_after_op = -1;  // the backward op it is issued after (GradBucket::ready_after_op)
  // While it is being filled: its elements in the model dtype (< 0: `bytes`, the same dtype).
  int64_t filling_bytes = -1;
};

// One chunk of the device (its index on the device): the saved bytes of one micro-batch's forward
// and its queued buckets in issue order.
struct ChunkHeldBytes {
  int64_t activation_bytes = 0;
  std::vector<QueuedBucketBytes> buckets;
};

// The held intervals of one device stage of one pipeline class: each micro-batch chunk's saved
// activations from its forward's end to its backward's (B's) end, and each queued reduction's
// bucket from its first gradient (above) to its reduction's end (`stage.grad_sync`): one interval
// where the filling and the wire bytes are the same, else the filling part up to the issue
// (freed after the allocations there) and the wire part from it. The
// reductions are matched to the gradient tasks (B, or W with a split backward) in the order the
// timing engine issued them; a mismatch is an invariant failure.
void stageHeldBytes(const TaskGraph& graph, const StageTimeline& stage,
                    const std::vector<ChunkHeldBytes>& chunks, std::vector<HeldBytes>& activations,
                    std::vector<HeldBytes>& pending);

// Per device stage, what its pending reductions add above its held activations' peak, at a
// plateau and at a cast instant (pendingReductionPeak over stageHeldBytes; each the largest over
// the pipeline classes, which differ only in their times). Empty unless the plan runs
// --grad-reduce-sync step.
std::vector<PendingReductionPeak> pendingReductionPeaks(const Simulation& sim);

}  // namespace evsim

#pragma once
// ZeRO-3 / FSDP prefetching inside one task's op list.
//
// The plan core places a sharded layer's parameter all-gather right before the layer's ops and
// its gradient reduce-scatter right after them, on the DP stream. Run that way, every transfer
// blocks the device. No implementation runs it so: FSDP2 issues layer i+1's all-gather on its own
// stream while layer i computes (the host runs ahead of the GPU in forward, an explicit prefetch in
// backward; torch/distributed/fsdp/_fully_shard/_fsdp_state.py), and reduce-scatters layer i's
// gradients on another stream while layer i-1's backward runs; DeepSpeed ZeRO-3 prefetches by
// bucket the same way. This pass reorders the list to that schedule:
//
//   unit = [its all-gathers] [its other ops] [its reduce-scatters]
//   G_0 | S_{-1} G_1 ops_0 | S_0 G_2 ops_1 | ... | S_{n-2} ops_{n-1} | S_{n-1}
//
// unit i+1's gathers and unit i-1's scatters run beside unit i's ops (OpInstance::overlap_ops),
// one DP-stream op at a time (op_offsets.h), and unit i+1's ops wait for its gathers. The task's
// first gathers and last scatters stay exposed. Ops that already ran beside others (a CP exchange,
// an activation offload or prefetch) keep running beside the same ops: their spans are remapped to
// the op that released them before. A list without DP-stream gathers or scatters is unchanged.

#include <vector>

#include "events/event_table.h"
#include "ops/op_list.h"
#include "plan/iteration_plan.h"

namespace evsim {

void prefetchShardedTransfers(OpList& ops, const EventTable& table);

// The plan core numbers events in first-use order (plan_core.h), which profiles and event files
// keep; a prefetched gather is used before the ops of the part it was interned after. This puts
// `table` back in that order: within each chunk's range [stage_events_end[k-1],
// stage_events_end[k]) the events its forward then backward lists use first (device ops, then
// host copies, as the lists are read), any the lists do not use after them in their old order;
// the ops' indices are remapped. Ranges, and hence stage_events_end, do not change.
void renumberInFirstUseOrder(EventTable& table, std::vector<StagePlan>& stages,
                             const std::vector<int>& stage_events_end);

}  // namespace evsim

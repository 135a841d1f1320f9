#pragma once
// Volume factors of collectives, nccl-tests conventions (doc/PERFORMANCE.md), from the collective
// table (events/collective.h), for the profiler (algbw/busbw of measurements, scaling past the
// measured group) and the cost model:
//   busbw = algbw * factor(n): allreduce 2(n-1)/n; reduce_scatter, allgather, alltoall (n-1)/n;
//   broadcast and p2p 1. `bytes` is an event's message_bytes (the full buffer where sharded).
// Ring scaling: a ring collective over n ranks moves factor(n) * bytes over each rank's link, so
// time(N) = time(n) * ((N-1)/N) / ((n-1)/n) for all-reduce, reduce-scatter and all-gather
// (all-reduce's 2 cancels). All-to-all and broadcast are not ring-scaled.

#include "events/event.h"

namespace evsim {

// nccl-tests bus-bandwidth factor of `kind` over `group_size` ranks (1 for p2p and compute).
double busBandwidthFactor(EventKind kind, int group_size);

// time(target) / time(measured) for a ring collective; 1 for p2p and for an unscaled group.
// Requires 2 <= measured <= target, and measured == target for collectives that are not rings.
double ringScaleFactor(EventKind kind, int measured_group_size, int target_group_size);

}  // namespace evsim

#pragma once
// Volume factors of collectives, nccl-tests conventions (doc/PERFORMANCE.md), shared by the
// profiler (algbw/busbw of measurements, scaling past the measured group) and the cost model:
//   busbw = algbw * factor(n): allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, p2p 1.
// `bytes` is an event's message_bytes, which for reduce_scatter and allgather is the full
// (unsharded) buffer — nccl-tests' "size" — so the factors apply unchanged.
// Ring scaling: a ring collective over n ranks moves factor(n) * bytes over each rank's link, so
// time(N) = time(n) * ((N-1)/N) / ((n-1)/n) for all three collectives (all-reduce's 2 cancels).

#include "events/event.h"

namespace evsim {

// nccl-tests bus-bandwidth factor of `kind` over `group_size` ranks (1 for p2p and compute).
double busBandwidthFactor(EventKind kind, int group_size);

// time(target) / time(measured) for a ring collective; 1 for p2p. Requires 2 <= measured <= target.
double ringScaleFactor(EventKind kind, int measured_group_size, int target_group_size);

}  // namespace evsim

// All-reduce (ring): reduce-scatter then all-gather, 2(n-1) steps, each rank's link carries
// 2(n-1)/n of the buffer. Every rank sends and receives the whole buffer.
#include "events/collectives/registry.h"

namespace evsim::collectives {

const Collective kAllReduce{
    EventKind::kAllReduce,
    "allreduce",
    "all_reduce_perf",
    [](int n) { return 2.0 * ringShare(n); },
    [](int n) { return 2.0 * (n - 1); },
    /*ring_scalable=*/true,
    [](int64_t elements, int) { return CollectiveBuffers{elements, elements}; },
};

}  // namespace evsim::collectives

// Broadcast from rank 0 (pipelined ring): the whole buffer crosses each link once, nccl-tests'
// bus-bandwidth factor 1; n-1 steps to fill the pipeline. Every rank holds the whole buffer.
#include "events/collectives/registry.h"

namespace evsim::collectives {

const Collective kBroadcast{
    EventKind::kBroadcast,
    "broadcast",
    "broadcast_perf",
    [](int) { return 1.0; },
    [](int n) { return double(n - 1); },
    /*ring_scalable=*/false,
    [](int64_t elements, int) { return CollectiveBuffers{elements, elements}; },
};

}  // namespace evsim::collectives

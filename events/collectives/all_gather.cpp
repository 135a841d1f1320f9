// All-gather (ring): n-1 steps, each rank's link carries (n-1)/n of the full buffer; each rank
// sends its n-th and receives the full buffer.
#include "events/collectives/registry.h"

namespace evsim::collectives {

const Collective kAllGather{
    EventKind::kAllGather,
    "allgather",
    "all_gather_perf",
    [](int n) { return ringShare(n); },
    [](int n) { return double(n - 1); },
    /*ring_scalable=*/true,
    [](int64_t elements, int n) {
      const int64_t shard = elements / n;
      return CollectiveBuffers{shard, shard * n};
    },
};

}  // namespace evsim::collectives

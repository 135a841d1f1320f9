// Reduce-scatter (ring): n-1 steps, each rank's link carries (n-1)/n of the full buffer; each rank
// sends the full buffer and keeps its reduced n-th.
#include "events/collectives/registry.h"

namespace evsim::collectives {

const Collective kReduceScatter{
    EventKind::kReduceScatter,
    "reduce_scatter",
    "reduce_scatter_perf",
    [](int n) { return ringShare(n); },
    [](int n) { return double(n - 1); },
    /*ring_scalable=*/true,
    [](int64_t elements, int n) {
      const int64_t shard = elements / n;
      return CollectiveBuffers{shard * n, shard};
    },
};

}  // namespace evsim::collectives

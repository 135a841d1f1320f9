// All-to-all (MoE token dispatch and combine): every rank sends a different n-th of its buffer to
// each peer (pairwise exchange, n-1 steps); each rank's link carries (n-1)/n of the full buffer,
// nccl-tests' alltoall bus-bandwidth factor. Not ring-scaled: the pairwise traffic does not grow
// like a ring's, and across nodes it meets the network's bisection instead.
#include "events/collectives/registry.h"

namespace evsim::collectives {

const Collective kAllToAll{
    EventKind::kAllToAll,
    "alltoall",
    "alltoall_perf",
    [](int n) { return ringShare(n); },
    [](int n) { return double(n - 1); },
    /*ring_scalable=*/false,
    [](int64_t elements, int n) {
      const int64_t per_peer = elements / n;
      return CollectiveBuffers{per_peer * n, per_peer * n};
    },
};

}  // namespace evsim::collectives

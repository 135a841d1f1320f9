// Point-to-point send/receive between two ranks (pipeline activations and gradients): the whole
// buffer crosses the link once, one step. Not a group operation: nothing to scale.
#include "events/collectives/registry.h"

namespace evsim::collectives {

const Collective kSendRecv{
    EventKind::kP2P,
    "p2p",
    "sendrecv_perf",
    [](int) { return 1.0; },
    [](int) { return 1.0; },
    /*ring_scalable=*/false,
    [](int64_t elements, int) { return CollectiveBuffers{elements, elements}; },
};

}  // namespace evsim::collectives

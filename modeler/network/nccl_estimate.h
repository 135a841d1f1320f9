#pragma once
// NCCL's own estimate of a collective, the model its tuner chooses by (src/graph/tuning.cc,
// ncclTopoTuneModel and ncclTopoGetAlgoTime, of the release the cluster names: nccl.version,
// 2.23 - 2.27). eventsim chooses the algorithm and protocol with it, exactly as NCCL does, and then
// costs the chosen pair with the fitted physics (algorithm.h): NCCL's tables decide *which* pair
// runs, the two-node fit decides *how long* it takes. (Choosing by the fitted physics instead
// picked pairs NCCL does not: LL128 up to 512 MiB on ndv4, where NCCL's own table, which counts
// only 2(nodes-1) network steps for a ring, moves to the ring and to Simple far earlier.)
//
// What NCCL's tables need and eventsim infers from the cluster:
//   - the graph: NCCL's topology search finds channels of at most ~25 GB/s each (HDR's speed; a
//     faster graph is split by its channel duplication), together carrying the group's slowest
//     hop: the NVLink inside one node, across nodes min(NVLink, the group's NIC share before any
//     oversubscription, which NCCL does not see). C = ceil(T / 25) channels of T / C GB/s.
//     (ndv4 across nodes: 8 x 25 GB/s, as NCCL's log shows for 8 HDR NICs.)
//   - the GPU row (nccl.gpu_arch), the CPU row (nccl.cpu_vendor: LL's cap across nodes, the per-
//     step network overhead), NVLink or PCIe inside the node (nvswitch), LL128 only over NVLink.
//   - the tree is NCCL's balanced (multi-NIC) pattern; the network adds no latency of its own
//     (graph latencyInter 0, as for InfiniBand); one collective per launch (numPipeOps 1).
// Units as NCCL's: latency in µs, bandwidth in GB/s of nccl-tests' size, time = lat + bytes / bw.

#include <cstdint>
#include <optional>
#include <string_view>

#include "events/event.h"
#include "modeler/network/algorithm.h"
#include "modeler/network/fabric.h"

namespace evsim {

// NCCL's estimate for `algorithm` (a name of algorithm.h's files) and `protocol`, or nullopt where
// NCCL would not run it (its bandwidth 0: not this collective, protocol off, hardware missing).
std::optional<AlgorithmCost> ncclEstimate(std::string_view algorithm, EventKind kind,
                                          const GroupOnFabric& group, NcclProtocol protocol,
                                          int64_t bytes);

// NCCL's treeCorrectionFactor for an all-reduce tree of `bytes` (tuning.cc, 2.23 - 2.27: its
// measured share of a tree's bandwidth by size, below 256 MiB; 1 above).
double ncclTreeCorrection(NcclProtocol protocol, int64_t bytes);

// NCCL's per-step latency of a tree's intra-node hop over its ring's, by protocol (tuning.cc
// hwLat, NVLink row with an NVSwitch, else PCI: LL 0.6/0.6, LL128 1.25/1.9, Simple 4.0/3.4 over
// NVLink). A cluster's fitted intra-node step is the ring's; the tree's chain step is that times
// this ratio, as NCCL's own constants relate them.
double ncclTreeIntraStepRatio(const GroupOnFabric& group, NcclProtocol protocol);

// The channels NCCL's graph gets for the group, and each one's bandwidth (GB/s); exposed for tests.
struct NcclGraph {
  int channels = 1;
  double channel_gb_s = 0;
};
NcclGraph ncclGraphOf(const GroupOnFabric& group);

}  // namespace evsim

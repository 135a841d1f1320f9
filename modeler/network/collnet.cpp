// CollNet (SHARP in the fabric, all-reduce across nodes, Simple): each node reduces inside itself
// over a chain, the switches reduce across nodes, so each node's NICs send and receive the buffer
// once: algbw = the NIC share (twice a tree's past 2 nodes), times NCCL's 0.9 for CollNet.
// Latency: the chain's 2 (ranks_per_node - 1) intra-node steps and one network step up and one
// down.
// Only where the cluster says `sharp: true`.
#include <algorithm>

#include "modeler/network/algorithm.h"

namespace evsim::algorithms {

namespace {

constexpr double kCollNetBandwidthShare = 0.9;  // NCCL's tuner

std::optional<AlgorithmCost> collNetCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                         int64_t) {
  if (kind != EventKind::kAllReduce || !g.sharp || g.nodes < 2 || p != NcclProtocol::kSimple ||
      !protocolEnabled(g, p)) {
    return std::nullopt;
  }
  const double inside = g.intra_bw_gb_s * g.tuning->intra.efficiencyOf("collnet");
  const double across = g.net_bw_gb_s * g.tuning->net.efficiencyOf("collnet");
  return AlgorithmCost{2 * (g.ranks_per_node - 1) * stepUs(g, "collnet", p, false) +
                           2 * stepUs(g, "collnet", p, true),
                       std::min(inside, across) * kCollNetBandwidthShare};
}

}  // namespace

const NcclAlgorithm kCollNet{"collnet", collNetCost};

}  // namespace evsim::algorithms

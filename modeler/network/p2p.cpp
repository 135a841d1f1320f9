// Point-to-point: send/recv and all-to-all, which NCCL runs as grouped sends and receives (no
// tuner choice; Simple). Send/recv: one step, the bytes over the hop. All-to-all over n ranks,
// ranks_per_node r per node: each rank sends bytes/n to every peer at once, (r-1)/n of the buffer
// over its NVLink and (n-r)/n over its share of the NICs (the group's share / r), so
//   time = step + max((r-1)/n * bytes / intra, (n-r)/n * bytes / (net / r)).
// As nodes grow (n-r)/n -> 1: the bus bandwidth falls towards one GPU's NIC share.
#include <algorithm>

#include "modeler/network/algorithm.h"

namespace evsim::algorithms {

namespace {

std::optional<AlgorithmCost> p2pCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                     int64_t) {
  if ((kind != EventKind::kP2P && kind != EventKind::kAllToAll) || p != NcclProtocol::kSimple) {
    return std::nullopt;
  }
  const bool network = g.nodes > 1;
  const double intra = g.intra_bw_gb_s * g.tuning->intra.efficiencyOf("p2p");
  const double net_per_rank =
      g.net_bw_gb_s * g.tuning->net.efficiencyOf("p2p") / std::max(1, g.ranks_per_node);
  AlgorithmCost cost;
  cost.latency_us = stepUs(g, "p2p", p, network);
  if (kind == EventKind::kP2P) {
    cost.algbw_gb_s = network ? std::min(intra, net_per_rank) : intra;
    return cost;
  }
  const double n = g.ranks, r = std::min(g.ranks_per_node, g.ranks);
  // Seconds-per-GB of each path; the slower one decides (they run at once).
  const double intra_share = (r - 1) / n / intra;
  const double net_share = network ? (n - r) / n / net_per_rank : 0.0;
  const double slowest = std::max(intra_share, net_share);
  if (slowest <= 0) return std::nullopt;  // a group of one
  cost.algbw_gb_s = 1.0 / slowest;
  return cost;
}

}  // namespace

const NcclAlgorithm kP2p{"p2p", p2pCost};

}  // namespace evsim::algorithms

// PAT (Parallel Aggregated Trees: all-gather and reduce-scatter with one rank per node, Simple):
// log2(n) network steps instead of the ring's n-1, the same bytes over each rank's NIC share as a
// ring (busbw = the hop bandwidth). NCCL's base latency for PAT is the ring's Simple one.
#include "events/comm_factors.h"
#include "modeler/network/algorithm.h"

namespace evsim::algorithms {

namespace {

constexpr double kBaseUs = 8.4;

std::optional<AlgorithmCost> patCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                     int64_t) {
  if ((kind != EventKind::kAllGather && kind != EventKind::kReduceScatter) ||
      p != NcclProtocol::kSimple || !protocolEnabled(g, p) || g.ranks_per_node != 1 ||
      g.nodes < 2) {
    return std::nullopt;
  }
  const double busbw = hopBandwidthGBs(g, "pat");
  return AlgorithmCost{kBaseUs + log2Ceil(g.ranks) * stepUs(g, "pat", p, true),
                       busbw / busBandwidthFactor(kind, g.ranks)};
}

}  // namespace

const NcclAlgorithm kPat{"pat", patCost};

}  // namespace evsim::algorithms

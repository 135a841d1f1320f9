// NVLS (NVLink SHARP, all-reduce, Simple): the NVSwitch reduces, so each GPU sends and receives
// the buffer once over its NVLink: algbw = the link (where a ring moves 2(n-1)/n of it).
// Inside one node: NVLS; across nodes: NVLS-tree, the switch reducing inside each node (each GPU
// then owns 1/8 of the node's sum and sends it over its own NICs) and a tree over the nodes:
// each node's NICs carry the buffer twice (up and down), once between just two nodes.
// Latency: NCCL's NVLS hardware latency (25 us on NVLink) plus, for the tree, 2 log2(nodes)
// network steps.
#include "modeler/network/algorithm.h"

namespace evsim::algorithms {

namespace {

constexpr double kNvlsUs = 25.0;  // NCCL hwLat, NVLink row, NVLS / NVLSTree (Simple)

bool applies(EventKind kind, const GroupOnFabric& g, NcclProtocol p) {
  return kind == EventKind::kAllReduce && g.nvls && p == NcclProtocol::kSimple &&
         protocolEnabled(g, p) && g.ranks_per_node >= 2;
}

std::optional<AlgorithmCost> nvlsCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                      int64_t) {
  if (!applies(kind, g, p) || g.nodes != 1) return std::nullopt;
  return AlgorithmCost{kNvlsUs, g.intra_bw_gb_s * g.tuning->intra.efficiencyOf("nvls")};
}

std::optional<AlgorithmCost> nvlsTreeCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                          int64_t) {
  if (!applies(kind, g, p) || g.nodes < 2) return std::nullopt;
  const double inside = g.intra_bw_gb_s * g.tuning->intra.efficiencyOf("nvls_tree");
  // Per node the NICs carry the buffer once each way between two nodes (each node is the other's
  // root in one of the two trees), twice with more (up and down through interior nodes).
  const double per_node_passes = g.nodes == 2 ? 1.0 : 2.0;
  const double across = g.net_bw_gb_s * g.tuning->net.efficiencyOf("nvls_tree") / per_node_passes;
  return AlgorithmCost{kNvlsUs + 2 * log2Ceil(g.nodes) * stepUs(g, "nvls_tree", p, true),
                       std::min(inside, across)};
}

}  // namespace

const NcclAlgorithm kNvls{"nvls", nvlsCost};
const NcclAlgorithm kNvlsTree{"nvls_tree", nvlsTreeCost};

}  // namespace evsim::algorithms

// Tree (all-reduce only): NCCL's double binary tree across nodes, a chain inside each node, half
// the buffer on each tree, reduced up and broadcast down. What each link carries:
//   - inside the node every GPU of the chain sends (and receives) the buffer twice, up and down:
//     algbw <= its link / 2 (NCCL's tree busBw x 0.5);
//   - across nodes, on two nodes each node is the root of one tree and the leaf of the other: its
//     NICs carry the buffer once each way (algbw <= the NIC share); on more, every node is an
//     inner node of one tree (two children) and a leaf of the other: twice (the NIC share / 2).
// Times NCCL's 0.92 for the tree's bus bandwidth (tuning.cc, 2.23 - 2.27: `busBw * .92` for a
// tree all-reduce) and the protocol's share. Latency (tuning.cc): base + 2 x ((ranks_per_node - 1)
// intra-node steps + log2(nodes) network steps), so it grows with the log of the node count where
// the ring's grows linearly. The intra-node step is the chain's own, NCCL's tree hwLat, not the
// ring's: the cluster's fitted intra step (the ring's) times NCCL's tree/ring ratio for the
// protocol (nccl_estimate.h: LL 1, LL128 1.25/1.9, Simple 4.0/3.4 over NVLink), unless the
// cluster fits the tree's own (intra.algorithm_latency_us.tree).
// Protocols (NCCL): LL 1/3.8 of the link, LL128 0.915 (7/9 inside one node).
// NCCL's tuner also scales a tree's bandwidth by a correction per size below 256 MiB (its
// treeCorrectionFactor table: a tree's pipeline does not fill at medium sizes); it is NCCL's own
// measured table (the release's, nccl_estimate.h), used here as in the tuner.
#include <algorithm>

#include "modeler/network/algorithm.h"
#include "modeler/network/nccl_estimate.h"

namespace evsim::algorithms {

namespace {

constexpr double kBaseUs[kNcclProtocolCount] = {6.8, 14.0, 8.4};  // NCCL baseLat, Tree
// tuning.cc: busBw * .92 for a tree all-reduce.
constexpr double kTreeBandwidthShare = 0.92;

std::optional<AlgorithmCost> treeCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                      int64_t bytes) {
  if (kind != EventKind::kAllReduce || !protocolEnabled(g, p) || g.ranks < 2) return std::nullopt;
  double fraction = 1.0;
  if (p == NcclProtocol::kLL) fraction = 1.0 / 3.8;
  if (p == NcclProtocol::kLL128) fraction = g.nodes == 1 ? 7.0 / 9 : 0.915;
  double link = g.intra_bw_gb_s * g.tuning->intra.efficiencyOf("tree") / 2;
  if (g.nodes > 1) {
    // The node's NIC share as is: a tree's channels keep their rail under NCCL_CROSS_NIC
    // (ring_channels.h, treeChannels), so a rail-optimised leaf's uplinks are not in its way.
    link = std::min(
        link, g.net_bw_gb_s * g.tuning->net.efficiencyOf("tree") / (g.nodes > 2 ? 2.0 : 1.0));
  }
  const double algbw = link * kTreeBandwidthShare * fraction;
  // An intra-node hop costs what it costs inside one node, whether or not the group spans nodes
  // (NCCL's tuner charged LL's 1.8x across nodes until 2.18, a tuning guess it then dropped; the
  // two-node rows agree: 1 KiB takes 34.7 us, the one-node ring's 14 LL steps plus two network
  // hops, where 1.8x them would be 46 us whatever the network step).
  const bool own_intra_step = g.tuning->intra.algorithm_latency_us.contains("tree");
  const double intra_step =
      stepUs(g, "tree", p, false) * (own_intra_step ? 1.0 : ncclTreeIntraStepRatio(g, p));
  AlgorithmCost cost;
  cost.latency_us =
      kBaseUs[static_cast<int>(p)] +
      2 * ((g.ranks_per_node - 1) * intra_step + log2Ceil(g.nodes) * stepUs(g, "tree", p, true));
  // LL across nodes: each channel's host-memory buffer readied by the proxy in turn (algorithm.h).
  cost.latency_us += llChannelsUs(g, p, bytes, kLLBytesPerChannel);
  cost.algbw_gb_s = algbw * ncclTreeCorrection(p, bytes);
  return cost;
}

}  // namespace

const NcclAlgorithm kTree{"tree", treeCost};

}  // namespace evsim::algorithms

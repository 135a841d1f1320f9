// Tree (all-reduce only): NCCL's double binary tree across nodes, a chain inside each node. Each
// node sends and receives the buffer twice (reduce up, broadcast down), split over two trees:
// algbw = half the hop bandwidth, times NCCL's 0.9 for the tree. Latency: base + 2 x (the chain's
// ranks_per_node - 1 intra-node steps + log2(nodes) network steps), so it grows with the log of
// the node count where the ring's grows linearly.
// Protocols (NCCL): LL 1/3.8 of the link, LL128 0.915 (7/9 inside one node).
// NCCL's tuner also scales a tree's bandwidth by a correction per size below 256 MiB (its
// treeCorrectionFactor table: a tree's pipeline does not fill at medium sizes); it is NCCL's own
// measured table, reproduced so the tuner chooses as NCCL does.
#include "modeler/network/algorithm.h"

namespace evsim::algorithms {

namespace {

constexpr double kBaseUs[kNcclProtocolCount] = {6.8, 14.0, 8.4};  // NCCL baseLat, Tree
constexpr double kTreeBandwidthShare = 0.9;
// NCCL's treeCorrectionFactor[protocol][log2(bytes / 64)], powers of two from 64 B to 128 MiB.
constexpr int kCorrectionSizes = 22;
constexpr double kCorrection[kNcclProtocolCount][kCorrectionSizes] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9}};

double correction(NcclProtocol p, int64_t bytes) {
  int log_size = 0;
  for (int64_t units = bytes >> 6; units > 1; units >>= 1) ++log_size;
  if (log_size >= kCorrectionSizes) return 1.0;
  return kCorrection[static_cast<int>(p)][log_size];
}

std::optional<AlgorithmCost> treeCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                      int64_t bytes) {
  if (kind != EventKind::kAllReduce || !protocolEnabled(g, p) || g.ranks < 2) return std::nullopt;
  double fraction = 1.0;
  if (p == NcclProtocol::kLL) fraction = 1.0 / 3.8;
  if (p == NcclProtocol::kLL128) fraction = g.nodes == 1 ? 7.0 / 9 : 0.915;
  const double busbw = hopBandwidthGBs(g, "tree") * kTreeBandwidthShare * fraction;
  // NCCL charges LL's intra-node steps 1.8x when the group spans nodes.
  const double intra_step =
      stepUs(g, "tree", p, false) * (g.nodes > 1 && p == NcclProtocol::kLL ? 1.8 : 1.0);
  AlgorithmCost cost;
  cost.latency_us =
      kBaseUs[static_cast<int>(p)] +
      2 * ((g.ranks_per_node - 1) * intra_step + log2Ceil(g.nodes) * stepUs(g, "tree", p, true));
  cost.algbw_gb_s = busbw * 0.5 * correction(p, bytes);
  return cost;
}

}  // namespace

const NcclAlgorithm kTree{"tree", treeCost};

}  // namespace evsim::algorithms

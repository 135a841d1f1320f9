// Ring: all-reduce (reduce-scatter then all-gather, 2(n-1) steps), reduce-scatter and all-gather
// (n-1 steps), broadcast (pipelined along the ring, n-1 steps). Every rank's link carries the
// collective's bus factor times the buffer, so algbw = busbw / factor.
// Latency: NCCL's base latency plus steps x the per-step latency. Across nodes every step waits
// for the slowest hop of the ring, a network hop, so all steps take the network's per-step
// latency (NCCL's tuner counts only 2(nodes-1) network steps; nccl-tests at 2 to 32 nodes fall as
// if every step paid it: the 32 MiB all-gather on 256 H100s spends ~10 us in each of 255 steps).
// Protocol bandwidth (NCCL): LL moves 8 B of data per 16 B line, and NCCL counts 1/4 of the link
// across nodes or for all-reduce (1/3 otherwise); LL128 120 of 128 B (0.92; 0.7 with one rank
// per node).
#include "events/collective.h"
#include "events/comm_factors.h"
#include "modeler/network/algorithm.h"

namespace evsim::algorithms {

namespace {

// NCCL's base latencies of the ring, µs (src/graph/tuning.cc baseLat): LL, LL128, Simple.
constexpr double kBaseUs[kNcclProtocolCount] = {6.6, 14.0, 8.4};

std::optional<AlgorithmCost> ringCost(EventKind kind, const GroupOnFabric& g, NcclProtocol p,
                                      int64_t bytes) {
  if (kind != EventKind::kAllReduce && kind != EventKind::kAllGather &&
      kind != EventKind::kReduceScatter && kind != EventKind::kBroadcast) {
    return std::nullopt;
  }
  if (!protocolEnabled(g, p) || g.ranks < 2) return std::nullopt;
  const bool network = g.nodes > 1;
  double fraction = 1.0;
  if (p == NcclProtocol::kLL) {
    fraction = (network || kind == EventKind::kAllReduce) ? 1.0 / 4 : 1.0 / 3;
  } else if (p == NcclProtocol::kLL128) {
    fraction = g.ranks_per_node < 2 ? 0.7 : 0.92;
  }
  // Its channels' NIC share: less where they change rail up a rail-optimised tier (fabric.h).
  const double busbw = hopBandwidthGBs(g, "ring", g.ring_net_bw_gb_s) * fraction;
  const double steps = collectiveOf(kind).latency_steps(g.ranks);
  AlgorithmCost cost;
  cost.latency_us = kBaseUs[static_cast<int>(p)] + steps * stepUs(g, "ring", p, network) +
                    llChannelsUs(g, p, bytes, kLLBytesPerChannel * g.ranks);  // algorithm.h
  cost.algbw_gb_s = busbw / busBandwidthFactor(kind, g.ranks);
  return cost;
}

}  // namespace

const NcclAlgorithm kRing{"ring", ringCost};

}  // namespace evsim::algorithms

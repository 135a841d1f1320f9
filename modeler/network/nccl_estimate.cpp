// NCCL's tuner model, from its tables; nccl_estimate.h states what is inferred and why.
#include "modeler/network/nccl_estimate.h"

#include <algorithm>
#include <cmath>

namespace evsim {

namespace {

constexpr int kLL = static_cast<int>(NcclProtocol::kLL);
constexpr int kLL128 = static_cast<int>(NcclProtocol::kLL128);
constexpr int kSimple = static_cast<int>(NcclProtocol::kSimple);
using ByProtocol = double[kNcclProtocolCount];

// NCCL's algorithms in the tables' terms (CollNet is its Direct variant).
enum Algo { kTree, kRing, kCollNet, kNvls, kNvlsTree, kPat, kAlgoCount };
enum Hw { kNvlink, kPci, kNet };

// tuning.cc, 2.23 - 2.27 (the same in each): baseLat, hwLat [NVLink, PCI, Net] per algorithm.
constexpr ByProtocol kBaseUs[kAlgoCount] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0},
                                            {0, 0, 0},        {0, 0, 0},        {0, 0, 8.0}};
constexpr ByProtocol kHwUs[3][kAlgoCount] = {
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}}};

// Per-GPU-generation caps, columns by node count: 1, 2, more. Rows: Volta, Ampere, Hopper,
// Blackwell (2.25 on; before, Blackwell took Hopper's row).
constexpr double kLlMaxGBs[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kRingLl128PerChGBs[4][3] = {
    {20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {73.4, 73.4, 73.4}};
constexpr double kTreeLl128PerChGBs[4][3] = {
    {20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {73.4, 73.4, 58.0}};
constexpr double kTreePerChGBs[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {77.4, 82.8, 72.0}};
// treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MiB (all-reduce trees).
constexpr int kCorrectionSizes = 23;
constexpr double kTreeCorrection[kNcclProtocolCount][kCorrectionSizes] = {
    {1., 1., 1., 1., .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1., 1., 1., 1.},
    {1., 1., 1., 1., 1., .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1., 1.},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
constexpr double kChannelGBs = 25.0;  // NCCL's fastest single-NIC channel (HDR)

int algoOf(std::string_view name) {
  if (name == "tree") return kTree;
  if (name == "ring") return kRing;
  if (name == "collnet") return kCollNet;
  if (name == "nvls") return kNvls;
  if (name == "nvls_tree") return kNvlsTree;
  if (name == "pat") return kPat;
  return -1;
}

int log2Floor(int64_t v) {  // NCCL's log2i
  int l = 0;
  while (v > 1) {
    v >>= 1;
    ++l;
  }
  return l;
}

// The tables' GPU row for this NCCL release (Blackwell has its own from 2.25).
int gpuRow(const NcclTuning& t) {
  switch (t.gpu_arch) {
    case NcclGpuArch::kVolta:
      return 0;
    case NcclGpuArch::kHopper:
      return 2;
    case NcclGpuArch::kBlackwell:
      return t.version_minor >= 25 ? 3 : 2;
    default:
      return 1;
  }
}

// Which collectives NCCL runs with which algorithm (all-gather and reduce-scatter: ring, PAT, and
// NVLS/CollNet only with a CollNet plugin, which eventsim's physics does not model).
bool runs(int a, EventKind kind) {
  switch (kind) {
    case EventKind::kAllReduce:
      return a != kPat;
    case EventKind::kAllGather:
    case EventKind::kReduceScatter:
      return a == kRing || a == kPat;
    case EventKind::kBroadcast:
      return a == kRing;
    default:
      return false;
  }
}

}  // namespace

double ncclTreeCorrection(NcclProtocol protocol, int64_t bytes) {
  const int log_size = log2Floor(bytes >> 6);
  if ((bytes >> 6) <= 0 || log_size >= kCorrectionSizes) return 1.0;
  return kTreeCorrection[static_cast<int>(protocol)][log_size];
}

double ncclTreeIntraStepRatio(const GroupOnFabric& g, NcclProtocol protocol) {
  const Hw hw = g.nvswitch ? kNvlink : kPci;
  const int p = static_cast<int>(protocol);
  return kHwUs[hw][kTree][p] / kHwUs[hw][kRing][p];
}

NcclGraph ncclGraphOf(const GroupOnFabric& g) {
  double total = g.intra_bw_gb_s;
  if (g.nodes > 1) total = std::min(total, g.net_bw_gb_s * g.oversubscription);
  NcclGraph graph;
  graph.channels = std::max(1, static_cast<int>(std::ceil(total / kChannelGBs - 1e-9)));
  graph.channel_gb_s = total / graph.channels;
  return graph;
}

std::optional<AlgorithmCost> ncclEstimate(std::string_view name, EventKind kind,
                                          const GroupOnFabric& g, NcclProtocol protocol,
                                          int64_t bytes) {
  const int a = algoOf(name);
  const int p = static_cast<int>(protocol);
  const NcclTuning& t = *g.tuning;
  if (a < 0 || g.ranks < 2 || !runs(a, kind) || !algorithms::protocolEnabled(g, protocol)) {
    return std::nullopt;
  }
  const int row = gpuRow(t);
  // LL128 on Blackwell only from 2.25 (before: off, "not tested").
  if (p == kLL128 && t.gpu_arch == NcclGpuArch::kBlackwell && t.version_minor < 25) {
    return std::nullopt;
  }
  const bool simple_only = a == kCollNet || a == kNvls || a == kNvlsTree || a == kPat;
  if (simple_only && p != kSimple) return std::nullopt;
  // Hardware each algorithm needs (NCCL disables the rest).
  if (a == kCollNet && (!g.sharp || !g.nvswitch || g.nodes < 2)) return std::nullopt;
  if (a == kNvls && (!g.nvls || g.nodes != 1)) return std::nullopt;  // across nodes: CollNet's
  if (a == kNvlsTree && (!g.nvls || g.nodes < 2)) return std::nullopt;
  if (a == kPat && (g.ranks_per_node != 1 || g.nodes < 2)) return std::nullopt;

  const int n = g.ranks, nodes = g.nodes;
  const int local = n / nodes;  // NCCL's nRanks / nNodes
  const double ppn = double(n) / nodes;
  const int col = nodes <= 2 ? nodes - 1 : 2;
  const double ll_max = kLlMaxGBs[nodes == 1 ? row : (t.cpu_amd ? 1 : 0)][col];
  const NcclGraph graph = ncclGraphOf(g);
  const double c = graph.channels;
  const int steps = kind == EventKind::kAllReduce ? 2 * (n - 1)
                    : (kind == EventKind::kAllGather || kind == EventKind::kReduceScatter) ? n - 1
                                                                                           : n;

  // Bandwidth (ncclTopoTuneModel).
  double bw = graph.channel_gb_s;
  if (a == kNvlsTree && nodes > 2) {  // the tree's interior nodes send and receive twice
    bw = std::min(g.intra_bw_gb_s, g.net_bw_gb_s * g.oversubscription / 2) / c;
  }
  double bus = c * bw;
  if (a == kRing && p == kLL) bus = std::min(ll_max, bus * .5);
  if (a == kRing && p == kLL128) bus = std::min(bus * .92, c * kRingLl128PerChGBs[row][col]);
  if (a == kTree) bus = std::min(bus * .92, c * kTreePerChGBs[row][col]);
  if (a == kTree && p == kLL) bus = std::min(bus / 3.8, ll_max);
  if (a == kTree && p == kLL128) {
    bus = std::min(bus * (nodes == 1 ? 7.0 / 9 : 120.0 / 128), c * kTreeLl128PerChGBs[row][col]);
  }
  if (a == kPat) bus *= t.version_minor >= 24 ? .75 : .85;
  if (a == kCollNet) {
    double factor = ppn / c;  // GPUs per NIC
    factor -= (factor - 1) / 2;
    bus /= factor;
    if (row >= 2) bus *= .85;
  }
  double algbw = bus;
  if (a == kRing) {
    algbw *= double(n) / steps;
  } else if (a == kNvls || a == kNvlsTree) {
    algbw *= 5.0 / 6;
  } else if (a != kPat) {
    algbw *= .5;
  }

  // Latency.
  const Hw intra_hw = g.nvswitch ? kNvlink : kPci;
  double intra = kHwUs[intra_hw][a][p];
  const double inter = ppn == 1 ? kHwUs[kNet][kTree][p] : kHwUs[kNet][a][p];
  // (No 1.8x on LL's intra-node latency across nodes: NCCL dropped it in 2.18.)
  double lat = kBaseUs[a][p];
  switch (a) {
    case kRing:
      if (kind == EventKind::kBroadcast) {
        // Not the same channels both ways: a chunk's latency per step (Simple: the tree's).
        const Hw hw = nodes == 1 ? intra_hw : kNet;
        lat += steps * (p == kSimple ? kHwUs[hw][kTree][p] : kHwUs[hw][kRing][p]);
      } else {
        double overhead = 0;  // inter-node rings launch every step's network post
        if (nodes > 1) overhead = (t.cpu_amd ? 2.0 : 1.0) * (p == kSimple ? 3 : 1);
        intra = std::max(intra, overhead);
        const int inter_steps =
            nodes == 1 ? 0 : (kind == EventKind::kAllReduce ? 2 * (nodes - 1) : nodes - 1);
        lat += (steps - inter_steps) * intra + inter_steps * inter;
      }
      break;
    case kTree:
      lat += 2 * ((local - 1) * intra + log2Floor(nodes) * inter);
      break;
    case kCollNet:
      lat += 2 * (std::min(1, local - 1) * intra + (local - 1) * 0.4) + inter;
      break;
    case kNvls:
      lat = intra;
      break;
    case kNvlsTree:
      lat += intra + 2 * log2Floor(nodes) * inter;
      break;
    case kPat:
      lat += log2Floor(nodes) * (inter / 3.5) + n * 2.8;
      break;
  }

  // Per size (ncclTopoGetAlgoTime).
  if (a == kTree && kind == EventKind::kAllReduce) algbw *= ncclTreeCorrection(protocol, bytes);
  if (a == kRing && p == kSimple && nodes > 1 && kind == EventKind::kAllReduce &&
      bytes / (graph.channels * int64_t{n}) >= 64) {
    lat *= row == 0 ? 1.9 : 1.4;  // NCCL's "plateau effect of ring"
  }
  if (algbw <= 0) return std::nullopt;
  return AlgorithmCost{lat, algbw};
}

}  // namespace evsim

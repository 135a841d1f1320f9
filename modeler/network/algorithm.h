#pragma once
// One NCCL algorithm, costed as NCCL's tuner does (src/graph/tuning.cc): for a collective over a
// group and a protocol, a latency (a base per algorithm and protocol plus a per-step latency times
// the algorithm's steps) and an algorithm bandwidth, time = latency + bytes / algbw. One file per
// algorithm (ring.cpp, tree.cpp, nvls.cpp, collnet.cpp, pat.cpp, p2p.cpp), listed in
// nccl_tuner.cpp, which takes the cheapest. `bytes` is nccl-tests' size (events/event.h's
// message_bytes); algbw = bytes / time, busbw = algbw * the collective's bus factor.

#include <cstdint>
#include <optional>
#include <string_view>

#include "config/network_topology.h"
#include "events/event.h"
#include "modeler/network/fabric.h"

namespace evsim {

struct AlgorithmCost {
  double latency_us = 0;
  double algbw_gb_s = 0;  // bytes / (time - latency)
  double timeUs(int64_t bytes) const;
};

struct NcclAlgorithm {
  std::string_view name;  // as NCCL_ALGO and the cluster's nccl.algorithm spell it
  // nullopt when NCCL does not run `kind` with this algorithm and protocol on this group.
  std::optional<AlgorithmCost> (*cost)(EventKind kind, const GroupOnFabric& group,
                                       NcclProtocol protocol, int64_t bytes) = nullptr;
};

namespace algorithms {
extern const NcclAlgorithm kRing;
extern const NcclAlgorithm kTree;
extern const NcclAlgorithm kNvls;
extern const NcclAlgorithm kNvlsTree;
extern const NcclAlgorithm kCollNet;
extern const NcclAlgorithm kPat;
extern const NcclAlgorithm kP2p;  // all-to-all and send/recv: not a tuner choice in NCCL

// Shared pieces of the algorithm files.
// The cluster's protocols (NCCL_PROTO); LL128 also needs NVLink inside the node (NCCL enables it
// by default only there).
bool protocolEnabled(const GroupOnFabric& group, NcclProtocol protocol);
// Per-step latency of an algorithm's hop, by protocol (the cluster's per-algorithm figure, else
// the ring's): a network hop or an intra-node one.
double stepUs(const GroupOnFabric& group, std::string_view algorithm, NcclProtocol protocol,
              bool network);
// The link bandwidth an algorithm reaches on the group's slowest hop: the GPU's link inside a
// node, and across nodes also the group's NIC share, each times its fitted efficiency.
// `net_bw_gb_s`: the NIC share to use (a ring's: GroupOnFabric::ring_net_bw_gb_s); default the
// group's net_bw_gb_s.
double hopBandwidthGBs(const GroupOnFabric& group, std::string_view algorithm,
                       double net_bw_gb_s = -1);
// The channels NCCL runs a collective of `bytes` on: one per `bytes_per_channel` (its threads x
// thread threshold: LL 512 x 8 = 4 KiB for the tree, times the ranks for the ring), at least 1,
// at most the communicator's, twice the graph's (enqueue.cc topoGetAlgoInfo; connect.cc).
inline constexpr int64_t kLLBytesPerChannel = 512 * 8;
int llChannels(const GroupOnFabric& group, int64_t bytes, int64_t bytes_per_channel);
// What the channels add to an LL collective across nodes, once per collective: the channels
// times the cluster's `net.ll_channel_us` (config/network_topology.h: LL's network buffers sit in
// host memory and the proxy readies them channel by channel). 0 for other protocols, inside a
// node, or without the term.
double llChannelsUs(const GroupOnFabric& group, NcclProtocol protocol, int64_t bytes,
                    int64_t bytes_per_channel);
int log2Ceil(int n);
}  // namespace algorithms

}  // namespace evsim

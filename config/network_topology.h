#pragma once
// The cluster's network as data: the scale-up domain (NVLink through an NVSwitch, with or without
// NVLink SHARP), the node's NICs and their affinity to GPUs, the fabric tiers above the nodes with
// their oversubscription, in-network reduction (SHARP / CollNet), how a job is placed on nodes,
// and the NCCL terms fitted for this fabric (per-step latency and achieved share of the link per
// protocol). Read from the cluster YAML's optional `topology:` section (config/cluster_config.h);
// a cluster file without one gets a topology derived from its `intra_link` and `network` keys.
//
//   topology:
//     nvswitch: true             # GPUs of a node meet at an NVSwitch (any-to-any at full rate)
//     nvls: true                 # NVLink SHARP: the switch reduces (H100 and later)
//     nics_per_node: 8
//     nic_bandwidth_gb_s: 25     # one direction, each NIC
//     sharp: false               # in-network reduction in the fabric (NCCL's CollNet)
//     nic_affinity: per_gpu      # or pooled (default): GPU g's traffic leaves through its own
//                                # NIC(s) (g's rail), not through any of the node's NICs
//     pci_switch_gpus: 2         # GPUs (with their NICs) under one PCIe switch; default: the
//                                # GPUs of one rail (NCCL_P2P_PXN_LEVEL=1 and rings without PXN
//                                # read it; checked and used only with per_gpu NICs)
//     placement: contiguous      # or scattered: a job's nodes are anywhere in the fabric
//     tiers:                     # bottom up: a group of `nodes` nodes under one switch level,
//       - {name: leaf, nodes: 32, oversubscription: 1,    # and down:up ratio of its uplinks
//          rail_optimized: true}   # bottom tier only: its switch group is one switch per rail
//                                  # (NIC i of every node on rail switch i; needs per_gpu)
//       - {name: pod, nodes: 384, oversubscription: 7}
//     nccl:                      # fitted (scripts/fit_network.py), or NCCL's defaults
//       version: "2.27"          # whose tuner chooses (its tuning.cc constants): 2.23 - 2.27
//       gpu_arch: ampere         # the tuner's GPU row: volta, ampere, hopper, blackwell
//                                # (default: from the device's name; unknown: ampere)
//       cpu_vendor: amd          # the tuner's CPU row (LL's cap, network overhead): intel | amd
//       algorithm: auto          # or ring, tree, nvls, nvls_tree, collnet, pat (as NCCL_ALGO)
//       launch_us: 0             # fixed cost of every collective (launch; fitted), beside the steps
//       protocols: [ll, ll128, simple]   # those NCCL may use (as NCCL_PROTO); default all
//       pxn_disable: 0           # 1: no PXN at all (as NCCL_PXN_DISABLE; default 0)
//       p2p_pxn_level: 2         # when a send/recv uses PXN (as NCCL_P2P_PXN_LEVEL; default 2)
//       cross_nic: 2             # whether a ring/tree channel may leave a node through another
//                                # NIC than it came in by (as NCCL_CROSS_NIC; 0, 1, default 2)
//       source: "..."
//       intra: {latency_us: {ll: 0.6, ll128: 1.25, simple: 4}, efficiency: {ring: 0.8}}
//       net: {latency_us: {ll: 2.7, ll128: 4, simple: 8}, efficiency: {ring: 0.64, tree: 0.64},
//             algorithm_latency_us: {nvls_tree: {simple: 150}},   # where not the ring's
//             ll_channel_us: 2}  # each channel an LL collective across nodes runs on (HopTuning)
//
// Units: bandwidths in GB/s (1e9 B/s) one direction, latencies in µs per algorithm step.

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace evsim {

class YamlReader;

// NCCL's protocols, in NCCL's order.
enum class NcclProtocol { kLL = 0, kLL128 = 1, kSimple = 2 };
inline constexpr int kNcclProtocolCount = 3;
const char* ncclProtocolName(NcclProtocol p);  // "LL", "LL128", "Simple"

struct FabricTier {
  std::string name;
  int nodes = 0;                // nodes under one switch group of this tier
  double oversubscription = 1;  // down:up bandwidth of the group's uplinks (1 = full bisection)
  // The group is one switch per rail (NVIDIA's SuperPOD leaves): NIC i of each of its nodes
  // connects to rail switch i, so traffic between same-rail NICs stays on one switch and
  // cross-rail traffic goes up a tier unless NCCL's PXN first moves it over NVLink to the GPU on
  // the destination's rail. Bottom tier only; needs nic_affinity: per_gpu.
  bool rail_optimized = false;
};

// The fitted (or default) per-step latencies and achieved bandwidth shares of one hop kind.
struct HopTuning {
  std::array<double, kNcclProtocolCount> latency_us{};  // per algorithm step, by protocol
  // An algorithm's own per-step latencies where they differ from the ring's (`latency_us`), as
  // NCCL's hwLat table has a row per algorithm: {"nvls_tree": {.., .., 150}}.
  std::map<std::string, std::array<double, kNcclProtocolCount>, std::less<>> algorithm_latency_us;
  // Achieved share of the link's bandwidth by algorithm name ("ring", "tree", ...); an algorithm
  // not listed uses "ring"'s.
  // (std::less<>: looked up by string_view, without building a string, on the tuner's hot path.)
  std::map<std::string, double, std::less<>> efficiency;
  // Network hops only: what each channel adds to an LL collective across nodes, µs. NCCL keeps
  // LL's network buffers in host memory (never GPUDirect: transport/net.cc), and its one proxy
  // thread polls every line's flags there, channel after channel, before posting the send; and
  // NCCL runs a small collective on fewer channels, one per 4 KiB (tree) or per 4 KiB x ranks
  // (ring) up to twice the graph's (enqueue.cc, topoGetAlgoInfo; connect.cc doubles the graph's
  // channels). So LL's cost across nodes grows with the channel count at small sizes
  // (modeler/network/algorithm.h, llChannels). 0: not modelled.
  double ll_channel_us = 0;
  double efficiencyOf(std::string_view algorithm) const;
  double latencyOf(std::string_view algorithm, NcclProtocol protocol) const;
};

// The GPU row of NCCL's tuner tables (its compute-capability index).
enum class NcclGpuArch { kUnset, kVolta, kAmpere, kHopper, kBlackwell };
// The row for a GPU's product name ("NVIDIA A100-SXM4-40GB" -> ampere); kUnset when it names no
// generation the tables know.
NcclGpuArch ncclGpuArchOfName(std::string_view name);

struct NcclTuning {
  // NCCL's own tuner (modeler/network/nccl_estimate.h) chooses the algorithm and protocol; these
  // pick the rows of its tables. The fitted terms below then cost the chosen pair.
  int version_minor = 27;                        // NCCL 2.<minor>
  NcclGpuArch gpu_arch = NcclGpuArch::kUnset;    // unset: ampere's row
  bool gpu_arch_assumed = false;  // the device's name gave no row: ampere's taken (cluster loader)
  bool cpu_amd = false;                          // NCCL's x86 AMD row (else Intel's)
  // A collective's fixed cost besides its algorithm's steps (the kernel launch and the host's
  // side; nccl-tests' small sizes on one node take ~2x NCCL's ring estimate), µs.
  double launch_us = 0;
  std::string algorithm = "auto";  // forced algorithm, as NCCL_ALGO; "auto": the tuner's choice
  std::string source;              // where the figures came from
  // Protocols NCCL may use (NCCL_PROTO; AWS's EFA plugin runs Simple only), by NcclProtocol.
  std::array<bool, kNcclProtocolCount> protocols{true, true, true};
  // PXN, NCCL's send through a NIC of the node on the receiver's rail (modeler/link_map.h), as
  // NCCL_PXN_DISABLE and NCCL_P2P_PXN_LEVEL set it (src/graph/paths.cc, search.cc
  // ncclTopoGetNetDev): 0, never (every send leaves through its sender's own NIC); 1, only where
  // the sender's path to the receiver's NIC would cross the CPU (the NIC not on its PCIe switch;
  // on its switch the sender uses that NIC directly, without a proxy); 2 (NCCL's default), always
  // when NVLink reaches the GPU beside that NIC, "to maximize aggregation".
  bool pxn_disable = false;
  int p2p_pxn_level = 2;
  int pxnLevel() const { return pxn_disable ? 0 : p2p_pxn_level; }
  // NCCL_CROSS_NIC (src/graph/search.cc: ncclTopoCompute's crossNic, ncclTopoSearchCheckNet,
  // ncclTopoGetNetDev; modeler/network/ring_channels.h, link_map.h p2pNic): 0, a ring or tree
  // channel leaves every node through the NIC it came in by (its rail: traffic between nodes
  // stays on one rail), and a send/recv uses the receiver's-rail NIC even without PXN; 1, a
  // channel may leave through another NIC (the last GPU's own: between nodes it changes rail);
  // 2 (NCCL's default), the same NIC where the search finds such rings at full bandwidth, else
  // another.
  int cross_nic = 2;
  HopTuning intra;  // NVLink / PCIe hops inside a node
  HopTuning net;    // network hops
};

enum class JobPlacement { kContiguous, kScattered };

// How a GPU's traffic reaches the network. kPooled: any of the node's NICs (one resource per
// node; what eventsim did before). kPerGpu: GPU g uses its own NIC group, its "rail": with n NICs
// and G GPUs per node, NICs [g n/G, (g+1) n/G) when n >= G, else NIC g n / G shared by G/n GPUs
// (one of n and G must divide the other).
enum class NicAffinity { kPooled, kPerGpu };

struct NetworkTopology {
  bool nvswitch = false;
  bool nvls = false;
  int nics_per_node = 0;
  double nic_bandwidth_gb_s = 0;
  bool sharp = false;
  JobPlacement placement = JobPlacement::kContiguous;
  NicAffinity nic_affinity = NicAffinity::kPooled;
  // GPUs under one PCIe switch with their NICs (consecutive local indices; a multiple of a rail's
  // GPUs); 0: one rail's GPUs. Only NCCL_P2P_PXN_LEVEL=1 and a ring without PXN tell the two
  // apart (pxnLevel, modeler/network/ring_channels.h). Read only with per-GPU NICs.
  int pci_switch_gpus = 0;
  std::vector<FabricTier> tiers;  // bottom up; empty: one non-blocking switch
  NcclTuning nccl;
  bool derived = false;  // true when built from an old file's intra_link / network keys
  // Transfers that overlap in time share the links they cross (modeler/link_flows.h); off
  // (`--link-sharing off`) gives each its standalone time, for ablations. Not a file key.
  bool link_sharing = true;

  bool perGpuNics() const { return nic_affinity == NicAffinity::kPerGpu; }
  // Whether the bottom tier is rail-optimised.
  bool railOptimized() const { return !tiers.empty() && tiers.front().rail_optimized; }
  // kPerGpu: the rails of a node (NIC groups, min(NICs, GPUs)), the rail of its GPU `local`
  // (0-based on the node) and one rail's bandwidth (GB/s, one direction).
  int rails(int gpus_per_node) const;
  int railOf(int local, int gpus_per_node) const;
  double railBandwidthGbS(int gpus_per_node) const;
  // The rails under one PCIe switch (pci_switch_gpus' NICs), at least 1; and whether local GPUs
  // `a` and `b` (their NICs) sit under the same PCIe switch.
  int pciSwitchRails(int gpus_per_node) const;
  bool samePciSwitch(int a, int b, int gpus_per_node) const;
};

// The algorithms `nccl.algorithm` may force (besides "auto").
const std::vector<std::string>& ncclAlgorithmNames();

// Parses `topology:`; `gpus_per_node` and the legacy links fill what it leaves out.
NetworkTopology readNetworkTopology(const YamlReader& topology, int gpus_per_node,
                                    double intra_latency_us, double network_bandwidth_gb_s,
                                    double network_latency_us);
// The topology of a file without `topology:`: one NIC per GPU sharing the node's network
// bandwidth, no tiers, no NVSwitch features, the links' latencies as every protocol's step.
NetworkTopology derivedNetworkTopology(int gpus_per_node, double intra_latency_us,
                                       double network_bandwidth_gb_s, double network_latency_us);

}  // namespace evsim

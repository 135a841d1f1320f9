// The network model (modeler/network/): NCCL's algorithms costed by hand, the tuner's choice, the
// fabric tiers, and the bundled clusters against the two-node nccl-tests files.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/network/algorithm.h"
#include "modeler/network/nccl_estimate.h"
#include "modeler/network/nccl_tuner.h"

namespace evsim {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// 8 GPUs per node, 300 GB/s NVLink, 8 NICs of 25 GB/s; round per-step latencies by protocol.
std::string clusterYaml(const std::string& extra_topology = "") {
  return R"(
name: net-test
node:
  gpus: 8
  device: {name: T, peak_tflops: {fp16: 100}, memory_bandwidth_gb_s: 1000, memory_gib: 40}
  intra_link: {name: NVSwitch, bandwidth_gb_s: 300, latency_us: 3}
network: {name: 8x HDR, bandwidth_gb_s: 200, latency_us: 5}
topology:
  nvswitch: true
  nics_per_node: 8
  nic_bandwidth_gb_s: 25
)" + extra_topology +
         R"(
  nccl:
    intra: {latency_us: {ll: 1, ll128: 2, simple: 4}, efficiency: {ring: 1}}
    net: {latency_us: {ll: 3, ll128: 5, simple: 10}, efficiency: {ring: 1}}
)";
}

ClusterConfig cluster(const std::string& extra = "") {
  return parseClusterConfig(clusterYaml(extra), "net-test.yaml");
}

GroupOnFabric group(const ClusterConfig& c, int ranks, int nodes) {
  return mapGroup(c, c.topology, Placement{ranks, nodes, ranks / nodes});
}

TEST(Network, RingLatencyGrowsLinearlyWithNodes) {
  ClusterConfig c = cluster();
  // All-reduce ring over 8 GPUs per node: 2(n-1) steps, each at the network's Simple step (10 us)
  // once the ring leaves the node, plus NCCL's ring base 8.4 us.
  for (int nodes : {2, 4, 8, 16}) {
    const int n = 8 * nodes;
    auto cost = algorithms::kRing.cost(EventKind::kAllReduce, group(c, n, nodes),
                                       NcclProtocol::kSimple, kMiB);
    ASSERT_TRUE(cost);
    EXPECT_NEAR(cost->latency_us, 8.4 + 2.0 * (n - 1) * 10, 1e-9) << nodes;
  }
  // Doubling the nodes from 8 to 16 adds 2 * 64 steps = 1280 us: linear in the node count.
  auto at = [&](int nodes) {
    return algorithms::kRing
        .cost(EventKind::kAllReduce, group(c, 8 * nodes, nodes), NcclProtocol::kSimple, kMiB)
        ->latency_us;
  };
  EXPECT_NEAR(at(16) - at(8), 2 * (at(8) - at(4)), 1e-9);
}

TEST(Network, TreeLatencyGrowsWithLog2OfNodes) {
  ClusterConfig c = cluster();
  // 8.4 + 2 * (7 intra steps * 4 us x NCCL's tree/ring NVLink Simple 4.0/3.4 + log2(nodes) *
  // 10 us).
  for (int nodes : {2, 4, 8, 16, 32}) {
    auto cost = algorithms::kTree.cost(EventKind::kAllReduce, group(c, 8 * nodes, nodes),
                                       NcclProtocol::kSimple, kGiB);
    ASSERT_TRUE(cost);
    EXPECT_NEAR(cost->latency_us, 8.4 + 2 * (7 * 4 * 4.0 / 3.4 + std::log2(nodes) * 10), 1e-9)
        << nodes;
  }
  // Tree bandwidth: the node's 200 GB/s * 0.92 / 2 (each node sends and receives twice); 1 GiB is
  // past NCCL's size correction.
  auto cost =
      algorithms::kTree.cost(EventKind::kAllReduce, group(c, 32, 4), NcclProtocol::kSimple, kGiB);
  EXPECT_NEAR(cost->algbw_gb_s, 200 * 0.92 / 2, 1e-9);
}

TEST(Network, TreeChainInsideANodeIsCostedAsNcclsTree) {
  // One node of 8 on 300 GB/s NVLink (efficiency 1), fitted ring steps LL 1, LL128 2, Simple 4 us.
  // NCCL (tuning.cc): tree all-reduce busBw = 0.92 x the chain's bandwidth, algbw = busBw / 2,
  // LL x 1/3.8, LL128 x 7/9 inside one node; latency = baseLat + 2 (ppn - 1) hwLat[NVLink][tree],
  // the tree's hop NCCL's tree/ring ratio of the fitted ring step: LL 0.6/0.6, LL128 1.25/1.9,
  // Simple 4.0/3.4. 1 GiB: past the size correction.
  ClusterConfig c = cluster();
  const GroupOnFabric node = group(c, 8, 1);
  auto at = [&](const GroupOnFabric& g, NcclProtocol p) {
    return *algorithms::kTree.cost(EventKind::kAllReduce, g, p, kGiB);
  };
  // Simple: 8.4 + 14 x 4 x 4.0/3.4 = 8.4 + 65.882353 = 74.282353 us; 300 x 0.92 / 2 = 138 GB/s.
  EXPECT_NEAR(at(node, NcclProtocol::kSimple).latency_us, 74.282353, 1e-6);
  EXPECT_NEAR(at(node, NcclProtocol::kSimple).algbw_gb_s, 138, 1e-9);
  // LL128: 14 + 14 x 2 x 1.25/1.9 = 14 + 18.421053 = 32.421053 us; 138 x 7/9 = 107.333333 GB/s.
  EXPECT_NEAR(at(node, NcclProtocol::kLL128).latency_us, 32.421053, 1e-6);
  EXPECT_NEAR(at(node, NcclProtocol::kLL128).algbw_gb_s, 107.333333, 1e-6);
  // LL: 6.8 + 14 x 1 = 20.8 us; 138 / 3.8 = 36.315789 GB/s.
  EXPECT_NEAR(at(node, NcclProtocol::kLL).latency_us, 20.8, 1e-9);
  EXPECT_NEAR(at(node, NcclProtocol::kLL).algbw_gb_s, 36.315789, 1e-6);
  // Over PCIe (no NVSwitch): NCCL's PCI row, Simple 4.0/5.7: 8.4 + 14 x 4 x 4.0/5.7 = 47.698246.
  GroupOnFabric pci = node;
  pci.nvswitch = false;
  EXPECT_NEAR(at(pci, NcclProtocol::kSimple).latency_us, 47.698246, 1e-6);
  // A cluster that fits the tree's own intra-node step keeps it: 8.4 + 14 x 3 = 50.4 us.
  c.topology.nccl.intra.algorithm_latency_us["tree"] = {0.5, 1.5, 3};
  EXPECT_NEAR(at(group(c, 8, 1), NcclProtocol::kSimple).latency_us, 50.4, 1e-9);
}

TEST(Network, RingBandwidthIsTheSlowestHopOverTheBusFactor) {
  ClusterConfig c = cluster();
  // Across nodes, a full-node group has the node's 200 GB/s (< NVLink 300): all-reduce algbw =
  // 200 / (2 * 15/16); all-gather 200 / (15/16).
  auto ar =
      algorithms::kRing.cost(EventKind::kAllReduce, group(c, 16, 2), NcclProtocol::kSimple, kGiB);
  EXPECT_NEAR(ar->algbw_gb_s, 200 / (2 * 15.0 / 16), 1e-9);
  auto ag =
      algorithms::kRing.cost(EventKind::kAllGather, group(c, 16, 2), NcclProtocol::kSimple, kGiB);
  EXPECT_NEAR(ag->algbw_gb_s, 200 / (15.0 / 16), 1e-9);
  // One rank per node gets 1/8 of the NICs (25 GB/s); LL across nodes moves 1/4 of it.
  auto ll = algorithms::kRing.cost(EventKind::kAllGather, group(c, 4, 4), NcclProtocol::kLL, kMiB);
  EXPECT_NEAR(ll->algbw_gb_s, 25 * 0.25 / 0.75, 1e-9);
  // Inside a node: NVLink, LL 1/4 for all-reduce.
  auto in = algorithms::kRing.cost(EventKind::kAllReduce, group(c, 8, 1), NcclProtocol::kLL, kMiB);
  EXPECT_NEAR(in->algbw_gb_s, 300 * 0.25 / (2 * 7.0 / 8), 1e-9);
  EXPECT_NEAR(in->latency_us, 6.6 + 14 * 1, 1e-9);
}

TEST(Network, TunerTakesTheCheapestAndSwitchesBySize) {
  ClusterConfig c = cluster();
  NcclTuner tuner(c);
  const Placement p{64, 8, 8};
  // 4 KiB over 64 ranks on 8 nodes, NCCL's table: ring LL = 6.6 + 112 x 1.0 + 14 x 2.7 = 156.2
  // us, tree LL = 6.8 + 2 (7 x 0.6 + 3 x 5.0) = 45.2 us, + bytes: the tree (latency log2) wins small.
  CollectiveChoice small = tuner.choose(EventKind::kAllReduce, p, 4096);
  EXPECT_EQ(small.algorithm, "tree");
  EXPECT_EQ(small.protocol, NcclProtocol::kLL);
  // 4 GiB: ring Simple 8.4 + 1260 + 2 * 63/64 * 4 GiB / 200 GB/s = 42.3 ms, tree Simple 4 GiB /
  // 90 GB/s = 47.7 ms: the ring wins large.
  CollectiveChoice large = tuner.choose(EventKind::kAllReduce, p, 4 * kGiB);
  EXPECT_EQ(large.algorithm, "ring");
  EXPECT_EQ(large.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(large.time_us, 8.4 + 126 * 10 + 2 * 63.0 / 64 * 4 * kGiB / 200e3, 1e-6);
}

TEST(Network, ForcedAlgorithmAsNcclAlgo) {
  ClusterConfig c = cluster();
  const Placement p{64, 8, 8};
  NcclTuner ring(c, "ring");
  EXPECT_EQ(ring.choose(EventKind::kAllReduce, p, 4096).algorithm, "ring");
  // Tree runs no all-gather: the tuner falls back to its own choice, as NCCL does.
  NcclTuner tree(c, "tree");
  EXPECT_EQ(tree.choose(EventKind::kAllGather, p, 4096).algorithm, "ring");
  EXPECT_THROW(NcclTuner(c, "butterfly"), InputError);
}

TEST(Network, OversubscribedSpineHalvesACrossPodAllReduce) {
  // Pods of 4 nodes, 2:1 above them. 8 nodes cross the pod uplinks; 4 nodes stay inside.
  ClusterConfig c = cluster("  tiers:\n    - {name: pod, nodes: 4, oversubscription: 2}\n");
  ClusterConfig flat = cluster();
  const Placement across{64, 8, 8};
  const GroupOnFabric g = mapGroup(c, c.topology, across);
  EXPECT_EQ(g.crossed, "pod");
  EXPECT_NEAR(g.net_bw_gb_s, 100, 1e-9);
  EXPECT_NEAR(mapGroup(c, c.topology, Placement{32, 4, 8}).net_bw_gb_s, 200, 1e-9);
  // The bandwidth term of a large all-reduce doubles: busbw halves (up to the latency terms).
  const double t_over = NcclTuner(c, "ring").timeUs(EventKind::kAllReduce, across, 8 * kGiB);
  const double t_flat = NcclTuner(flat, "ring").timeUs(EventKind::kAllReduce, across, 8 * kGiB);
  const double latency = 8.4 + 126 * 10;
  EXPECT_NEAR((t_over - latency) / (t_flat - latency), 2.0, 1e-9);
  // Scattered placement: even 2 nodes may sit in different pods.
  ClusterConfig scattered = cluster(
      "  placement: scattered\n  tiers:\n    - {name: pod, nodes: 4, oversubscription: 2}\n");
  EXPECT_NEAR(mapGroup(scattered, scattered.topology, Placement{16, 2, 8}).net_bw_gb_s, 100, 1e-9);
}

TEST(Network, AllToAllIsBoundByTheNicShareAsNodesGrow) {
  ClusterConfig c = cluster();
  NcclTuner tuner(c);
  // 16 ranks on 2 nodes: each rank sends 8/16 of the buffer over its 25 GB/s NIC share and 7/16
  // over NVLink: time = 10 + 0.5 * bytes / 25e3 us.
  const int64_t bytes = kGiB;
  EXPECT_NEAR(tuner.timeUs(EventKind::kAllToAll, Placement{16, 2, 8}, bytes),
              10 + 0.5 * bytes / 25e3, 1e-6);
  // 256 ranks on 32 nodes: 248/256 over the NIC share.
  EXPECT_NEAR(tuner.timeUs(EventKind::kAllToAll, Placement{256, 32, 8}, bytes),
              10 + 248.0 / 256 * bytes / 25e3, 1e-6);
}

TEST(Network, NvlsAndCollNetOnlyWhereTheHardwareHasThem) {
  ClusterConfig c = cluster();
  const GroupOnFabric g = group(c, 8, 1);
  EXPECT_FALSE(algorithms::kNvls.cost(EventKind::kAllReduce, g, NcclProtocol::kSimple, kGiB));
  EXPECT_FALSE(algorithms::kCollNet.cost(EventKind::kAllReduce, group(c, 16, 2),
                                         NcclProtocol::kSimple, kGiB));
  ClusterConfig h = cluster("  nvls: true\n  sharp: true\n");
  auto nvls =
      algorithms::kNvls.cost(EventKind::kAllReduce, group(h, 8, 1), NcclProtocol::kSimple, kGiB);
  ASSERT_TRUE(nvls);
  EXPECT_NEAR(nvls->algbw_gb_s, 300, 1e-9);  // each GPU sends and receives the buffer once
  auto sharp = algorithms::kCollNet.cost(EventKind::kAllReduce, group(h, 16, 2),
                                         NcclProtocol::kSimple, kGiB);
  ASSERT_TRUE(sharp);
  EXPECT_NEAR(sharp->algbw_gb_s, 200 * 0.9, 1e-9);  // about twice a tree's past 2 (200 / 2 x 0.92)
  // PAT: one rank per node only, log2(n) network steps.
  auto pat =
      algorithms::kPat.cost(EventKind::kAllGather, group(c, 16, 16), NcclProtocol::kSimple, kMiB);
  ASSERT_TRUE(pat);
  EXPECT_NEAR(pat->latency_us, 8.4 + 4 * 10, 1e-9);
  EXPECT_FALSE(
      algorithms::kPat.cost(EventKind::kAllGather, group(c, 32, 4), NcclProtocol::kSimple, kMiB));
}

TEST(Network, ProtocolsAndPerAlgorithmLatenciesFromTheCluster) {
  // As NCCL_PROTO=simple (AWS's EFA plugin): LL and LL128 are never chosen.
  ClusterConfig c = cluster("  nvls: true\n");
  c.topology.nccl.protocols = {false, false, true};
  NcclTuner tuner(c);
  EXPECT_EQ(tuner.choose(EventKind::kAllReduce, Placement{16, 2, 8}, 1024).protocol,
            NcclProtocol::kSimple);
  // NVLS-tree between 2 nodes: each node's NICs carry the buffer once each way (200 GB/s), with
  // its own per-step latency (30 us): 25 + 2 * 1 * 30 us.
  c.topology.nccl.net.algorithm_latency_us["nvls_tree"] = {3, 5, 30};
  auto two = algorithms::kNvlsTree.cost(EventKind::kAllReduce, group(c, 16, 2),
                                        NcclProtocol::kSimple, kGiB);
  ASSERT_TRUE(two);
  EXPECT_NEAR(two->latency_us, 25 + 2 * 30, 1e-9);
  EXPECT_NEAR(two->algbw_gb_s, 200, 1e-9);
  // Four nodes: twice (up and down), 2 log2(4) steps.
  auto four = algorithms::kNvlsTree.cost(EventKind::kAllReduce, group(c, 32, 4),
                                         NcclProtocol::kSimple, kGiB);
  EXPECT_NEAR(four->latency_us, 25 + 4 * 30, 1e-9);
  EXPECT_NEAR(four->algbw_gb_s, 100, 1e-9);
  // The ring keeps the ring's step (10 us).
  EXPECT_NEAR(algorithms::stepUs(group(c, 16, 2), "ring", NcclProtocol::kSimple, true), 10, 0);
}


TEST(Network, LLAcrossNodesPaysPerChannelAsNcclAddsThem) {
  // net.ll_channel_us = 2: an LL collective across nodes adds 2 us per channel NCCL runs it on,
  // one channel per 4 KiB (tree; 4 KiB x ranks for the ring), at most twice the graph's. The
  // graph over 2 nodes of 8: min(300 NVLink, 200 NICs) / 25 GB/s = 8 channels, so up to 16.
  ClusterConfig c = cluster();
  const GroupOnFabric two = group(c, 16, 2);
  EXPECT_EQ(algorithms::llChannels(two, 1024, 4096), 1);
  EXPECT_EQ(algorithms::llChannels(two, 32 * 1024, 4096), 8);
  EXPECT_EQ(algorithms::llChannels(two, 64 * 1024, 4096), 16);
  EXPECT_EQ(algorithms::llChannels(two, kMiB, 4096), 16);
  auto tree_at = [&](const ClusterConfig& cl, int64_t bytes, NcclProtocol p) {
    return algorithms::kTree.cost(EventKind::kAllReduce, group(cl, 16, 2), p, bytes)->latency_us;
  };
  const double plain_1k = tree_at(c, 1024, NcclProtocol::kLL);
  c.topology.nccl.net.ll_channel_us = 2;
  // Tree LL, 2 nodes: 6.8 + 2 (7 x 1 + 1 x 3) = 26.8 us, plus 1 channel at 1 KiB (2 us),
  // 8 at 32 KiB (16 us), 16 from 64 KiB (32 us).
  EXPECT_NEAR(plain_1k, 26.8, 1e-9);
  EXPECT_NEAR(tree_at(c, 1024, NcclProtocol::kLL), 26.8 + 2, 1e-9);
  EXPECT_NEAR(tree_at(c, 32 * 1024, NcclProtocol::kLL), 26.8 + 16, 1e-9);
  EXPECT_NEAR(tree_at(c, 64 * 1024, NcclProtocol::kLL), 26.8 + 32, 1e-9);
  EXPECT_NEAR(tree_at(c, 256 * kMiB, NcclProtocol::kLL), 26.8 + 32, 1e-9);
  // LL128 and Simple keep their buffers on the GPU (GPUDirect): no per-channel term.
  EXPECT_NEAR(tree_at(c, 64 * 1024, NcclProtocol::kLL128), 14 + 2 * (7 * 2 * 1.25 / 1.9 + 1 * 5),
              1e-9);
  // The ring's LL: one channel per 4 KiB x 16 ranks = 64 KiB; 2 channels at 128 KiB:
  // 6.6 + 30 steps x 3 us (every step at the network's) + 2 x 2 us.
  auto ring = algorithms::kRing.cost(EventKind::kAllReduce, group(c, 16, 2), NcclProtocol::kLL,
                                     128 * 1024);
  ASSERT_TRUE(ring);
  EXPECT_NEAR(ring->latency_us, 6.6 + 30 * 3 + 2 * 2, 1e-9);
  // Inside one node LL has no proxy: nothing added.
  auto one =
      algorithms::kRing.cost(EventKind::kAllReduce, group(c, 8, 1), NcclProtocol::kLL, kMiB);
  EXPECT_NEAR(one->latency_us, 6.6 + 14 * 1, 1e-9);
  // The file key (net only, not negative: BadTopologyIsOneClearLine).
  std::string yaml = clusterYaml();
  yaml.replace(yaml.rfind("efficiency: {ring: 1}}"), 22,
               "efficiency: {ring: 1}, ll_channel_us: 2.5}");
  EXPECT_NEAR(parseClusterConfig(yaml, "x.yaml").topology.nccl.net.ll_channel_us, 2.5, 0);
}

TEST(Network, OldClusterFilesDeriveATopology) {
  ClusterConfig c = parseClusterConfig(R"(
name: old
node:
  gpus: 4
  device: {name: T, peak_tflops: {fp16: 100}, memory_bandwidth_gb_s: 1000, memory_gib: 40}
  intra_link: {name: PCIe, bandwidth_gb_s: 25, latency_us: 8}
network: {name: Ethernet, bandwidth_gb_s: 12.5, latency_us: 15}
)",
                                       "old.yaml");
  EXPECT_TRUE(c.topology.derived);
  EXPECT_EQ(c.topology.nics_per_node, 4);
  EXPECT_NEAR(c.topology.nic_bandwidth_gb_s, 12.5 / 4, 1e-12);
  EXPECT_FALSE(c.topology.nvswitch);
  EXPECT_EQ(c.topology.nccl.net.latency_us[2], 15);
  EXPECT_EQ(c.topology.nccl.intra.latency_us[0], 8);
  // No NVLink: no LL128 (NCCL enables it only with NVLink).
  EXPECT_FALSE(
      algorithms::kRing.cost(EventKind::kAllReduce, group(c, 4, 1), NcclProtocol::kLL128, kMiB));
}

TEST(Network, BadTopologyIsOneClearLine) {
  auto bad = [](const std::string& topology, const std::string& expected) {
    const std::string yaml = R"(
name: bad
node:
  gpus: 8
  device: {name: T, peak_tflops: {fp16: 100}, memory_bandwidth_gb_s: 1000, memory_gib: 40}
  intra_link: {name: NVSwitch, bandwidth_gb_s: 300, latency_us: 3}
network: {name: 8x HDR, bandwidth_gb_s: 200, latency_us: 5}
topology:
)" + topology;
    try {
      parseClusterConfig(yaml, "bad.yaml");
      ADD_FAILURE() << "accepted: " << topology;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  bad("  nvls: true\n", "nvswitch");
  bad("  nics_per_node: 8\n  nic_bandwidth_gb_s: 50\n", "network.bandwidth_gb_s is 200");
  bad("  placement: random\n", "contiguous or scattered");
  bad("  tiers:\n    - {name: a, nodes: 32}\n    - {name: b, nodes: 16}\n", "more nodes");
  bad("  tiers:\n    - {name: a, nodes: 32, oversubscription: 0.5}\n", ">= 1");
  bad("  nccl: {algorithm: butterfly}\n", "must be auto");
  bad("  nccl: {net: {efficiency: {ring: 1.5}}}\n", "ring");
  bad("  nccl: {net: {efficiency: {hypercube: 0.5}}}\n", "not an algorithm");
  bad("  fabric: fat-tree\n", "fabric");
  bad("  nccl: {protocols: [simple, ll256]}\n", "ll, ll128 or simple");
  bad("  nccl: {net: {algorithm_latency_us: {torus: {simple: 3}}}}\n", "not an algorithm");
  bad("  nccl: {intra: {ll_channel_us: 1}}\n", "ll_channel_us");  // no proxy inside a node
  bad("  nccl: {net: {ll_channel_us: -1}}\n", "ll_channel_us");
  bad("  nccl: {version: \"2.18\"}\n", "2.23 to 2.27");
  bad("  nccl: {version: \"2.23.4\"}\n", "2.23 to 2.27");
  bad("  nccl: {gpu_arch: pascal}\n", "volta, ampere, hopper or blackwell");
  bad("  nccl: {cpu_vendor: arm}\n", "intel or amd");
  bad("  nccl: {launch_us: -1}\n", "launch_us");
}

// NCCL's own estimate (the tuner's basis for choosing), by hand from tuning.cc's tables for the
// test cluster: device "T" names no generation (Ampere's row), Intel host (network overhead 1 us),
// 16 ranks on 2 nodes: graph 8 channels x 25 GB/s (min(NVLink 300, 8 NICs x 25)); all-reduce 30
// steps, 2 across the network.
TEST(Network, NcclEstimateIsNcclsTable) {
  ClusterConfig c = cluster();
  const GroupOnFabric g = group(c, 16, 2);
  const NcclGraph graph = ncclGraphOf(g);
  EXPECT_EQ(graph.channels, 8);
  EXPECT_NEAR(graph.channel_gb_s, 25, 1e-12);
  EXPECT_EQ(ncclGraphOf(group(c, 8, 1)).channels, 12);  // NVLink 300 GB/s
  auto est = [&](const char* a, NcclProtocol p, int64_t bytes, EventKind k = EventKind::kAllReduce,
                 const GroupOnFabric* on = nullptr) {
    return ncclEstimate(a, k, on ? *on : g, p, bytes);
  };
  // Ring LL128: 14 + 28 max(1.9, 1.0) + 2 x 4.0; min(200 x .92, 8 x 20) x 16/30.
  auto ll128 = est("ring", NcclProtocol::kLL128, kMiB);
  ASSERT_TRUE(ll128);
  EXPECT_NEAR(ll128->latency_us, 75.2, 1e-9);
  EXPECT_NEAR(ll128->algbw_gb_s, 160 * 16 / 30.0, 1e-9);
  // Ring LL: 6.6 + 28 max(0.6, 1.0) + 2 x 2.7 (no 1.8x on LL inside the node across nodes: NCCL
  // dropped it in 2.18); min(Intel's 39 at 2 nodes, 100) x 16/30.
  auto ll = est("ring", NcclProtocol::kLL, kMiB);
  EXPECT_NEAR(ll->latency_us, 6.6 + 28 * 1.0 + 5.4, 1e-9);
  // Tree LL: 6.8 + 2 (7 x 0.6 + 1 x 5.0) = 25.2 us.
  EXPECT_NEAR(est("tree", NcclProtocol::kLL, kMiB)->latency_us, 25.2, 1e-9);
  EXPECT_NEAR(ll->algbw_gb_s, 39 * 16 / 30.0, 1e-9);
  // Ring Simple at 1 GiB: (8.4 + 28 max(3.4, 3 x 1.0) + 2 x 14) x 1.4 (the plateau); 200 x 16/30.
  auto simple = est("ring", NcclProtocol::kSimple, kGiB);
  EXPECT_NEAR(simple->latency_us, (8.4 + 28 * 3.4 + 28) * 1.4, 1e-9);
  EXPECT_NEAR(simple->algbw_gb_s, 200 * 16 / 30.0, 1e-9);
  // Tree Simple at 1 GiB (past the size correction): 8.4 + 2 (7 x 4 + 1 x 14); 200 x .92 x .5.
  auto tree = est("tree", NcclProtocol::kSimple, kGiB);
  EXPECT_NEAR(tree->latency_us, 92.4, 1e-9);
  EXPECT_NEAR(tree->algbw_gb_s, 92, 1e-9);
  // ... and at 1 MiB, log2(2^20 / 64) = 14: NCCL's correction 0.5 for Simple.
  EXPECT_NEAR(est("tree", NcclProtocol::kSimple, kMiB)->algbw_gb_s, 46, 1e-9);
  // All-gather: 15 steps, 1 across the network, no plateau: 8.4 + 14 x 3.4 + 14; 200 x 16/15.
  auto ag = est("ring", NcclProtocol::kSimple, kGiB, EventKind::kAllGather);
  EXPECT_NEAR(ag->latency_us, 8.4 + 14 * 3.4 + 14, 1e-9);
  EXPECT_NEAR(ag->algbw_gb_s, 200 * 16 / 15.0, 1e-9);
  EXPECT_FALSE(est("tree", NcclProtocol::kSimple, kGiB, EventKind::kAllGather));
  // Hopper's row lifts LL128's cap to 36.7 per channel: 200 x .92 x 16/30.
  c.topology.nccl.gpu_arch = NcclGpuArch::kHopper;
  const GroupOnFabric h = group(c, 16, 2);
  EXPECT_NEAR(est("ring", NcclProtocol::kLL128, kMiB, EventKind::kAllReduce, &h)->algbw_gb_s,
              184 * 16 / 30.0, 1e-9);
  // The GPU row from the device's name.
  EXPECT_EQ(ncclGpuArchOfName("NVIDIA A100-SXM4-40GB"), NcclGpuArch::kAmpere);
  EXPECT_EQ(ncclGpuArchOfName("NVIDIA H100-SXM5-80GB"), NcclGpuArch::kHopper);
  EXPECT_EQ(ncclGpuArchOfName("NVIDIA GB200"), NcclGpuArch::kBlackwell);
  EXPECT_EQ(ncclGpuArchOfName("T"), NcclGpuArch::kUnset);
}

// A device NCCL's tables do not know takes Ampere's row, and the loader says so when the file
// describes its network; a file that names the row, or one without `topology:`, gets no note.
TEST(NcclTuner, UnknownDeviceTakesAmpereRowWithANote) {
  const ClusterConfig unknown = cluster();  // device "T"
  EXPECT_EQ(unknown.topology.nccl.gpu_arch, NcclGpuArch::kAmpere);
  const std::string note = assumedNcclArchNote(unknown);
  EXPECT_NE(note.find("device 'T'"), std::string::npos) << note;
  EXPECT_NE(note.find("topology.nccl.gpu_arch"), std::string::npos) << note;

  std::string named = clusterYaml();
  named.replace(named.find("  nccl:\n"), 8, "  nccl:\n    gpu_arch: hopper\n");
  const ClusterConfig hopper = parseClusterConfig(named, "named.yaml");
  EXPECT_EQ(hopper.topology.nccl.gpu_arch, NcclGpuArch::kHopper);
  EXPECT_EQ(assumedNcclArchNote(hopper), "");

  std::string old = clusterYaml();
  old.erase(old.find("topology:"));
  EXPECT_EQ(assumedNcclArchNote(parseClusterConfig(old, "old.yaml")), "");
}

}  // namespace
}  // namespace evsim

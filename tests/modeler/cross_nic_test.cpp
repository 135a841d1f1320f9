// NCCL_CROSS_NIC as a cluster key (topology.nccl.cross_nic, config/network_topology.h) and where it
// decides a NIC (modeler/network/ring_channels.h for the channels of rings and trees; link_map.h
// p2pNic and alltoallShares for sends), traced by hand from NCCL's graph search
// (src/graph/search.cc: ncclTopoCompute's crossNic, ncclTopoSearchCheckNet, ncclTopoGetNetDev) and
// its PXN paths (src/graph/paths.cc); also PXN closing a ring (the NVLink hop into the entry NIC's
// GPU).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "modeler/link_flows.h"
#include "modeler/link_map.h"
#include "modeler/link_usage.h"
#include "modeler/network/algorithm.h"
#include "modeler/network/fabric.h"
#include "modeler/network/link_sharing.h"
#include "modeler/network/ring_channels.h"
#include "modeler/simulation.h"
#include "support/rail_cluster.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::railCluster;
using test::topologyError;
using test::Uses;

using test::kPerGpu;

TEST(CrossNic, KeyParsesWithNcclsDefault) {
  for (const ClusterConfig& c : {railCluster(8, 8, ""), test::cluster(8)}) {
    EXPECT_EQ(c.topology.nccl.cross_nic, 2);  // NCCL_PARAM(CrossNic, "CROSS_NIC", 2)
  }
  for (int v : {0, 1, 2}) {
    const std::string t = "  nccl: {cross_nic: " + std::to_string(v) + "}\n";
    EXPECT_EQ(railCluster(8, 8, t).topology.nccl.cross_nic, v);
  }
  const std::string bad = topologyError(8, 8, "  nccl: {cross_nic: 3}\n");
  EXPECT_NE(bad.find("rails.yaml: topology.nccl.cross_nic: '3': must be 0, 1 or 2 (as "
                     "NCCL_CROSS_NIC)"),
            std::string::npos)
      << bad;
  EXPECT_EQ(bad.find('\n'), std::string::npos);
  EXPECT_NE(topologyError(8, 8, "  nccl: {cross_nic: yes}\n").find("'yes': must be 0, 1 or 2"),
            std::string::npos);
}

// The PCIe switch layout is read only with per-GPU NICs: with pooled NICs (the default affinity)
// a value that would not fit per GPU is not refused, and it changes nothing there.
TEST(CrossNic, PciSwitchGpusIsCheckedOnlyWithPerGpuNics) {
  EXPECT_EQ(topologyError(8, 8, "  pci_switch_gpus: 3\n"), "accepted");
  EXPECT_EQ(topologyError(8, 4, "  pci_switch_gpus: 1\n"), "accepted");
  EXPECT_NE(topologyError(8, 8, "  nic_affinity: per_gpu\n  pci_switch_gpus: 3\n")
                .find("must divide the node's 8 GPUs"),
            std::string::npos);
  EXPECT_NE(topologyError(8, 8, "  pci_switch_gpus: 0\n").find("pci_switch_gpus"),
            std::string::npos);  // still a positive integer
}

// A ring's channel through a node of `rpn` of the group's GPUs, 8 GPUs a node with `rails` NICs
// (the device's rail 0; `pci_rails` rails a PCIe switch): {NVLink share each way, changes rail}.
std::pair<double, bool> routeOf(const std::string& topology, int rpn, int rails = 8,
                                int pci_rails = 1, int nodes = 2) {
  const RingChannels r = ringChannels(railCluster(8, rails, topology).topology, rails, pci_rails,
                                      Placement{rpn * nodes, nodes, rpn});
  return {r.nvlink, r.cross_rail};
}

// Worked from NCCL's search on 8 GPUs with a NIC each. A channel enters a node through NIC n at
// its GPU, visits the group's rpn GPUs over NVLink (rpn - 1 hops) and the last GPU x hands it on:
//  - crossNic 2 (default) and 0 with PXN (NVSwitch, PXN on): x reaches NIC n through PXN, one
//    more NVLink hop (x into n's GPU): every GPU's NVLink carries the channel both ways (share 1,
//    as before this change), rail-local;
//  - crossNic 1: x's own NIC (PIX, the first the search lists): 7/8 on NVLink with 8 GPUs, 1/2
//    with 2, and every hop between nodes goes from rail x to rail n;
//  - PXN disabled: crossNic 0 still leaves by NIC n, over PCIe through the host (7/8, rail-local);
//    crossNic 2 pairs channels n -> x, x -> n (NVIDIA/nccl#1189's log) unless two of the group's
//    GPUs share a PCIe switch (x then reaches NIC n through it: rail-local, 7/8);
//  - without an NVSwitch, as with PXN disabled;
//  - 8 of the group's GPUs on 4 NICs: x can share the entry NIC (PIX), rail-local at every
//    setting, 7/8.
// Pooled NICs, one rank per node or one node: the ring as before (share 1, no rail).
TEST(CrossNic, ARingsChannelFollowsNcclsSearch) {
  using R = std::pair<double, bool>;
  const std::string pg = kPerGpu;
  EXPECT_EQ(routeOf(pg, 8), (R{1, false}));
  EXPECT_EQ(routeOf(pg + "  nccl: {cross_nic: 0}\n", 8), (R{1, false}));
  EXPECT_EQ(routeOf(pg + "  nccl: {cross_nic: 1}\n", 8), (R{7.0 / 8, true}));
  EXPECT_EQ(routeOf(pg + "  nccl: {cross_nic: 1}\n", 2), (R{1.0 / 2, true}));
  const std::string off = pg + "  nccl: {pxn_disable: 1";
  EXPECT_EQ(routeOf(off + ", cross_nic: 0}\n", 8), (R{7.0 / 8, false}));
  EXPECT_EQ(routeOf(off + "}\n", 8), (R{7.0 / 8, true}));
  EXPECT_EQ(routeOf(off + "}\n", 8, 8, 2), (R{7.0 / 8, false}));  // two GPUs a switch
  // 2 of the group's GPUs a node (stride 4) never share a two-GPU switch: cross-NIC.
  EXPECT_EQ(routeOf(off + "}\n", 2, 8, 2), (R{1.0 / 2, true}));
  EXPECT_EQ(routeOf("  nic_affinity: per_gpu\n", 4), (R{3.0 / 4, true}));
  EXPECT_EQ(routeOf("  nic_affinity: per_gpu\n  nccl: {cross_nic: 0}\n", 4), (R{3.0 / 4, false}));
  for (const char* c : {"0", "1", "2"}) {
    EXPECT_EQ(routeOf(pg + "  nccl: {cross_nic: " + c + "}\n", 8, 4), (R{7.0 / 8, false})) << c;
  }
  // P2P_PXN_LEVEL is for send/recv only: a graph's NIC is the graph's.
  EXPECT_EQ(routeOf(pg + "  nccl: {p2p_pxn_level: 0}\n", 8), (R{1, false}));
  EXPECT_EQ(routeOf(pg + "  nccl: {cross_nic: 1}\n", 1), (R{1, false}));
  EXPECT_EQ(routeOf(pg + "  nccl: {cross_nic: 1}\n", 8, 8, 1, 1), (R{1, false}));
  const RingChannels p =
      ringChannels(railCluster(8, 8, "  nvswitch: true\n  nccl: {cross_nic: 1}\n").topology, 8, 1,
                   Placement{16, 2, 8});
  EXPECT_EQ(p.nvlink, 1);
  EXPECT_FALSE(p.cross_rail);
}

// The standalone cost (network/fabric.h): a ring all-reduce of 4 ranks over 2 nodes of 2 GPUs
// (a NIC each, 10 GB/s a node: the group's share is the node's, rpn / G = 1) under rail-optimised
// 2:1 leaves of 4 nodes does not cross the leaf by its node count, so rail-local channels get the
// node's 10 GB/s; at crossNic 1 every channel goes up the leaf and back down: 10 / 2 = 5 GB/s, and
// the ring's bandwidth halves (NVLink's 100 GB/s is not the bottleneck either way). A tree keeps
// its rail (ring_channels.h, treeChannels): its bandwidth does not move. Over 8 nodes (above the
// leaf) both cross it: 5 GB/s either way.
TEST(CrossNic, ACrossNicRingsStandaloneCostPaysTheRailOptimisedLeaf) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  const ClusterConfig local = railCluster(2, 2, std::string(kPerGpu) + leaf);
  const ClusterConfig cross =
      railCluster(2, 2, std::string(kPerGpu) + "  nccl: {cross_nic: 1}\n" + leaf);
  const Placement p{4, 2, 2};
  const GroupOnFabric a = mapGroup(local, local.topology, p);
  const GroupOnFabric b = mapGroup(cross, cross.topology, p);
  EXPECT_DOUBLE_EQ(a.net_bw_gb_s, 10);
  EXPECT_DOUBLE_EQ(a.ring_net_bw_gb_s, 10);
  EXPECT_DOUBLE_EQ(b.net_bw_gb_s, 10);  // sends and all-to-alls keep theirs (p2pNic)
  EXPECT_DOUBLE_EQ(b.ring_net_bw_gb_s, 5);
  for (const NcclAlgorithm* alg : {&algorithms::kRing, &algorithms::kTree}) {
    const auto ca = alg->cost(EventKind::kAllReduce, a, NcclProtocol::kSimple, 1 << 30);
    const auto cb = alg->cost(EventKind::kAllReduce, b, NcclProtocol::kSimple, 1 << 30);
    ASSERT_TRUE(ca && cb) << alg->name;
    const double ratio = alg == &algorithms::kRing ? 0.5 : 1.0;
    EXPECT_NEAR(cb->algbw_gb_s, ca->algbw_gb_s * ratio, 1e-9) << alg->name;
    EXPECT_DOUBLE_EQ(cb->latency_us, ca->latency_us) << alg->name;
  }
  const Placement wide{16, 8, 2};
  EXPECT_DOUBLE_EQ(mapGroup(local, local.topology, wide).ring_net_bw_gb_s, 5);
  EXPECT_DOUBLE_EQ(mapGroup(cross, cross.topology, wide).ring_net_bw_gb_s, 5);
}

// Send/recv with NCCL_CROSS_NIC=0 (ncclTopoGetNetDev: the receiver's-rail NIC is taken first,
// "if (ncclParamCrossNic() == 0) *dev = netDev", then PXN may add a proxy): 8 GPUs, 8 NICs, two
// GPUs a switch. Where crossNic 1 or 2 fall back to the sender's own NIC (level 0, PXN disabled,
// level 2 without NVLink, level 1 across switches without NVLink), crossNic 0 takes the
// receiver's rail directly (no proxy); with PXN as before; the receiver's index GPU outside the
// communicator: still the sender's own NIC (NCCL returns before looking at crossNic).
TEST(CrossNic, WithCrossNicZeroASendKeepsToTheReceiversRail) {
  using P = std::pair<int, int>;
  const std::string pairs = std::string(kPerGpu) + "  pci_switch_gpus: 2\n";
  auto nic = [](
                 const std::string& topology, int sender, int receiver,
                 bool (*in_comm)(int) = [](int) { return true; }) {
    const P2pNic n = p2pNic(railCluster(8, 8, topology).topology, 8, sender, receiver, in_comm);
    return P{n.rail, n.proxy};
  };
  EXPECT_EQ(nic(pairs + "  nccl: {cross_nic: 0, p2p_pxn_level: 0}\n", 2, 5), (P{5, -1}));
  EXPECT_EQ(nic(pairs + "  nccl: {cross_nic: 0, pxn_disable: 1}\n", 2, 5), (P{5, -1}));
  EXPECT_EQ(nic(pairs + "  nccl: {cross_nic: 2, pxn_disable: 1}\n", 2, 5), (P{2, -1}));
  EXPECT_EQ(nic(pairs + "  nccl: {cross_nic: 1, pxn_disable: 1}\n", 2, 5), (P{2, -1}));
  EXPECT_EQ(nic(pairs + "  nccl: {cross_nic: 0}\n", 2, 5), (P{5, 5}));  // PXN as before
  const std::string no_nvlink = "  nic_affinity: per_gpu\n  pci_switch_gpus: 2\n";
  EXPECT_EQ(nic(no_nvlink + "  nccl: {cross_nic: 0}\n", 2, 5), (P{5, -1}));
  EXPECT_EQ(nic(no_nvlink, 2, 5), (P{2, -1}));
  EXPECT_EQ(nic(no_nvlink + "  nccl: {cross_nic: 0, p2p_pxn_level: 1}\n", 2, 5), (P{5, -1}));
  EXPECT_EQ(nic(no_nvlink + "  nccl: {p2p_pxn_level: 1}\n", 2, 5), (P{2, -1}));
  EXPECT_EQ(
      nic(pairs + "  nccl: {cross_nic: 0, pxn_disable: 1}\n", 2, 5, [](int g) { return g != 5; }),
      (P{2, -1}));
  // The all-to-all of pxn_level_test.cpp (8 ranks over 2 nodes of 4 GPUs on 4 rails) with PXN
  // disabled: the 3/7 to other rails leave through the peers' rails over PCIe at crossNic 0 (not
  // up the rail tier), through its own rail otherwise; NVLink 3/7 either way.
  const Placement a2a{8, 2, 4};
  for (int c : {0, 2}) {
    const AlltoallShares s = alltoallShares(
        railCluster(4, 4,
                    std::string(kPerGpu) +
                        "  nccl: {pxn_disable: 1, cross_nic: " + std::to_string(c) + "}\n")
            .topology,
        test::handDevice(4), a2a);
    EXPECT_NEAR(s.nvlink, 3.0 / 7, 1e-12);
    EXPECT_NEAR(s.up_rail_tier, c == 0 ? 0 : 3.0 / 7, 1e-12);
  }
}

// A DP all-reduce flow of a 4-rank group over 2 nodes of 2 GPUs (a NIC each, rail-optimised 2:1
// leaves of 4 nodes: the group does not cross the leaf by its node count), 3000 bytes in 10 us
// alone (300 bytes/us), device resources 0-3 by test::handDevice, its leaf uplink share 4 / 5.
// Its NIC carries 1 / rpn = 1/2 of the bytes (the ring's channels over the group's 2 rails).
// Default: NVLink 1 each way (PXN closes the ring), no uplink. crossNic 1: NVLink 1/2 (one hop of
// a 2-GPU chain), and every channel changes rail between nodes: the uplink carries its NIC's 1/2.
// Beside B, 500 bytes in 10 us (50 bytes/us) on the uplink (capacity 50, raised to the ring's own
// 150 alone: link_sharing.h), max-min: both rise to 50, where B stops at its demand
// (25 + 50 < 150); the ring rises to x/2 + 50 = 150, x = 200 bytes/us, until B ends at 10 us (2000
// bytes done); its last 1000 bytes alone at 300 take 3.333 us: it ends at 13.333. Rail-local (the
// default) both end at 10.
TEST(CrossNic, ACrossNicRingGoesUpTheRailOptimisedLeaf) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  DeviceLinks d = test::handDevice(2);
  d.uplink_tx = {4};
  d.uplink_rx = {5};
  const Placement p{4, 2, 2};
  const SharedFlow cross = collectiveFlow(
      railCluster(2, 2, std::string(kPerGpu) + "  nccl: {cross_nic: 1}\n" + leaf).topology, d, p,
      3000, 0, 10, /*tree=*/false);
  EXPECT_EQ(test::usesOf(cross),
            (Uses{{0, 0.5f}, {1, 0.5f}, {2, 0.5f}, {3, 0.5f}, {4, 0.5f}, {5, 0.5f}}));
  const SharedFlow local =
      collectiveFlow(railCluster(2, 2, std::string(kPerGpu) + leaf).topology, d, p, 3000, 0, 10,
                     /*tree=*/false);
  EXPECT_EQ(test::usesOf(local), (Uses{{0, 1.0f}, {1, 1.0f}, {2, 0.5f}, {3, 0.5f}}));
  const std::vector<double> caps{1e9, 1e9, 1e9, 1e9, 50, 1e9};
  const SharedFlow b{0, 10, 500, {{4, 1}}};
  const SharingResult r = shareLinks(std::vector<SharedFlow>{cross, b}, caps);
  EXPECT_NEAR(r.end_us[0], 10 + 1000.0 / 300, 1e-6);
  EXPECT_NEAR(r.end_us[1], 10, 1e-6);
  const SharingResult q = shareLinks(std::vector<SharedFlow>{local, b}, caps);
  EXPECT_NEAR(q.end_us[0], 10, 1e-9);
  EXPECT_NEAR(q.end_us[1], 10, 1e-9);
  // A group over more nodes than a leaf holds crosses the uplinks anyway: counted once.
  const SharedFlow wide = collectiveFlow(
      railCluster(2, 2, std::string(kPerGpu) + "  nccl: {cross_nic: 1}\n" + leaf).topology, d,
      Placement{16, 8, 2}, 3000, 0, 10, /*tree=*/false);
  EXPECT_EQ(test::usesOf(wide),
            (Uses{{0, 0.5f}, {1, 0.5f}, {2, 0.5f}, {3, 0.5f}, {4, 0.5f}, {5, 0.5f}}));
}

// The bytes of `link` in a simulation of 1M1P4D (test::model's tiny GPT) on two nodes of two GPUs
// with a NIC each: one DP all-reduce over 2 nodes x 2 ranks (0 if the link carries nothing).
double dpBytesOn(const std::string& topology, const std::string& link) {
  return test::linkBytesOn(topology, Strategy::of(1, 1, 4, 1, 4), link);
}

// The whole plan: rank 0's NVLink carries the all-reduce's bus bytes B at the default (PXN closes
// each channel inside the node), B/2 at crossNic 1 or with PXN disabled (one hop of two); its rail
// carries B/2 either way; on rail-optimised 2:1 leaves of 4 nodes the rail's leaf uplink carries
// all of it at crossNic 1 (every channel changes rail between the two nodes) and nothing at the
// default or crossNic 0, even with PXN disabled (through the host, but on its rail).
TEST(CrossNic, TheDpRingsLinkLoadsPerSetting) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  const std::string pg = std::string(kPerGpu) + leaf;
  const double nvlink = dpBytesOn(pg, "rank 0 nvlink tx");
  const double nic = dpBytesOn(pg, "node 0 nic 0 tx");
  ASSERT_GT(nvlink, 0);
  EXPECT_NEAR(nic, nvlink / 2, 1e-6 * nvlink);
  EXPECT_EQ(dpBytesOn(pg, "node 0 leaf uplink 0 tx"), 0);
  const std::string one = pg + "  nccl: {cross_nic: 1}\n";
  EXPECT_NEAR(dpBytesOn(one, "rank 0 nvlink tx"), nvlink / 2, 1e-6 * nvlink);
  EXPECT_NEAR(dpBytesOn(one, "node 0 nic 0 tx"), nic, 1e-6 * nic);
  EXPECT_NEAR(dpBytesOn(one, "node 0 leaf uplink 0 tx"), nic, 1e-6 * nic);
  const std::string off = pg + "  nccl: {pxn_disable: 1}\n";
  EXPECT_NEAR(dpBytesOn(off, "rank 0 nvlink tx"), nvlink / 2, 1e-6 * nvlink);
  EXPECT_NEAR(dpBytesOn(off, "node 0 leaf uplink 0 tx"), nic, 1e-6 * nic);
  const std::string off0 = pg + "  nccl: {pxn_disable: 1, cross_nic: 0}\n";
  EXPECT_NEAR(dpBytesOn(off0, "rank 0 nvlink tx"), nvlink / 2, 1e-6 * nvlink);
  EXPECT_EQ(dpBytesOn(off0, "node 0 leaf uplink 0 tx"), 0);
}

// NCCL's tree (ring_channels.h, treeChannels; src/graph/search.cc): the channel's first GPU goes
// back to a NIC (ncclTopoSearchParams, backToNet 0), and the first NIC listed for it is its own,
// the one the channel came in by (ncclTopoSelectNets); PATTERN_TREE refuses any other. So under
// every crossNic and PXN setting the tree's channels keep their rail; the NVLink share is the
// ring rule's (1 at the defaults, 1/2 for a 2-GPU chain where the ring's would be open).
TEST(CrossNic, ATreeKeepsItsRailWhereARingChangesIt) {
  for (const char* nccl : {"{cross_nic: 0}", "{cross_nic: 1}", "{cross_nic: 2}",
                           "{cross_nic: 2, pxn_disable: 1}", "{cross_nic: 1, pxn_disable: 1}"}) {
    const NetworkTopology t =
        railCluster(8, 8, std::string(kPerGpu) + "  nccl: " + nccl + "\n").topology;
    for (const Placement& p : {Placement{4, 2, 2}, Placement{16, 4, 4}, Placement{64, 8, 8}}) {
      const RingChannels ring = ringChannels(t, 8, 1, p);
      const RingChannels tree = treeChannels(t, 8, 1, p);
      EXPECT_FALSE(tree.cross_rail) << nccl;
      EXPECT_EQ(tree.nvlink, ring.nvlink) << nccl;
    }
  }
  // The ring does change rail at crossNic 1 (what the tree is compared with).
  const NetworkTopology one =
      railCluster(8, 8, std::string(kPerGpu) + "  nccl: {cross_nic: 1}\n").topology;
  EXPECT_TRUE(ringChannels(one, 8, 1, Placement{4, 2, 2}).cross_rail);
  EXPECT_NEAR(treeChannels(one, 8, 1, Placement{4, 2, 2}).nvlink, 1.0 / 2, 1e-12);
}

// The tree's standalone bandwidth by hand (tree.cpp), 2 GPUs a node (NVLink 100 GB/s, a 5 GB/s
// NIC each: 10 GB/s a node), rail-optimised 2:1 leaves of 4 nodes, Simple at 1 GiB (NCCL's tree
// correction is 1 above 256 MiB; no fitted efficiencies: 1): inside the node 100 / 2 = 50; across
// 2 nodes the node's 10 GB/s once each way, across 4 (inner nodes of one tree) 10 / 2 = 5; times
// NCCL's 0.92: algbw 9.2 GB/s on 2 nodes, 4.6 on 4, with crossNic 0 and 1 alike. The ring's NIC share
// halves at crossNic 1 (10 -> 5 GB/s: up the 2:1 leaf) on both.
TEST(CrossNic, ATreesStandaloneCostKeepsTheNodesNicShare) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  for (const auto& [nodes, tree_algbw] : {std::pair{2, 9.2}, std::pair{4, 4.6}}) {
    const Placement p{2 * nodes, nodes, 2};
    for (const char* c : {"0", "1"}) {
      const ClusterConfig cl =
          railCluster(2, 2, std::string(kPerGpu) + "  nccl: {cross_nic: " + c + "}\n" + leaf);
      const GroupOnFabric g = mapGroup(cl, cl.topology, p);
      const auto tree = algorithms::kTree.cost(EventKind::kAllReduce, g, NcclProtocol::kSimple,
                                               int64_t{1} << 30);
      ASSERT_TRUE(tree);
      EXPECT_NEAR(tree->algbw_gb_s, tree_algbw, 1e-9) << nodes << " nodes, crossNic " << c;
      EXPECT_DOUBLE_EQ(g.ring_net_bw_gb_s, c[0] == '1' ? 5.0 : 10.0) << nodes;
    }
  }
}

// The DP all-reduce's link loads with NCCL_ALGO forced (nccl.algorithm), on the 1M1P4D plan of
// TheDpRingsLinkLoadsPerSetting (2 nodes x 2 ranks) and 1M1P8D (4 nodes x 2 ranks; the leaf holds
// 4 nodes, so neither crosses it by its node count). Per rail (node 0's NIC 0) each carries half
// the bus bytes, ring or tree: for the gradient buffer M, 2 (n - 1) / n M / 2, so 3/8 M at n = 4
// and 7/16 M at n = 8: the 8-rank NIC load is 7/6 of the 4-rank one. The leaf uplink: the ring's
// channels at crossNic 1 put all of the NIC's bytes on it; the tree's none, at crossNic 0 or 1.
TEST(CrossNic, TheDpTreesLinkLoadsPerSetting) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  const std::string uplink = "node 0 leaf uplink 0 tx";
  auto on = [&](const std::string& nccl, int dp, const std::string& link) {
    return test::linkBytesOn(std::string(kPerGpu) + "  nccl: " + nccl + "\n" + leaf,
                             Strategy::of(1, 1, dp, 1, dp), link);
  };
  const double nic4 = on("{algorithm: tree, cross_nic: 1}", 4, "node 0 nic 0 tx");
  const double nic8 = on("{algorithm: tree, cross_nic: 1}", 8, "node 0 nic 0 tx");
  ASSERT_GT(nic4, 0);
  EXPECT_NEAR(nic8, nic4 * 7 / 6, 1e-6 * nic4);
  for (const auto& [dp, nic] : {std::pair{4, nic4}, std::pair{8, nic8}}) {
    for (const char* c : {"0", "1"}) {
      const std::string tree = std::string("{algorithm: tree, cross_nic: ") + c + "}";
      const std::string ring = std::string("{algorithm: ring, cross_nic: ") + c + "}";
      EXPECT_NEAR(on(tree, dp, "node 0 nic 0 tx"), nic, 1e-6 * nic) << dp << " " << c;
      EXPECT_NEAR(on(ring, dp, "node 0 nic 0 tx"), nic, 1e-6 * nic) << dp << " " << c;
      EXPECT_EQ(on(tree, dp, uplink), 0) << dp << " " << c;
      EXPECT_NEAR(on(ring, dp, uplink), c[0] == '1' ? nic : 0, 1e-6 * nic) << dp << " " << c;
    }
  }
}

// The walk's TreeRailRule (one tuner, its choice kept per event) answers as treeKeepsRail does:
// on a rail-optimised leaf at crossNic 1, a 4-rank all-reduce over 2 nodes keeps its rail when the
// algorithm is forced to tree, and not as a ring; asked again, the kept answer; an all-gather,
// which NCCL runs only as a ring here, never.
TEST(CrossNic, TheWalksTreeRuleAnswersAsTreeKeepsRail) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  const DeviceLinks d = test::handDevice(2);
  const Event all_reduce =
      makeCommunication(EventKind::kAllReduce, 1 << 20, Placement{4, 2, 2}, DType::kBf16);
  const Event all_gather =
      makeCommunication(EventKind::kAllGather, 1 << 20, Placement{4, 2, 2}, DType::kBf16);
  for (const bool tree : {true, false}) {
    const ClusterConfig c =
        railCluster(2, 2,
                    std::string(kPerGpu) + "  nccl: {algorithm: " + (tree ? "tree" : "ring") +
                        ", cross_nic: 1}\n" + leaf);
    TreeRailRule rule(c);
    EXPECT_EQ(treeKeepsRail(c, d, all_reduce), tree);
    EXPECT_EQ(rule.keepsRail(d, all_reduce), tree);
    EXPECT_EQ(rule.keepsRail(d, all_reduce), tree);
    EXPECT_FALSE(rule.keepsRail(d, all_gather));
  }
}

}  // namespace
}  // namespace evsim

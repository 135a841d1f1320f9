// NCCL's PXN switches as cluster keys (topology.nccl.pxn_disable, p2p_pxn_level, and the PCIe
// switch level 1 reads, config/network_topology.h) and where they decide a send's NIC
// (modeler/link_map.h: p2pNic, alltoallShares), traced by hand from NCCL's ncclTopoGetNetDev
// (src/graph/search.cc) and its PXN paths (src/graph/paths.cc).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "modeler/in_task_flows.h"
#include "modeler/link_flows.h"
#include "modeler/link_map.h"
#include "modeler/link_usage.h"
#include "modeler/network/link_sharing.h"
#include "modeler/simulation.h"
#include "support/rail_cluster.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::railCluster;
using test::topologyError;
using test::Uses;

using test::kPerGpu;

TEST(PxnLevel, KeysParseWithNcclsDefaults) {
  // No key, or no topology at all: NCCL's defaults, PXN on at level 2.
  for (const ClusterConfig& c : {railCluster(8, 8, ""), test::cluster(8)}) {
    EXPECT_FALSE(c.topology.nccl.pxn_disable);
    EXPECT_EQ(c.topology.nccl.p2p_pxn_level, 2);
    EXPECT_EQ(c.topology.nccl.pxnLevel(), 2);
    EXPECT_EQ(c.topology.pci_switch_gpus, 0);
  }
  // NCCL_PXN_DISABLE=1 wins over any level (ncclTopoGetNetDev: pxnLevel = 0).
  const ClusterConfig off = railCluster(8, 8, "  nccl: {pxn_disable: 1, p2p_pxn_level: 2}\n");
  EXPECT_TRUE(off.topology.nccl.pxn_disable);
  EXPECT_EQ(off.topology.nccl.pxnLevel(), 0);
  EXPECT_EQ(railCluster(8, 8, "  nccl: {p2p_pxn_level: 1}\n").topology.nccl.pxnLevel(), 1);
  EXPECT_EQ(
      railCluster(8, 8, "  nccl: {pxn_disable: 0, p2p_pxn_level: 0}\n").topology.nccl.pxnLevel(),
      0);
  // Two GPUs and their NICs a PCIe switch (DGX A100): GPUs 2 and 3 share one, 1 and 2 do not.
  const NetworkTopology pairs =
      railCluster(8, 8, "  nic_affinity: per_gpu\n  pci_switch_gpus: 2\n").topology;
  EXPECT_EQ(pairs.pciSwitchRails(8), 2);
  EXPECT_TRUE(pairs.samePciSwitch(2, 3, 8));
  EXPECT_FALSE(pairs.samePciSwitch(1, 2, 8));
  // Default: a rail's GPUs (one GPU with 8 NICs on 8 GPUs; two with 4).
  const NetworkTopology own = railCluster(8, 8, "  nic_affinity: per_gpu\n").topology;
  EXPECT_EQ(own.pciSwitchRails(8), 1);
  EXPECT_FALSE(own.samePciSwitch(2, 3, 8));
  const NetworkTopology half = railCluster(8, 4, "  nic_affinity: per_gpu\n").topology;
  EXPECT_TRUE(half.samePciSwitch(4, 5, 8));
  EXPECT_FALSE(half.samePciSwitch(3, 4, 8));
}

TEST(PxnLevel, BadValuesAreOneLineNamingKeyAndFile) {
  auto has = [](const std::string& what, const std::string& part) {
    EXPECT_NE(what.find(part), std::string::npos) << what;
  };
  has(topologyError(8, 8, "  nccl: {pxn_disable: 2}\n"),
      "rails.yaml: topology.nccl.pxn_disable: '2': must be 0 or 1 (as NCCL_PXN_DISABLE)");
  has(topologyError(8, 8, "  nccl: {pxn_disable: true}\n"), "'true': must be 0 or 1");
  has(topologyError(8, 8, "  nccl: {p2p_pxn_level: 3}\n"),
      "rails.yaml: topology.nccl.p2p_pxn_level: '3': must be 0, 1 or 2 (as NCCL_P2P_PXN_LEVEL)");
  has(topologyError(8, 8, "  nccl: {p2p_pxn_level: -1}\n"), "'-1': must be 0, 1 or 2");
  has(topologyError(8, 8, "  nic_affinity: per_gpu\n  pci_switch_gpus: 3\n"),
      "rails.yaml: topology.pci_switch_gpus: 3: must divide the node's 8 GPUs");
  has(topologyError(8, 4, "  nic_affinity: per_gpu\n  pci_switch_gpus: 1\n"),
      "1: 2 GPUs share each NIC, so a PCIe switch holds a multiple of 2");
  for (const char* bad :
       {"  nccl: {pxn_disable: 2}\n", "  nic_affinity: per_gpu\n  pci_switch_gpus: 3\n"}) {
    EXPECT_EQ(topologyError(8, 8, bad).find('\n'), std::string::npos);
  }
}

// The NIC (rail) and PXN proxy of a send from local GPU `sender` to a peer with device index
// `receiver` on another node, all GPUs in the communicator unless `in_comm` says otherwise.
std::pair<int, int> nicOf(
    const std::string& topology, int nics, int sender, int receiver,
    bool (*in_comm)(int) = [](int) { return true; }) {
  const P2pNic n = p2pNic(railCluster(8, nics, topology).topology, 8, sender, receiver, in_comm);
  return {n.rail, n.proxy};
}

// NCCL's rule per level on 8 GPUs, 8 NICs, two GPUs (and their NICs) a PCIe switch: GPUs 2 and 3
// share one. Level 2 takes PXN through the GPU beside the receiver's NIC even on the sender's own
// switch ("always ... even if the NIC is connected through PCI switches"); level 1 uses that NIC
// directly over PCIe there (the sender's path to it is PXB, which NCCL takes as is) and PXN only
// across switches (paths.cc makes a PXN path only where the own path crosses the CPU); level 0 or
// NCCL_PXN_DISABLE=1 always the sender's own NIC. Without NVLink level 2 has no way to the other
// NIC, level 1 still has PCIe on its switch.
TEST(PxnLevel, TheNicOfASendFollowsNcclPerLevel) {
  const std::string pairs = std::string(kPerGpu) + "  pci_switch_gpus: 2\n";
  const std::string l2 = pairs + "  nccl: {p2p_pxn_level: 2}\n";
  const std::string l1 = pairs + "  nccl: {p2p_pxn_level: 1}\n";
  const std::string l0 = pairs + "  nccl: {p2p_pxn_level: 0}\n";
  const std::string disabled = pairs + "  nccl: {pxn_disable: 1}\n";
  using P = std::pair<int, int>;
  EXPECT_EQ(nicOf(l2, 8, 2, 3), (P{3, 3}));   // PXN on its own switch
  EXPECT_EQ(nicOf(l2, 8, 2, 5), (P{5, 5}));   // PXN across switches
  EXPECT_EQ(nicOf(l2, 8, 3, 3), (P{3, -1}));  // its own rail
  EXPECT_EQ(nicOf(l1, 8, 2, 3), (P{3, -1}));  // rail 3's NIC over PCIe, no NVLink hop
  EXPECT_EQ(nicOf(l1, 8, 2, 5), (P{5, 5}));   // across switches: PXN as at level 2
  EXPECT_EQ(nicOf(l1, 8, 2, 2), (P{2, -1}));
  // The receiver's index GPU not in the communicator: its own NIC, every level.
  for (const std::string& t : {l1, l2}) {
    EXPECT_EQ(nicOf(t, 8, 2, 5, [](int g) { return g != 5; }), (P{2, -1}));
    EXPECT_EQ(nicOf(t, 8, 2, 3, [](int g) { return g != 3; }), (P{2, -1}));
  }
  for (const std::string& t : {l0, disabled}) {
    EXPECT_EQ(nicOf(t, 8, 2, 5), (P{2, -1}));
    EXPECT_EQ(nicOf(t, 8, 2, 3), (P{2, -1}));
  }
  const std::string no_nvlink = "  nic_affinity: per_gpu\n  pci_switch_gpus: 2\n";
  EXPECT_EQ(nicOf(no_nvlink + "  nccl: {p2p_pxn_level: 1}\n", 8, 2, 3), (P{3, -1}));
  EXPECT_EQ(nicOf(no_nvlink + "  nccl: {p2p_pxn_level: 1}\n", 8, 2, 5), (P{2, -1}));
  EXPECT_EQ(nicOf(no_nvlink, 8, 2, 3), (P{2, -1}));  // level 2 needs NVLink
  // 4 NICs on 8 GPUs (GPUs 2i, 2i+1 on NIC i; a rail's two GPUs on one switch by default). GPU 5
  // to index 4 (both rail 2): level 2 aggregates on the rail's first GPU, 4; level 1 sends
  // through its own NIC. GPU 0 to index 5: PXN through GPU 4 at both levels.
  const std::string half = std::string(kPerGpu);
  EXPECT_EQ(nicOf(half, 4, 5, 4), (P{2, 4}));
  EXPECT_EQ(nicOf(half + "  nccl: {p2p_pxn_level: 1}\n", 4, 5, 4), (P{2, -1}));
  EXPECT_EQ(nicOf(half + "  nccl: {p2p_pxn_level: 1}\n", 4, 0, 5), (P{2, 4}));
}

// The bytes of the links named in a simulation of test::fourStageFlows' plan (0: none).
double bytesOn(const std::string& topology, const std::string& link) {
  return test::linkBytesOn(topology, Strategy::of(1, 4, 1, 1, 1), link);
}

// test::fourStageFlows' 1M4P1D on two nodes of two GPUs with an NVSwitch and a NIC per GPU:
// stage 1 (node 0, GPU 1) sends to stage 2 (node 1, GPU 0) across rails 1 -> 0. At NCCL's
// default (rail_test.cpp) it goes over NVLink into GPU 0 (stage 0) and out through rail 0. With
// PXN disabled it leaves through its own rail 1, and GPU 0's NVLink rx carries only stage 1's
// gradient back to stage 0: one message of b s h x 2 = 1 x 32 x 64 x 2 = 4096 bytes (m = 1),
// 8192 with PXN (the activation's hop too). Beside a flow of 2e4 bytes into GPU 0 in 0.2 us (the
// whole 1e5 bytes/us port), the send (1000 bytes in 0.2 us on its 5e3 rail) no longer meets it:
// both end at 0.2 (0.21 for the other with PXN, rail_test.cpp).
TEST(PxnLevel, WithPxnDisabledTheCrossRailSendLeavesThroughItsOwnNic) {
  const std::string off = std::string(kPerGpu) + "  nccl: {pxn_disable: 1}\n";
  LinkMap map;
  const TimelineFlows flows = test::fourStageFlows(off, map);
  const DeviceLinks &s0 = map.devices[0][0], &s1 = map.devices[0][1], &s2 = map.devices[0][2];
  EXPECT_EQ(test::usesOf(test::firstSendOf(flows, 1)), (Uses{{s1.nic_tx, 1}, {s2.nic_rx, 1}}));
  EXPECT_FALSE(map.sends[0][2 * 1].pxn());  // link 1's activation (stage 1 -> 2)
  EXPECT_EQ(map.sends[0][2 * 1].nic_rail, 1);
  const SharingResult r = test::sendBesideNvlinkRx(test::firstSendOf(flows, 1), s0.nvlink_rx, map);
  EXPECT_NEAR(r.end_us[0], 0.2, 1e-9);
  EXPECT_NEAR(r.end_us[1], 0.2, 1e-9);

  EXPECT_DOUBLE_EQ(bytesOn(off, "rank 0 nvlink rx"), 4096);
  EXPECT_DOUBLE_EQ(bytesOn(kPerGpu, "rank 0 nvlink rx"), 8192);
  // The activation leaves node 0 through rail 1 (its own) instead of rail 0 (the proxy's).
  EXPECT_DOUBLE_EQ(bytesOn(off, "node 0 nic 1 tx"), 4096);
  EXPECT_DOUBLE_EQ(bytesOn(off, "node 0 nic 0 tx"), 0);
  EXPECT_DOUBLE_EQ(bytesOn(kPerGpu, "node 0 nic 1 tx"), 0);
  EXPECT_DOUBLE_EQ(bytesOn(kPerGpu, "node 0 nic 0 tx"), 4096);
  // The same with level 0.
  EXPECT_DOUBLE_EQ(
      bytesOn(std::string(kPerGpu) + "  nccl: {p2p_pxn_level: 0}\n", "rank 0 nvlink rx"), 4096);
}

// The same plan at level 1. Both GPUs of a node under one PCIe switch: stage 1 reaches rail 0's
// NIC over PCIe, so the send leaves through rail 0 without touching GPU 0's NVLink rx. Each GPU
// on its own switch (the default here, a rail per GPU): PXN, as at level 2.
TEST(PxnLevel, AtLevelOneASendUsesTheNicOnItsPcieSwitchDirectly) {
  const std::string one = std::string(kPerGpu) + "  nccl: {p2p_pxn_level: 1}\n";
  const std::string shared = one + "  pci_switch_gpus: 2\n";
  LinkMap map;
  const TimelineFlows flows = test::fourStageFlows(shared, map);
  const DeviceLinks &s0 = map.devices[0][0], &s2 = map.devices[0][2];
  EXPECT_EQ(s0.pci_rails, 2);  // both rails of the node under its one switch
  EXPECT_EQ(test::usesOf(test::firstSendOf(flows, 1)), (Uses{{s0.nic_tx, 1}, {s2.nic_rx, 1}}));
  EXPECT_DOUBLE_EQ(bytesOn(shared, "rank 0 nvlink rx"), 4096);
  EXPECT_DOUBLE_EQ(bytesOn(shared, "node 0 nic 0 tx"), 4096);
  EXPECT_DOUBLE_EQ(bytesOn(shared, "node 0 nic 1 tx"), 0);

  LinkMap pxn_map;
  const TimelineFlows pxn = test::fourStageFlows(one, pxn_map);
  const DeviceLinks &p0 = pxn_map.devices[0][0], &p1 = pxn_map.devices[0][1],
                    &p2 = pxn_map.devices[0][2];
  EXPECT_EQ(test::usesOf(test::firstSendOf(pxn, 1)),
            (Uses{{p0.nic_tx, 1}, {p2.nic_rx, 1}, {p1.nvlink_tx, 1}, {p0.nvlink_rx, 1}}));
  EXPECT_DOUBLE_EQ(bytesOn(one, "rank 0 nvlink rx"), 8192);
}

// With PXN disabled on rail-optimised 2:1 leaves of 4 nodes the cross-rail send leaves through
// its own rail 1 and goes up the leaf to reach rail 0 (as without an NVSwitch, rail_test.cpp);
// with PXN it stays on rail 0's switch: no uplink.
TEST(PxnLevel, WithPxnDisabledACrossRailSendGoesUpARailOptimisedLeaf) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  LinkMap map;
  const TimelineFlows flows =
      test::fourStageFlows(std::string(kPerGpu) + "  nccl: {pxn_disable: 1}\n" + leaf, map);
  const DeviceLinks &s1 = map.devices[0][1], &s2 = map.devices[0][2];
  EXPECT_EQ(test::usesOf(test::firstSendOf(flows, 1)),
            (Uses{{s1.nic_tx, 1}, {s2.nic_rx, 1}, {s1.uplink_tx[0], 1}, {s2.uplink_rx[0], 1}}));
  LinkMap pxn_map;
  const TimelineFlows pxn = test::fourStageFlows(std::string(kPerGpu) + leaf, pxn_map);
  for (const LinkUse& u : test::firstSendOf(pxn, 1).uses) {
    EXPECT_NE(pxn_map.resources[u.resource].kind, LinkResource::kUplink);
  }
}

// An all-to-all's shares per level, by hand. 8 ranks over 2 nodes of 4 GPUs on 4 rails: of what a
// GPU sends, 3/7 to its own node's peers (NVLink), 4/7 across nodes, 3/4 of that to peers on
// another rail. Level 2: all of those over NVLink first, 3/7 + 3/7 = 6/7. Level 0: NVLink 3/7,
// the 3/7 leave through its own rail for another (up a rail-optimised leaf). Level 1 with two
// GPUs a switch: one of the three other rails is under the sender's switch (direct over PCIe),
// 2/4 of the 4/7 detour: NVLink 3/7 + 2/7 = 5/7; without NVLink those 2/7 leave through its own
// rail instead.
TEST(PxnLevel, AnAllToAllsRoutesFollowTheLevel) {
  const DeviceLinks d = test::handDevice(4);
  const Placement p{8, 2, 4};
  auto shares = [&](const std::string& topology, int pci_rails) {
    DeviceLinks e = d;
    e.pci_rails = pci_rails;
    const AlltoallShares s = alltoallShares(railCluster(4, 4, topology).topology, e, p);
    return std::pair{s.nvlink, s.up_rail_tier};
  };
  auto near = [](std::pair<double, double> got, double nvlink, double up) {
    EXPECT_NEAR(got.first, nvlink, 1e-12);
    EXPECT_NEAR(got.second, up, 1e-12);
  };
  near(shares(kPerGpu, 1), 6.0 / 7, 0);
  near(shares(std::string(kPerGpu) + "  nccl: {pxn_disable: 1}\n", 1), 3.0 / 7, 3.0 / 7);
  near(shares(std::string(kPerGpu) + "  nccl: {p2p_pxn_level: 1}\n", 2), 5.0 / 7, 0);
  near(shares(std::string(kPerGpu) + "  nccl: {p2p_pxn_level: 1}\n", 1), 6.0 / 7, 0);
  near(shares("  nic_affinity: per_gpu\n  nccl: {p2p_pxn_level: 1}\n", 2), 3.0 / 7, 2.0 / 7);
  // Pooled NICs: no rails, nothing changes with the level.
  DeviceLinks pooled = d;
  pooled.rail = -1;
  pooled.rails = 1;
  EXPECT_NEAR(
      alltoallShares(railCluster(4, 4, "  nvswitch: true\n  nccl: {pxn_disable: 1}\n").topology,
                     pooled, p)
          .nvlink,
      3.0 / 7, 1e-12);
}

// The all-to-all of rail_test.cpp (4 ranks over 2 nodes of 2 GPUs, 2 rails, 3000 bytes in 10 us
// alone: 300 bytes/us) on rail-optimised 2:1 leaves of 4 nodes, beside a flow B of 500 bytes in
// 10 us (50 bytes/us) on its node's rail-0 leaf uplink share (50 bytes/us, raised to 100 by the
// all-to-all's own 1/3 x 300 alone: link_sharing.h). With PXN the cross-node bytes stay on their
// rails: both take 10 us. PXN disabled: the third sent to the peer on the other rail leaves
// through its own rail and crosses the uplink. Max-min: both rise to 50, where B stops (its
// demand; 50/3 + 50 < 100); the all-to-all rises to x/3 + 50 = 100, x = 150, half its demand, until
// B ends at 10 (1500 bytes by then); its last 1500 alone at 300 take 5 us: it ends at 15. Its
// NVLink carries only its own node's third (1/3, was 2/3).
TEST(PxnLevel, WithPxnDisabledAnAllToAllCrossesTheRailOptimisedLeaf) {
  const std::string leaf =
      "  tiers:\n    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n";
  DeviceLinks d = test::handDevice(2);
  d.uplink_tx = {4};  // the leaf's uplink share
  d.uplink_rx = {5};
  const Event a2a = makeCommunication(EventKind::kAllToAll, 4000, Placement{4, 2, 2}, DType::kFp16);
  const std::vector<double> caps{1e9, 1e9, 1e9, 1e9, 50, 1e9};
  const SharedFlow off = inTaskFlow(
      railCluster(2, 2, std::string(kPerGpu) + "  nccl: {pxn_disable: 1}\n" + leaf).topology, d,
      a2a, 0, 10, /*cluster=*/nullptr);
  EXPECT_EQ(test::usesOf(off), (Uses{{0, 1.0f / 3},
                                     {1, 1.0f / 3},
                                     {2, 2.0f / 3},
                                     {3, 2.0f / 3},
                                     {4, 1.0f / 3},
                                     {5, 1.0f / 3}}));
  const SharedFlow b{0, 10, 500, {{4, 1}}};
  const SharingResult r = shareLinks(std::vector<SharedFlow>{off, b}, caps);
  EXPECT_NEAR(r.end_us[0], 15, 1e-6);
  EXPECT_NEAR(r.end_us[1], 10, 1e-6);
  const SharedFlow on =
      inTaskFlow(railCluster(2, 2, std::string(kPerGpu) + leaf).topology, d, a2a, 0, 10, nullptr);
  EXPECT_EQ(test::usesOf(on), (Uses{{0, 2.0f / 3}, {1, 2.0f / 3}, {2, 2.0f / 3}, {3, 2.0f / 3}}));
  const SharingResult q = shareLinks(std::vector<SharedFlow>{on, b}, caps);
  EXPECT_NEAR(q.end_us[0], 10, 1e-9);
  EXPECT_NEAR(q.end_us[1], 10, 1e-9);
}

}  // namespace
}  // namespace evsim

// GPU-NIC affinity and rail-optimised fabrics (config/network_topology.h, modeler/link_map.h), and
// flows sharing an oversubscribed uplink over time, traced by hand (modeler/network/link_sharing.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/in_task_flows.h"
#include "modeler/link_flows.h"
#include "modeler/link_usage.h"
#include "modeler/network/link_sharing.h"
#include "modeler/simulation.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"
#include "support/bucket_and_send.h"
#include "support/rail_cluster.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::railCluster;
using test::topologyError;

TEST(Rails, AffinityAndRailKeysParseAndOldFilesStayPooled) {
  // No key: pooled, as before; and a file without `topology:` too.
  EXPECT_EQ(railCluster(8, 8, "").topology.nic_affinity, NicAffinity::kPooled);
  EXPECT_EQ(test::cluster(8).topology.nic_affinity, NicAffinity::kPooled);
  EXPECT_FALSE(railCluster(8, 8, "").topology.railOptimized());

  const ClusterConfig c = railCluster(
      8, 8,
      "  nic_affinity: per_gpu\n  tiers:\n    - {name: su, nodes: 4, rail_optimized: true}\n"
      "    - {name: spine, nodes: 64, oversubscription: 2}\n");
  EXPECT_TRUE(c.topology.perGpuNics());
  EXPECT_TRUE(c.topology.railOptimized());
  EXPECT_FALSE(c.topology.tiers[1].rail_optimized);
  // 8 NICs of 1.25 GB/s on 8 GPUs: GPU g on rail g, 1.25 GB/s each.
  EXPECT_EQ(c.topology.rails(8), 8);
  EXPECT_EQ(c.topology.railOf(5, 8), 5);
  EXPECT_DOUBLE_EQ(c.topology.railBandwidthGbS(8), 1.25);
  // p5's shape: 32 NICs on 8 GPUs, four a GPU: rail g is NICs 4g .. 4g+3, 4 x 0.3125 GB/s.
  const ClusterConfig p5 = railCluster(8, 32, "  nic_affinity: per_gpu\n");
  EXPECT_EQ(p5.topology.rails(8), 8);
  EXPECT_EQ(p5.topology.railOf(3, 8), 3);
  EXPECT_DOUBLE_EQ(p5.topology.railBandwidthGbS(8), 1.25);
  // 4 NICs on 8 GPUs: GPUs 2i and 2i+1 share NIC i (2.5 GB/s).
  const ClusterConfig half = railCluster(8, 4, "  nic_affinity: per_gpu\n");
  EXPECT_EQ(half.topology.rails(8), 4);
  EXPECT_EQ(half.topology.railOf(5, 8), 2);
  EXPECT_DOUBLE_EQ(half.topology.railBandwidthGbS(8), 2.5);
}

TEST(Rails, BadAffinityOrRailIsOneClearLine) {
  auto has = [](const std::string& what, const std::string& part) {
    EXPECT_NE(what.find(part), std::string::npos) << what;
  };
  has(topologyError(8, 8, "  nic_affinity: nearest\n"), "must be pooled or per_gpu");
  has(topologyError(8, 6, "  nic_affinity: per_gpu\n"), "6 NICs on 8 GPUs");
  has(topologyError(8, 8, "  tiers:\n    - {name: su, nodes: 4, rail_optimized: true}\n"),
      "needs topology.nic_affinity: per_gpu");
  has(topologyError(8, 8,
                    "  nic_affinity: per_gpu\n  tiers:\n    - {name: leaf, nodes: 4}\n"
                    "    - {name: su, nodes: 32, rail_optimized: true}\n"),
      "only the bottom tier");
}

// Two transfers out of one node cross its share of a 2:1 leaf uplink (50 bytes/us; the NIC's
// 100 is not the bottleneck). A: 1000 bytes from 0, 20 us alone (uplink-bound). B: 1000 bytes from
// 8. Traced: 0-8 A alone at 50 (400 bytes); from 8 both at 25 (max-min: the uplink is the only
// full resource, equal split); A's 600 bytes left take 24 us: A ends at 32 (12 us late). B has
// 600 bytes by 32, its last 400 alone at 50 take 8 us: B ends at 40 (alone: 8 + 20 = 28).
TEST(Rails, TwoTransfersOverlapPartlyOnAnOversubscribedUplink) {
  const std::vector<double> caps{100, 50};  // nic tx, leaf uplink tx
  const std::vector<SharedFlow> flows{SharedFlow{0, 20, 1000, {{0, 1}, {1, 1}}},
                                      SharedFlow{8, 20, 1000, {{0, 1}, {1, 1}}}};
  const SharingResult r = shareLinks(flows, caps, /*record_load=*/true);
  EXPECT_NEAR(r.end_us[0], 32, 1e-9);
  EXPECT_NEAR(r.end_us[1], 40, 1e-9);
  // The uplink is full from 0 to 40: 2,000 bytes at 50.
  double bytes = 0;
  for (const LoadSegment& s : r.load[1]) {
    EXPECT_NEAR(s.bytes_per_us, 50, 1e-9);
    bytes += (s.end_us - s.start_us) * s.bytes_per_us;
  }
  EXPECT_NEAR(bytes, 2000, 1e-6);
  EXPECT_NEAR(r.load[1].back().end_us, 40, 1e-9);
  // Without the oversubscription (uplink 100) both fit the NIC at 50 each: no stretch.
  const std::vector<double> full{100, 100};
  const SharingResult f = shareLinks(flows, full);
  EXPECT_NEAR(f.end_us[0], 20, 1e-9);
  EXPECT_NEAR(f.end_us[1], 28, 1e-9);
}

// Four flows, three bottlenecks (max-min, not an equal split). NIC 100 bytes/us (resource 0), a
// 2:1 uplink share of 40 (resource 1). A and B cross both, each 400 bytes in 10 us alone (40/us);
// C only the NIC, 1000 bytes in 10 us (100/us); D only the NIC, 100 bytes in 10 us (10/us). All
// start at 0. Progressive filling: at level 10 D reaches its demand (frozen at 10); at 20 the
// uplink is full (A + B = 40): A, B frozen at 20; C rises alone on the NIC's rest, 100 - 10 - 40 =
// 50. (An equal split of the NIC would give 25 each.) D: 100 bytes at 10, ends at 10 as alone.
// Then C gets 100 - 40 = 60: 500 bytes by 10, 500 more at 60 take 8.333 us, C ends at 18.333.
// A and B stay uplink-bound at 20 throughout: 400 bytes end at 20.
TEST(Rails, ThreeBottlenecksShareMaxMinNotEqually) {
  const std::vector<double> caps{100, 40};
  const std::vector<SharedFlow> flows{
      SharedFlow{0, 10, 400, {{0, 1}, {1, 1}}},  // A
      SharedFlow{0, 10, 400, {{0, 1}, {1, 1}}},  // B
      SharedFlow{0, 10, 1000, {{0, 1}}},         // C
      SharedFlow{0, 10, 100, {{0, 1}}},          // D
  };
  const SharingResult r = shareLinks(flows, caps, /*record_load=*/true);
  EXPECT_NEAR(r.end_us[0], 20, 1e-9);
  EXPECT_NEAR(r.end_us[1], 20, 1e-9);
  EXPECT_NEAR(r.end_us[2], 10 + 500.0 / 60, 1e-9);
  EXPECT_NEAR(r.end_us[3], 10, 1e-9);
  // The NIC: 100 (full) until C ends at 18.333, then A + B = 40 until 20.
  ASSERT_FALSE(r.load[0].empty());
  EXPECT_NEAR(r.load[0].front().bytes_per_us, 100, 1e-9);
  EXPECT_NEAR(r.load[0].back().bytes_per_us, 40, 1e-9);
  EXPECT_NEAR(r.load[0].back().start_us, 10 + 500.0 / 60, 1e-9);
}

// The same through the timing engine: 1M2P2D on four nodes of one GPU, DAPPLE, one micro-batch,
// DP buckets overlapped; the job scattered over leaves of 2 nodes whose uplinks are 2:1
// oversubscribed (each node's share: 10 / 2 = 5 GB/s = 5e3 bytes/us; its NIC 1e4). Every
// transfer is given its time at the uplink's rate, so alone each fills its uplink share and half
// its NIC. Stage 1 (node 2) runs F at [10 + tf, 20 + tf], B at [20 + tf, 40 + tf]; its bucket is
// ready 5 us into B, at 25 + tf, and runs alone at the full uplink share for 15 us; at 40 + tf B's
// gradient send to stage 0 starts on the same uplink: both at half while the send lasts (2 tb,
// the bucket outlasts it), then the bucket alone again: it ends tb late, at 25 + tf + ta + tb, and
// stage 0's B starts at 40 + tf + 2 tb. Non-blocking leaves (no uplink resource), the NIC holds
// both (5e3 + 5e3 = 1e4): nothing is stretched.
TEST(Rails, ABucketAndASendOverlapPartlyOnAnOversubscribedLeafUplink) {
  auto planOn = [](double oversubscription) {
    Strategy strategy = Strategy::of(1, 2, 2, 1, 2);
    strategy.dp_overlap = true;
    char tier[96];
    std::snprintf(tier, sizeof tier,
                  "  placement: scattered\n  tiers:\n    - {name: leaf, nodes: 2, "
                  "oversubscription: %g}\n",
                  oversubscription);
    return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                              railCluster(1, 1, tier), strategy);
  };
  IterationPlan plan = planOn(2);
  ASSERT_EQ(plan.pipelines.size(), 1u);
  const double uplink = 5e3;  // bytes/us
  const test::BucketAndSend setup = test::bucketAndSendInput(plan, uplink);
  const double tb = setup.tb;
  const std::vector<double>& ta = setup.ta;
  const TimingInput& in = setup.in;
  ASSERT_EQ(ta.size(), 2u);
  ASSERT_GT(ta[1], 15 + tb);  // the bucket outlasts the send: alone, both, alone again

  TimingInput shared_in = in;
  IterationTimeline shared = computeTimeline(shared_in);
  ASSERT_TRUE(shareLinksOverTime(plan, {}, {}, shared_in, shared));
  test::expectSendSharesTheBucketHalfway(shared, setup);

  const IterationPlan open = planOn(1);
  TimingInput open_in = in;
  IterationTimeline alone = computeTimeline(open_in);
  EXPECT_FALSE(shareLinksOverTime(open, {}, {}, open_in, alone));
  EXPECT_NEAR(alone.pipelines[0].stages[1].tasks[1].send().duration(), tb, 1e-9);
}

// Where each device's NIC traffic goes: test::fourStageFlows' 1M4P1D on two nodes of two GPUs
// (two NICs of 5 GB/s), whose send from stage 1 (node 0, GPU 1) to stage 2 (node 1, GPU 0)
// crosses rails 1 -> 0.
TEST(Rails, PerGpuNicsAndPxnPickTheRailOfTheReceiver) {
  using test::Uses;
  {  // pooled: the node's NICs, 10 GB/s
    LinkMap map;
    const TimelineFlows flows = test::fourStageFlows("  nvswitch: true\n", map);
    const DeviceLinks &s1 = map.devices[0][1], &s2 = map.devices[0][2];
    EXPECT_EQ(s1.rail, -1);
    EXPECT_DOUBLE_EQ(map.resources[s1.nic_tx].capacity_bytes_per_us, 1e4);
    EXPECT_EQ(linkName(NetworkTopology{}, map.resources[s1.nic_tx]), "node 0 nic tx");
    EXPECT_EQ(test::usesOf(test::firstSendOf(flows, 1)), (Uses{{s1.nic_tx, 1}, {s2.nic_rx, 1}}));
  }
  {  // per GPU with an NVSwitch: PXN over stage 1's NVLink into GPU 0 (stage 0, a rank of the
     // pipeline's communicator), out through rail 0; received through stage 2's own rail 0, no
     // NVLink hop on node 1 (NCCL has no PXN on the receive side).
    LinkMap map;
    const TimelineFlows flows =
        test::fourStageFlows("  nvswitch: true\n  nic_affinity: per_gpu\n", map);
    const DeviceLinks &s0 = map.devices[0][0], &s1 = map.devices[0][1], &s2 = map.devices[0][2];
    EXPECT_EQ(s0.rail, 0);
    EXPECT_EQ(s1.rail, 1);
    EXPECT_EQ(s2.rail, 0);
    EXPECT_FLOAT_EQ(s1.nic_copies, 1);
    EXPECT_DOUBLE_EQ(map.resources[s1.nic_tx].capacity_bytes_per_us, 5e3);
    EXPECT_EQ(linkName(NetworkTopology{}, map.resources[s1.nic_tx]), "node 0 nic 1 tx");
    EXPECT_EQ(map.nicsOf(0, 0).nic_tx, s0.nic_tx);  // stage 0's rail, which the send borrows
    EXPECT_EQ(test::usesOf(test::firstSendOf(flows, 1)),
              (Uses{{s0.nic_tx, 1}, {s2.nic_rx, 1}, {s1.nvlink_tx, 1}, {s0.nvlink_rx, 1}}));
    // The second hop loads GPU 0's NVLink rx (1e5 bytes/us). A send of 1000 bytes in 0.2 us
    // (5e3 bytes/us, its rail's rate) and, into GPU 0 at the same time, 2e4 bytes in 0.2 us
    // (1e5: the whole port). Max-min: both rise to 5e3, where the send reaches its demand; the
    // other takes the port's rest, 1e5 - 5e3 = 9.5e4, until the send ends at 0.2 (its rail is its
    // bottleneck): 1.9e4 bytes by then, the last 1e3 alone at 1e5 take 0.01 us: it ends at 0.21
    // (0.2 without the second hop).
    const SharingResult r =
        test::sendBesideNvlinkRx(test::firstSendOf(flows, 1), s0.nvlink_rx, map);
    EXPECT_NEAR(r.end_us[0], 0.2, 1e-9);
    EXPECT_NEAR(r.end_us[1], 0.21, 1e-9);
    // Stage 2's gradient back to stage 1 (node 1 GPU 0 -> node 0 GPU 1): PXN on node 1 through
    // GPU 1 (stage 3, rank 3), whose NVLink rx is stage 3's resource; rail 1 of node 1, into
    // stage 1's rail 1.
    const DeviceLinks& s3 = map.devices[0][3];
    const SendRoute& back = map.sends[0][2 * 1 + 1];
    EXPECT_TRUE(back.pxn());
    EXPECT_EQ(back.via_nvlink_rx, s3.nvlink_rx);
    EXPECT_EQ(map.nicsOf(back.nic_node, back.nic_rail).nic_tx, s3.nic_tx);
  }
  {  // per GPU without an NVSwitch, rail-optimised 2:1 leaves of 4 nodes: the send leaves through
     // its own rail 1 and must go up the leaf to reach rail 0, though both nodes share a leaf
    LinkMap map;
    const TimelineFlows flows = test::fourStageFlows(
        "  nic_affinity: per_gpu\n  tiers:\n"
        "    - {name: leaf, nodes: 4, oversubscription: 2, rail_optimized: true}\n",
        map);
    const DeviceLinks &s1 = map.devices[0][1], &s2 = map.devices[0][2];
    EXPECT_DOUBLE_EQ(map.resources[s1.uplink_tx[0]].capacity_bytes_per_us, 2.5e3);
    EXPECT_EQ(test::usesOf(test::firstSendOf(flows, 1)),
              (Uses{{s1.nic_tx, 1}, {s2.nic_rx, 1}, {s1.uplink_tx[0], 1}, {s2.uplink_rx[0], 1}}));
  }
}

// Affinity decides who collides. 1M4P3D on three nodes of four GPUs (four NICs of 2.5 GB/s: one
// rail each, 2.5e3 bytes/us; NVSwitch): rank = dp + 3 pp, so stage 1 is ranks 3 (node 0, GPU 3),
// 4 and 5 (node 1, GPUs 0, 1) and stage 2 ranks 6, 7 (node 1, GPUs 2, 3) and 8: every replica sits
// differently, three pipeline classes, and every GPU is a representative of its own.
//
// (a) Affinity collides where pooled NICs do not: rank 4's gradient send to rank 1 (node 0, GPU 1)
// crosses rails 0 -> 1. PXN would need node 1's GPU 1 (rank 5) in the send's communicator, the
// pipeline group of replica 1 (ranks 1, 4, 7, 10); rank 5 is replica 2's, so NCCL finds no GPU
// of the communicator with the receiver's index and the send leaves through rank 4's own rail 0
// (no NVLink hop), while rank 4's DP ring (group 3, 2 ranks on the node: 1/2 of it on each of its
// ranks' rails) runs. Both from 0, 1000 bytes each: the send alone at its GPU's share 2.5e3
// (0.4 us), the ring alone at the group's 2 x 2.5e3 (0.2 us), loading rank 4's rail 2.5e3 x 1/2.
// Per GPU, on rail 0: send rate x + ring rate y / 2 <= 2.5e3; max-min fills both to 5000/3 (below
// both demands): the send's 1000 bytes end at 0.6, and so do the ring's. Pooled (one 1e4
// resource): 2.5e3 + 5e3 fits: 0.4 and 0.2.
// (b) Pooled NICs collide where affinity does not: the DP rings of ranks 4, 5 (stage 1) and 6, 7
// (stage 2) at once, each 1000 bytes in 0.2 us. Pooled, each representative loads the node's NICs
// with one ring (max(1, copies / ranks on the node) = 1), 4 x 5e3 on 1e4: each at 2.5e3, 0.4 us;
// per GPU each ring's half on its own rail fills it exactly: 0.2 us (the two groups' traffic is
// two rings' worth, 1e4: it fits, so affinity is the right answer here).
TEST(Rails, AffinityCollidesWherePooledDoesNotAndViceVersa) {
  for (const bool per_gpu : {true, false}) {
    SCOPED_TRACE(per_gpu);
    const IterationPlan plan = buildIterationPlan(
        test::model(64, 4, 256, 32, 512, 4, "fp16"),
        railCluster(4, 4,
                    std::string("  nvswitch: true\n") +
                        (per_gpu ? "  nic_affinity: per_gpu\n" : "")),
        Strategy::of(1, 4, 3, 1, 3));
    ASSERT_EQ(plan.pipelines.size(), 3u);
    std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
    const Simulation sim = simulate(plan, costs);
    const LinkMap map = linkMap(sim.plan);
    const TimelineFlows timeline =
        timelineFlows(sim.plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
    // The representative of GPU `local` of node 1 at device stage `stage` (rank 4 + local, DP
    // index 4 + local - 3 stage), and its class.
    auto at = [&](int stage, int local) {
      for (size_t k = 0; k < map.devices.size(); ++k) {
        const DeviceLinks& d = map.devices[k][stage];
        if (d.node == 1 && plan.pipelines[k].replicas.front() == 4 + local - 3 * stage) {
          if (per_gpu) {
            EXPECT_EQ(d.rail, local);
          }
          return std::pair{static_cast<int>(k), &d};
        }
      }
      ADD_FAILURE() << "no device at stage " << stage << " GPU " << local;
      return std::pair{0, &map.devices[0][stage]};
    };
    auto ring = [&](int stage, int local) {
      const Placement& p = plan.events[plan.stages[stage].gradSyncEvent()].event.placement;
      EXPECT_EQ(p.group_size, 3);
      EXPECT_EQ(p.nodes, 2);
      EXPECT_EQ(p.ranks_per_node, 2);
      return collectiveFlow(plan.cluster.topology, *at(stage, local).second, p, 1000, 0, 0.2,
                            /*tree=*/false);
    };
    // (a) rank 4's send across nodes (its other send, to rank 7, stays on NVLink).
    const int k4 = at(1, 0).first;
    SharedFlow send;
    for (size_t i = 0; i < timeline.size(); ++i) {
      const TimelineFlows::Origin o = timeline.origin(i);
      if (o.kind != FlowKind::kPp || o.pipeline != k4 || o.stage != 1) continue;
      const SharedFlow f = timeline.flow(i);
      for (const LinkUse& u : f.uses) {
        if (map.resources[u.resource].kind == LinkResource::kNic) send = f;
      }
    }
    ASSERT_FALSE(send.uses.empty());
    send.start_us = 0;
    send.duration_us = 0.4;
    send.bytes = 1000;
    const SharedFlow ring4 = ring(1, 0);
    if (per_gpu) {
      EXPECT_EQ(send.uses.begin()->resource, ring4.uses.begin()[2].resource);
    }
    for (const LinkUse& u : send.uses) {
      EXPECT_NE(map.resources[u.resource].kind, LinkResource::kNvlink);  // no PXN
    }
    const std::vector<SharedFlow> a{send, ring4};
    const SharingResult ra = shareLinks(a, map.capacities());
    EXPECT_NEAR(ra.end_us[0], per_gpu ? 0.6 : 0.4, 1e-9);
    EXPECT_NEAR(ra.end_us[1], per_gpu ? 0.6 : 0.2, 1e-9);
    // (b) four rings of two groups on node 1.
    const std::vector<SharedFlow> b{ring(1, 0), ring(1, 1), ring(2, 2), ring(2, 3)};
    const SharingResult rb = shareLinks(b, map.capacities());
    ASSERT_EQ(rb.end_us.size(), b.size());
    for (size_t f = 0; f < b.size(); ++f) EXPECT_NEAR(rb.end_us[f], per_gpu ? 0.2 : 0.4, 1e-9);
  }
}

// PXN's intermediate (NCCL's search.cc, P2P_PXN_LEVEL 2): the first GPU of the communicator on the
// receiver's rail, never the sender itself, and none when the GPU with the receiver's index is not
// in the communicator.
TEST(Rails, PxnIntermediateFollowsNccl) {
  const NetworkTopology eight = railCluster(8, 8, "  nvswitch: true\n  nic_affinity: per_gpu\n")
                                    .topology;
  auto all = [](int) { return true; };
  EXPECT_EQ(pxnIntermediate(eight, 8, 3, 5, all), 5);    // rail 5's GPU
  EXPECT_EQ(pxnIntermediate(eight, 8, 5, 5, all), -1);   // same rail: its own NIC
  EXPECT_EQ(pxnIntermediate(eight, 8, 3, 5, [](int g) { return g != 5; }), -1);
  // 4 NICs on 8 GPUs: GPUs 4 and 5 share rail 2, driven by GPU 4 (the first that uses it); GPU 5
  // sending to a peer on rail 2 still goes through GPU 4 (NCCL aggregates a NIC's sends there).
  const NetworkTopology half = railCluster(8, 4, "  nvswitch: true\n  nic_affinity: per_gpu\n")
                                   .topology;
  EXPECT_EQ(pxnIntermediate(half, 8, 0, 5, all), 4);
  EXPECT_EQ(pxnIntermediate(half, 8, 5, 4, all), 4);
  EXPECT_EQ(pxnIntermediate(half, 8, 4, 5, all), -1);
  // GPU 4 not in the communicator: GPU 5 drives rail 2.
  EXPECT_EQ(pxnIntermediate(half, 8, 0, 5, [](int g) { return g != 4; }), 5);
  // No NVSwitch or pooled NICs: never.
  EXPECT_EQ(pxnIntermediate(railCluster(8, 8, "  nic_affinity: per_gpu\n").topology, 8, 3, 5, all),
            -1);
  EXPECT_EQ(pxnIntermediate(railCluster(8, 8, "  nvswitch: true\n").topology, 8, 3, 5, all), -1);
}

// An all-to-all's NVLink load with PXN, by hand. 4 ranks over 2 nodes of 2 GPUs, 2 rails a node
// (per GPU, NVSwitch), 3000 bytes (linkBytes: what a GPU sends to its 3 peers) in 10 us alone
// (300 bytes/us). Its own node's peer takes 1/3 of the bytes over NVLink; the other 2/3 go to the
// 2 peers on node 1, one on each rail: the one on the other rail goes over NVLink first, through
// the local GPU on that rail: 1/3 more. NVLink share 2/3 each way (1/3 without PXN), NIC 2/3.
// Beside it on the same NVLink tx port (250 bytes/us) a flow of 1000 bytes in 10 us (100/us).
// With PXN: 2/3 x 300 + 100 = 300 > 250: max-min raises both to 100, where the small flow stops
// (its demand; load 2/3 x 100 + 100 = 167); the all-to-all rises alone to (250 - 100) / (2/3) =
// 225 bytes/us until the small flow ends at 10 (2250 bytes by then); its last 750 bytes alone at
// 300 take 2.5 us: it ends at 12.5. Without the detour 1/3 x 300 + 100 = 200 fits: 10 us.
TEST(Rails, AllToAllDetoursOverNvlinkWithPxn) {
  const NetworkTopology per_gpu = railCluster(2, 2, "  nvswitch: true\n  nic_affinity: per_gpu\n")
                                      .topology;
  const DeviceLinks d = test::handDevice(2);
  const Event a2a = makeCommunication(EventKind::kAllToAll, 4000, Placement{4, 2, 2}, DType::kFp16);
  EXPECT_DOUBLE_EQ(linkBytes(a2a), 3000);
  const SharedFlow f = inTaskFlow(per_gpu, d, a2a, 0, 10, /*cluster=*/nullptr);  // all-to-all
  using Uses = std::vector<std::pair<int, float>>;
  Uses got;
  for (const LinkUse& u : f.uses) got.emplace_back(u.resource, u.copies);
  EXPECT_EQ(got, (Uses{{0, 2.0f / 3}, {1, 2.0f / 3}, {2, 2.0f / 3}, {3, 2.0f / 3}}));
  const std::vector<double> caps{250, 1e9, 1e9, 1e9};
  const SharedFlow small{0, 10, 1000, {{0, 1}}};
  const SharingResult r = shareLinks(std::vector<SharedFlow>{f, small}, caps);
  EXPECT_NEAR(r.end_us[0], 10 + 750.0 / 300, 1e-6);
  EXPECT_NEAR(r.end_us[1], 10, 1e-9);
  // Pooled NICs (no rails, no PXN): the own node's third only, and both fit.
  DeviceLinks pooled = d;
  pooled.rail = -1;
  pooled.rails = 1;
  const SharedFlow g = inTaskFlow(railCluster(2, 2, "  nvswitch: true\n").topology, pooled, a2a,
                                  0, 10, nullptr);
  EXPECT_FLOAT_EQ(g.uses.begin()->copies, 1.0f / 3);
  const SharingResult q = shareLinks(std::vector<SharedFlow>{g, small}, caps);
  EXPECT_NEAR(q.end_us[0], 10, 1e-9);
  // 8 ranks over 2 nodes of 4 on 4 rails: own node 3/7, cross 4/7 of which 3/4 detour: 6/7.
  EXPECT_NEAR(alltoallNvlinkShare(railCluster(4, 4, "  nvswitch: true\n  nic_affinity: per_gpu\n")
                                      .topology,
                                  DeviceLinks{{}, 0, 0, 0, 4}, Placement{8, 2, 4}),
              3.0 / 7 + 4.0 / 7 * 3 / 4, 1e-12);
}

// The link report's totals (LinkDetail::kTotals: read from the timeline where no two flows meet,
// link_usage.cpp) are the full report's numbers bit for bit where PXN routes a send through the
// proxy GPU's NVLink rx and NIC: 1M4P on two-GPU nodes with per-GPU NICs and an NVSwitch (stage 1
// sends to stage 2 across rails), alone (m = 8) and beside DP buckets (D = 2, m = 16).
TEST(Rails, LinkTotalsAreTheFullReportsWithPxn) {
  for (const int dp : {1, 2}) {
    SCOPED_TRACE(dp);
    Strategy strategy = Strategy::of(1, 4, dp, 1, 8 * dp);
    strategy.dp_overlap = dp > 1;
    strategy.dp_bucket_bytes = 40000;
    const ClusterConfig cluster = railCluster(2, 2, "  nvswitch: true\n  nic_affinity: per_gpu\n");
    const IterationPlan plan =
        buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"), cluster, strategy);
    std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
    const Simulation sim = simulate(plan, costs);
    const LinkUsage full = linkUsage(sim, LinkDetail::kSegments);
    const LinkUsage totals = linkUsage(sim, LinkDetail::kTotals);
    ASSERT_EQ(totals.links.size(), full.links.size());
    int nvlink_rx = 0;  // the proxy's NVLink rx carries PXN's hop
    for (size_t i = 0; i < full.links.size(); ++i) {
      const LinkLoad &got = totals.links[i], &want = full.links[i];
      EXPECT_EQ(got.name, want.name);
      EXPECT_EQ(got.capacity_bytes_per_us, want.capacity_bytes_per_us) << want.name;
      EXPECT_EQ(got.bytes, want.bytes) << want.name;  // bit for bit
      nvlink_rx += want.name.find("nvlink rx") != std::string::npos;
    }
    EXPECT_GT(nvlink_rx, 0);
  }
}

}  // namespace
}  // namespace evsim

// Links shared over time (modeler/network/link_sharing.h, modeler/link_flows.h): max-min fair
// progressive filling traced by hand, symmetric copies against expanded flows, and the timing
// engine's transfers stretched only where they overlap.
#include "modeler/network/link_sharing.h"

#include <gtest/gtest.h>

#include <sstream>
#include <utility>
#include <vector>

#include "config/model_config.h"
#include "fmt/format.h"
#include "modeler/link_flows.h"
#include "modeler/link_usage.h"
#include "modeler/simulation.h"
#include "modeler/summary_report.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"
#include "support/bucket_and_send.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// One NIC of 100 bytes/us; a flow of 1000 bytes that takes 10 us alone needs all of it.
const std::vector<double> kNic{100};

SharedFlow onNic(double start_us, double duration_us, double bytes, float copies = 1) {
  return SharedFlow{start_us, duration_us, bytes, {{0, copies}}};
}

TEST(LinkSharing, TwoEqualFlowsOnOneNicTakeTwiceAsLongAsOne) {
  const std::vector<SharedFlow> one{onNic(0, 10, 1000)};
  EXPECT_DOUBLE_EQ(shareLinks(one, kNic).end_us[0], 10);
  // Both at 50 bytes/us from 0: 1000 bytes each take 20 us.
  const std::vector<SharedFlow> two{onNic(0, 10, 1000), onNic(0, 10, 1000)};
  const SharingResult r = shareLinks(two, kNic);
  EXPECT_DOUBLE_EQ(r.end_us[0], 20);
  EXPECT_DOUBLE_EQ(r.end_us[1], 20);
}

TEST(LinkSharing, PartialOverlapStretchesOnlyTheOverlappedPart) {
  // A: 0-10 alone. B starts at 5. Traced: 0-5 A alone at 100 (500 bytes left); from 5 both at 50:
  // A's 500 bytes take 10 us, A ends at 15 (5 us later than alone: the 10 us it overlapped ran at
  // half speed). B has 500 bytes by 15, the other 500 alone at 100: B ends at 20.
  const std::vector<SharedFlow> flows{onNic(0, 10, 1000), onNic(5, 10, 1000)};
  const SharingResult r = shareLinks(flows, kNic, /*record_load=*/true);
  EXPECT_DOUBLE_EQ(r.end_us[0], 15);
  EXPECT_DOUBLE_EQ(r.end_us[1], 20);
  // The NIC is full from 0 to 20 (one segment: the load never changes), 2000 bytes.
  ASSERT_EQ(r.load[0].size(), 1u);
  EXPECT_DOUBLE_EQ(r.load[0][0].start_us, 0);
  EXPECT_DOUBLE_EQ(r.load[0][0].end_us, 20);
  EXPECT_DOUBLE_EQ(r.load[0][0].bytes_per_us, 100);
  // Flows apart in time keep their standalone times.
  const std::vector<SharedFlow> apart{onNic(0, 10, 1000), onNic(10, 10, 1000)};
  EXPECT_DOUBLE_EQ(shareLinks(apart, kNic).end_us[1], 20);
}

TEST(LinkSharing, MaxMinFairnessGivesASmallFlowAllItAsks) {
  // A needs 40 bytes/us (400 bytes in 10 us), B 100. The fair level 50 is above A's demand: A gets
  // 40 and ends at 10 as alone; B gets the other 60: 600 bytes by 10, 400 more alone: ends at 14.
  const std::vector<SharedFlow> flows{onNic(0, 10, 400), onNic(0, 10, 1000)};
  const SharingResult r = shareLinks(flows, kNic);
  EXPECT_DOUBLE_EQ(r.end_us[0], 10);
  EXPECT_DOUBLE_EQ(r.end_us[1], 14);
}

TEST(LinkSharing, TheBottleneckResourceDecides) {
  // A crosses the NIC (100) and a 2:1 uplink share (50); B only the NIC. Filling: at level 50 the
  // uplink is full (A's only user) and so is the NIC (50 + 50): both freeze. A is uplink-bound
  // alone too: its 500 bytes end at 10, unchanged. B runs at half its demand until 10 (500 bytes),
  // then alone at 100: ends at 15.
  const std::vector<double> caps{100, 50};
  const std::vector<SharedFlow> flows{SharedFlow{0, 10, 500, {{0, 1}, {1, 1}}},
                                      SharedFlow{0, 10, 1000, {{0, 1}}}};
  const SharingResult r = shareLinks(flows, caps);
  EXPECT_DOUBLE_EQ(r.end_us[0], 10);
  EXPECT_DOUBLE_EQ(r.end_us[1], 15);
}

TEST(LinkSharing, SymmetricCopiesComputedOnceMatchExpandedFlows) {
  // X stands for 2 GPUs' identical flows through one node NIC of 300 bytes/us, beside Y; expanded,
  // X1 and X2 are separate flows. Demands 100 (X) and 150 (Y): level 100 freezes the Xs (load
  // 300 = full at 100 each)... all three at 100: X ends at 10, Y's 1500 bytes: 1000 by 10, then
  // alone at 150: 500 / 150 later.
  const std::vector<double> node{300};
  const std::vector<SharedFlow> once{onNic(0, 10, 1000, 2), onNic(0, 10, 1500)};
  const std::vector<SharedFlow> expanded{onNic(0, 10, 1000), onNic(0, 10, 1000),
                                         onNic(0, 10, 1500)};
  const SharingResult a = shareLinks(once, node);
  const SharingResult b = shareLinks(expanded, node);
  EXPECT_DOUBLE_EQ(a.end_us[0], 10);
  EXPECT_DOUBLE_EQ(b.end_us[0], 10);
  EXPECT_DOUBLE_EQ(b.end_us[1], 10);
  EXPECT_DOUBLE_EQ(a.end_us[1], 10 + 500.0 / 150);
  EXPECT_DOUBLE_EQ(b.end_us[2], a.end_us[1]);
  // Staggered starts too: X (2 copies) from 0, Y from 4 on 200 bytes/us, demands 100 and 100.
  // 0-4: X alone, 2 x 100 = full. From 4 three flows at 200/3: X's 600 bytes left take 9 us (ends
  // 13), Y has 600 by 13, then alone at 100: ends 17.
  const std::vector<double> small{200};
  const SharingResult c =
      shareLinks(std::vector<SharedFlow>{onNic(0, 10, 1000, 2), onNic(4, 10, 1000)}, small);
  const SharingResult d = shareLinks(
      std::vector<SharedFlow>{onNic(0, 10, 1000), onNic(0, 10, 1000), onNic(4, 10, 1000)}, small);
  EXPECT_NEAR(c.end_us[0], 13, 1e-9);
  EXPECT_NEAR(c.end_us[1], 17, 1e-9);
  EXPECT_NEAR(d.end_us[0], c.end_us[0], 1e-9);
  EXPECT_NEAR(d.end_us[1], c.end_us[0], 1e-9);
  EXPECT_NEAR(d.end_us[2], c.end_us[1], 1e-9);
}

TEST(LinkSharing, FlowsEndingTogetherLeaveTheLinkToTheSurvivor) {
  // A NIC of 300 bytes/us; A and B need 100 each (1000 bytes in 10 us), C 300 (3000 bytes). The
  // fair level 100 fills the NIC (3 x 100): all three at 100 until A and B end together at 10. C
  // has 1000 bytes, the other 2000 alone at 300: ends at 10 + 20/3. (Before the fix, B was seeded
  // by A's end and refilled beside C as if still in flight: C ran at 200 and ended at 20.)
  const std::vector<double> nic{300};
  const std::vector<SharedFlow> flows{onNic(0, 10, 1000), onNic(0, 10, 1000), onNic(0, 10, 3000)};
  const SharingResult r = shareLinks(flows, nic, /*record_load=*/true);
  EXPECT_DOUBLE_EQ(r.end_us[0], 10);
  EXPECT_DOUBLE_EQ(r.end_us[1], 10);
  EXPECT_NEAR(r.end_us[2], 10 + 20.0 / 3, 1e-9);
  // The NIC is full throughout: one segment of 300 bytes/us over [0, 10 + 20/3].
  ASSERT_EQ(r.load[0].size(), 1u);
  EXPECT_NEAR(r.load[0][0].end_us, 10 + 20.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(r.load[0][0].bytes_per_us, 300);
}

TEST(LinkSharing, StartOrderDoesNotDependOnTheListOrder) {
  // The same three flows listed in time order and out of it (the start order merges runs of
  // rising start times): A from 0, B and C from 5, one 100 bytes/us NIC, demand 100 each. 0-5: A
  // alone (500 bytes left). From 5 three at 100/3: A's 500 bytes take 15 us (ends 20); B and C
  // then have 500 each left, at 50: 10 us more, both end at 30.
  const std::vector<SharedFlow> sorted{onNic(0, 10, 1000), onNic(5, 10, 1000), onNic(5, 10, 1000)};
  const std::vector<SharedFlow> shuffled{onNic(5, 10, 1000), onNic(0, 10, 1000),
                                         onNic(5, 10, 1000)};
  const SharingResult a = shareLinks(sorted, kNic);
  const SharingResult b = shareLinks(shuffled, kNic);
  EXPECT_NEAR(a.end_us[0], 20, 1e-9);
  EXPECT_NEAR(a.end_us[1], 30, 1e-9);
  EXPECT_NEAR(a.end_us[2], 30, 1e-9);
  EXPECT_NEAR(b.end_us[1], 20, 1e-9);
  EXPECT_NEAR(b.end_us[0], 30, 1e-9);
  EXPECT_NEAR(b.end_us[2], 30, 1e-9);
}

// A task's collectives follow one another (SharedFlow::after): a follower starts when the one
// before it ends plus their standalone gap. A (0-10) and C (0-10) share the NIC from 0, both at 50:
// both end at 20. B, 5 us after A alone (start 15), starts at 20 + 5 = 25, alone: ends at 35.
TEST(LinkSharing, AFollowerStartsItsGapAfterTheFlowItFollows) {
  std::vector<SharedFlow> flows{onNic(0, 10, 1000), onNic(0, 10, 1000), onNic(15, 10, 1000)};
  flows[2].after = 0;
  const SharingResult r = shareLinks(flows, kNic);
  EXPECT_DOUBLE_EQ(r.end_us[0], 20);
  EXPECT_DOUBLE_EQ(r.end_us[1], 20);
  EXPECT_DOUBLE_EQ(r.end_us[2], 35);
  // Alone, a chain keeps its standalone times.
  const std::vector<SharedFlow> alone{flows[0], flows[2]};
  const SharingResult a = shareLinks(alone, kNic);
  EXPECT_DOUBLE_EQ(a.end_us[0], 10);
  EXPECT_DOUBLE_EQ(a.end_us[1], 25);
}

// A queued follower (SharedFlow::queued: --grad-reduce-sync step's reductions on the DP stream)
// starts at the later of its own start and the end of the one it follows, with no gap. A (0-10)
// and C (0-10) share the NIC from 0, both at 50: both end at 20. B queued after A, its own start
// 25 (the queue was idle from 10 to 25): 25, alone, ends at 35 (with the gap rule: 20 + 15 = 35,
// ending at 45). B' with its own start 15: the queue is busy when it comes (A runs until 20), so
// it starts at 20 and ends at 30 (the gap rule gives 25, 35). Alone both keep their times.
TEST(LinkSharing, AQueuedFollowerStartsAtItsOwnStartOrItsPredecessorsEnd) {
  for (const auto& [own_start, start] : {std::pair{25.0, 25.0}, std::pair{15.0, 20.0}}) {
    SCOPED_TRACE(::testing::Message() << "own start " << own_start);
    std::vector<SharedFlow> flows{onNic(0, 10, 1000), onNic(0, 10, 1000),
                                  onNic(own_start, 10, 1000)};
    flows[2].after = 0;
    flows[2].queued = true;
    const SharingResult r = shareLinks(flows, kNic);
    EXPECT_DOUBLE_EQ(r.end_us[0], 20);
    EXPECT_DOUBLE_EQ(r.end_us[1], 20);
    EXPECT_DOUBLE_EQ(r.end_us[2], start + 10);
    const SharingResult a = shareLinks(std::vector<SharedFlow>{flows[0], flows[2]}, kNic);
    EXPECT_DOUBLE_EQ(a.end_us[0], 10);
    EXPECT_DOUBLE_EQ(a.end_us[1], own_start + 10);
  }
}

// A follower delayed past a flow that starts after its own start still shares with it (the
// fast path for lone flows must not take that flow as alone). Two NICs of 100 bytes/us. A (NIC 0,
// 0-10) shares with C (NIC 0, from 5): 5-15 both at 50, A ends at 15, C at 20. B follows A on NIC 1
// (standalone 10-20): it starts at 15. D (NIC 1, from 12, 10 us) runs alone 12-15 (300 bytes),
// then beside B at 50 each: D's last 700 bytes end at 29, B has 700 by then and its last 300 take
// 3 us alone: 32.
TEST(LinkSharing, ADelayedFollowerSharesWithAFlowThatStartedBeforeIt) {
  const std::vector<double> nics{100, 100};
  std::vector<SharedFlow> flows{onNic(0, 10, 1000), onNic(5, 10, 1000),
                                SharedFlow{10, 10, 1000, {{1, 1}}},
                                SharedFlow{12, 10, 1000, {{1, 1}}}};
  flows[2].after = 0;
  const SharingResult r = shareLinks(flows, nics);
  EXPECT_DOUBLE_EQ(r.end_us[0], 15);
  EXPECT_DOUBLE_EQ(r.end_us[1], 20);
  EXPECT_DOUBLE_EQ(r.end_us[2], 32);
  EXPECT_DOUBLE_EQ(r.end_us[3], 29);
}

// A chain of three collectives (a lone task's ring exchanges: each follows the one before, 2 and
// 3 us apart alone) on NIC 0 of 100 bytes/us, each 1000 bytes in 10 us. Alone: 0-10, 12-22, 25-35.
// Beside B (an equal flow on the same NIC from 5), traced by hand: A0 alone 0-5 (500 bytes), then
// A0 and B at 50 each: A0's last 500 take 10 us, A0 ends at 15; B has 500 by then. A1 starts its
// gap after A0's end, at 17; B alone 15-17 at 100 (200 bytes, 300 left). From 17 both at 50: B's
// 300 take 6 us, B ends at 23; A1 has 300 by then, its last 700 alone at 100: ends at 30. A2
// starts 3 us later, at 33, alone: ends at 43. C, alone on NIC 1 from 0, keeps its 0-10.
TEST(LinkSharing, AChainAdvancesToItsNextFlowWhenItsFlowEnds) {
  const std::vector<double> nics{100, 100};
  std::vector<SharedFlow> chain{onNic(0, 10, 1000), onNic(12, 10, 1000), onNic(25, 10, 1000)};
  chain[1].after = 0;
  chain[2].after = 1;
  const SharingResult alone = shareLinks(chain, nics);
  EXPECT_DOUBLE_EQ(alone.end_us[0], 10);
  EXPECT_DOUBLE_EQ(alone.end_us[1], 22);
  EXPECT_DOUBLE_EQ(alone.end_us[2], 35);
  EXPECT_EQ(alone.end_us.moved(), 0u);  // nothing kept for flows that end on time
  std::vector<SharedFlow> flows = chain;
  flows.push_back(onNic(5, 10, 1000));                  // B
  flows.push_back(SharedFlow{0, 10, 1000, {{1, 1}}});  // C
  const SharingResult r = shareLinks(flows, nics, /*record_load=*/true);
  EXPECT_DOUBLE_EQ(r.end_us[0], 15);
  EXPECT_DOUBLE_EQ(r.end_us[1], 30);
  EXPECT_DOUBLE_EQ(r.end_us[2], 43);
  EXPECT_DOUBLE_EQ(r.end_us[3], 23);
  EXPECT_DOUBLE_EQ(r.end_us[4], 10);
  EXPECT_EQ(r.end_us.moved(), 4u);  // A0, A1, A2 and B; C's end is its standalone one
  // NIC 0 is full from 0 until A1 ends at 30 (one segment), idle for A2's gap, full 33-43.
  ASSERT_EQ(r.load[0].size(), 2u);
  EXPECT_DOUBLE_EQ(r.load[0][0].start_us, 0);
  EXPECT_DOUBLE_EQ(r.load[0][0].end_us, 30);
  EXPECT_DOUBLE_EQ(r.load[0][0].bytes_per_us, 100);
  EXPECT_DOUBLE_EQ(r.load[0][1].start_us, 33);
  EXPECT_DOUBLE_EQ(r.load[0][1].end_us, 43);
  EXPECT_DOUBLE_EQ(r.load[0][1].bytes_per_us, 100);
}

// Two chains on one NIC, where a follower must count its own chain's later holds of a resource
// (and only those) against the holds of a waiting follower of another chain. NICs 0-2 of 100
// bytes/us, every flow 1000 bytes in 10 us. Chain B: B0 (NIC 1, from 0) shares NIC 1 with C (from
// 0): both at 50, both end at 20; B1 (NIC 0, own start 10, no gap) starts at 20. Chain A: A0
// (NIC 2, 5-15) alone; A1 (NIC 0, from 15) and A2 (NIC 0, from 25) follow with no gaps. As A1
// starts at 15, NIC 0 is held by A2 (its own chain) and by B1, still waiting: A1 is not alone
// (counting itself among its chain's holds it would look alone and end at 25). Traced: A1 alone
// at 100 15-20 (500 bytes), beside B1 at 50 each from 20: A1 ends at 30, B1 has 500 by then. A2
// starts at 30; B1's last 500 at 50 end at 40, A2 has 500 by then, its last 500 alone: 45.
TEST(LinkSharing, AFollowerCountsOnlyItsOwnChainsLaterHolds) {
  const std::vector<double> nics{100, 100, 100};
  auto on = [](int nic, double start_us) { return SharedFlow{start_us, 10, 1000, {{nic, 1}}}; };
  std::vector<SharedFlow> flows{on(1, 0), on(1, 0), on(0, 10), on(2, 5), on(0, 15), on(0, 25)};
  flows[2].after = 0;  // B1 after B0 (C listed between)
  flows[4].after = 3;  // A1 after A0
  flows[5].after = 4;  // A2 after A1
  const SharingResult r = shareLinks(flows, nics);
  const std::vector<double> ends{20, 20, 40, 15, 30, 45};  // B0, C, B1, A0, A1, A2
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_DOUBLE_EQ(r.end_us[f], ends[f]) << f;
  // Without chain B and C, chain A runs alone on its standalone times: its own later holds of
  // NIC 0 keep none of its flows from running alone.
  const std::vector<SharedFlow> a{on(2, 5), on(0, 15), on(0, 25)};
  std::vector<SharedFlow> chain = a;
  chain[1].after = 0;
  chain[2].after = 1;
  const SharingResult alone = shareLinks(chain, nics);
  for (size_t f = 0; f < chain.size(); ++f) {
    EXPECT_DOUBLE_EQ(alone.end_us[f], chain[f].start_us + 10) << f;
  }
  EXPECT_EQ(alone.end_us.moved(), 0u);
}

// A flow list keeps "follows the flow listed before it" as a bit and other followers aside: both
// read back as SharedFlow::after and as the follower of the flow followed.
TEST(LinkSharing, AFlowListKeepsWhoFollowsWhom) {
  FlowList list;
  const int s = list.addShape(10, 1000, {{0, 1}});
  list.add(0, s);       // 0
  list.add(10, s, 0);   // 1: follows the flow before it
  list.add(0, s);       // 2
  list.add(20, s, 1);   // 3: follows 1, listed apart (a fused task's two chains)
  list.add(10, s, 2);   // 4: follows 2, listed apart
  const std::vector<int> after{-1, 0, -1, 1, 2}, follower{1, 3, 4, -1, -1};
  for (size_t f = 0; f < list.size(); ++f) {
    EXPECT_EQ(list.after(f), after[f]) << f;
    EXPECT_EQ(list.follower(f), follower[f]) << f;
    EXPECT_EQ(list.flow(f).after, after[f]) << f;
  }
  EXPECT_THROW(list.add(30, s, 0), Error);  // 0 is followed already
  EXPECT_THROW(list.add(30, s, 7), Error);  // not an earlier flow
  // Sharing reads the same chains: 0 and 2 share the NIC from 0 (both end at 20); 1 starts at 20
  // and 4 at 20 (no gap after either), both at 50 to 40; 3 starts at 40 alone, ends at 50.
  const SharingResult r = shareLinks(list, kNic);
  const std::vector<double> ends{20, 40, 20, 50, 40};
  for (size_t f = 0; f < list.size(); ++f) EXPECT_DOUBLE_EQ(r.end_us[f], ends[f]) << f;
}

TEST(LinkSharing, ALoneFlowFasterThanTheNominalLinkKeepsItsTime) {
  // A profile may beat the nominal link: 2000 bytes in 10 us on a 100 bytes/us NIC.
  const std::vector<SharedFlow> one{onNic(3, 10, 2000)};
  EXPECT_DOUBLE_EQ(shareLinks(one, kNic).end_us[0], 13);
}

// The timing engine's transfers: 1M2P2D, one GPU per node (every group crosses nodes), DP
// overlapped, m = 1, one bucket per stage. Each transfer is given the time that fills its NIC
// (10 GB/s = 1e4 bytes/us) alone, so two at once each run at half speed. f = 10, b = 20 us, the
// bucket ready 5 us into B. Alone: s0 F [0, 10], sends [10, 10 + Tf]; s1 F [10 + Tf, 20 + Tf],
// B [20 + Tf, 40 + Tf], its bucket [25 + Tf, 25 + Tf + Ta], its gradient send from 40 + Tf for Tb.
// The send (Tb << Ta) runs wholly inside the bucket on s1's NIC (tx): both at half speed while it
// lasts, so the send takes 2 Tb and the bucket Tb longer; s0's B starts at 40 + Tf + 2 Tb. Nothing
// else overlaps (s0's bucket comes after every send).
TEST(LinkFlows, ABucketAndASendShareTheNicOnlyWhileTheyOverlap) {
  Strategy strategy = Strategy::of(1, 2, 2, 1, 2);
  strategy.dp_overlap = true;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  ASSERT_EQ(plan.pipelines.size(), 1u);
  const double nic = 1e4;
  test::BucketAndSend setup = test::bucketAndSendInput(plan, nic);
  const double tb = setup.tb;
  const std::vector<double>& ta = setup.ta;
  TimingInput& in = setup.in;
  ASSERT_EQ(ta.size(), 2u);
  ASSERT_GT(ta[1], 15 + tb);  // the bucket outlasts B's rest and the send

  TimingInput off = in;
  IterationTimeline alone = computeTimeline(off);
  plan.cluster.topology.link_sharing = false;
  EXPECT_FALSE(shareLinksOverTime(plan, {}, {}, off, alone));
  EXPECT_NEAR(alone.pipelines[0].stages[1].tasks[1].send().duration(), tb, 1e-9);

  plan.cluster.topology.link_sharing = true;
  IterationTimeline shared = computeTimeline(in);
  EXPECT_TRUE(shareLinksOverTime(plan, {}, {}, in, shared));
  test::expectSendSharesTheBucketHalfway(shared, setup);
  EXPECT_NEAR(shared.pipelines[0].stages[0].grad_sync[0].duration(), ta[0], 1e-9);
}

// --grad-reduce-sync step: a queued reduction that waited idle for its bucket (the queue was empty
// when its bucket closed) starts when its bucket closes, not its standalone gap after the one
// before it: a delay of that one moves it only past its bucket's close (the queue never runs two
// at once). 1M2P2D, ZeRO-2, m = 2, DAPPLE, one GPU per node (10 GB/s NICs: 1e4 bytes/us), one
// bucket per stage ready at B's end. Every transfer fills its NIC alone: the 4096-byte sends in
// T = 0.4096 us, stage s's reduction in R_s = its link bytes / 1e4 (two at once: half speed each);
// f = b = 100 us, optimizer 1 us, R_0 <= f, T < R_1 < f + b. A send holds its device.
// Alone: s0 F0 [0, f], a0 [f, f+T]; F1 [f+T, 2f+T], a1 [2f+T, 2f+2T].
//   s1 F0 [f+T, 2f+T]; B0 [2f+T, 2f+T+b]; r0 and g0 both from 2f+T+b; F1 [2f+2T+b, 3f+2T+b];
//   B1 [.., 3f+2T+2b]; r1 (idle queue: r0 ended at 2f+T+b+R_1) and g1 both from 3f+2T+2b.
//   s0 B0 [2f+2T+b, 2f+2T+2b], its r0 to 2f+2T+2b+R_0 <= 3f+2T+2b (before g1 reaches s0's rx).
// Shared (s1's tx): r0 and g0 at half from 2f+T+b: g0 ends T late (2T), r0 too. r1 starts at its
//   bucket's close 3f+2T+2b (r0 ended long before), beside g1: again each T late. (Following r0
//   with its standalone gap, r1 started T late, after g1 had left alone: g1 kept T, r1 was late
//   only by what it inherited, and nothing was stretched there.)
// Re-timed: s1 g0 [2f+T+b, 2f+3T+b], r0 [2f+T+b, 2f+2T+b+R_1]; F1 [2f+3T+b, 3f+3T+b], B1
//   [.., 3f+3T+2b], r1 [3f+3T+2b, 3f+4T+2b+R_1], g1 [3f+3T+2b, 3f+5T+2b]. s0 B0 at g0's arrival
//   [2f+3T+b, 2f+3T+2b]; B1 at g1's [3f+5T+2b, 3f+5T+3b], its r1 to 3f+5T+3b+R_0; optimizer
//   [3f+5T+3b+R_0, +1]: the iteration.
TEST(LinkFlows, AnIdleQueuedReductionStartsWhenItsBucketClosesNotAfterItsPredecessorsDelay) {
  Strategy strategy = Strategy::of(1, 2, 2, 1, 4);
  strategy.zero_stage = 2;
  strategy.grad_reduce_sync = GradReduceSync::kStep;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  ASSERT_EQ(plan.pipelines.size(), 1u);
  ASSERT_EQ(plan.micro_batches, 2);
  const double nic = 1e4, f = 100, b = 100;
  const PipelineClass& pipeline = plan.pipelines[0];
  ASSERT_EQ(plan.events[pipeline.forward_p2p[0]].event.message_bytes, 4096);
  ASSERT_EQ(plan.events[pipeline.backward_p2p[0]].event.message_bytes, 4096);
  const double T = 4096 / nic;
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = 2;
  in.grad_reduce_at_step = true;
  std::vector<double> R;
  for (const StagePlan& stage : plan.stages) {
    ASSERT_EQ(stage.micro_batch_buckets.size(), 1u);
    R.push_back(linkBytes(plan.events[stage.micro_batch_buckets[0].event].event) / nic);
    StageCost cost = test::stageCost(f, b, 0, 1);
    cost.micro_batch_buckets = {BucketCost{b, R.back()}};
    in.stages.push_back(cost);
  }
  in.pipelines.push_back(PipelineCost{{T}, {T}, {}});
  ASSERT_LE(R[0], f);
  ASSERT_GT(R[1], T);
  ASSERT_LT(R[1], f + b);

  IterationTimeline tl = computeTimeline(in);
  {  // alone, as traced
    const StageTimeline& s1 = tl.pipelines[0].stages[1];
    ASSERT_EQ(s1.grad_sync.size(), 2u);
    EXPECT_NEAR(s1.grad_sync[0].start_us, 2 * f + T + b, 1e-9);
    EXPECT_NEAR(s1.grad_sync[0].end_us, 2 * f + T + b + R[1], 1e-9);
    EXPECT_NEAR(s1.grad_sync[1].start_us, 3 * f + 2 * T + 2 * b, 1e-9);
    EXPECT_NEAR(s1.tasks[3].send().start_us, 3 * f + 2 * T + 2 * b, 1e-9);
    EXPECT_NEAR(tl.pipelines[0].stages[0].grad_sync[0].end_us, 2 * f + 2 * T + 2 * b + R[0], 1e-9);
  }
  ASSERT_TRUE(shareLinksOverTime(plan, {}, {}, in, tl));
  const StageTimeline& s0 = tl.pipelines[0].stages[0];
  const StageTimeline& s1 = tl.pipelines[0].stages[1];
  EXPECT_NEAR(s1.tasks[1].send().start_us, 2 * f + T + b, 1e-9);  // g0
  EXPECT_NEAR(s1.tasks[1].send().end_us, 2 * f + 3 * T + b, 1e-9);
  EXPECT_NEAR(s1.grad_sync[0].end_us, 2 * f + 2 * T + b + R[1], 1e-9);
  EXPECT_NEAR(s1.tasks[3].run.end_us, 3 * f + 3 * T + 2 * b, 1e-9);  // B1
  EXPECT_NEAR(s1.grad_sync[1].start_us, 3 * f + 3 * T + 2 * b, 1e-9);
  EXPECT_NEAR(s1.grad_sync[1].end_us, 3 * f + 4 * T + 2 * b + R[1], 1e-9);
  EXPECT_NEAR(s1.tasks[3].send().end_us, 3 * f + 5 * T + 2 * b, 1e-9);  // g1, stretched
  EXPECT_NEAR(s0.tasks[2].run.start_us, 2 * f + 3 * T + b, 1e-9);     // s0 B0
  EXPECT_NEAR(s0.tasks[3].run.start_us, 3 * f + 5 * T + 2 * b, 1e-9); // s0 B1
  EXPECT_NEAR(s0.grad_sync[1].end_us, 3 * f + 5 * T + 3 * b + R[0], 1e-9);
  EXPECT_NEAR(tl.iteration_us, 3 * f + 5 * T + 3 * b + R[0] + 1, 1e-9);
}

// The link loads of a simulated iteration: 1M2P1D on two nodes of one GPU (10 GB/s each), m = 2,
// DAPPLE. The only link traffic is the pipeline's: 2 activations (node 0 tx, node 1 rx) and 2
// gradients (node 1 tx, node 0 rx) of b s h = 1 x 32 x 64 fp16 = 4096 bytes each, one at a time:
// each link carries 8192 bytes, at 1 (its full 10 GB/s) while a send is in flight.
TEST(LinkUsage, CountsEveryPipelineByteOnBothEnds) {
  Strategy strategy = Strategy::of(1, 2, 1, 1, 2);
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
  // Each send alone fills its NIC: 4096 bytes at 1e4 bytes/us.
  for (int e : {plan.pipelines[0].forward_p2p[0], plan.pipelines[0].backward_p2p[0]}) {
    ASSERT_EQ(plan.events[e].event.message_bytes, 4096);
    costs[e].time_us = 4096 / 1e4;
  }
  const Simulation sim = simulate(plan, costs);
  const LinkUsage usage = linkUsage(sim);
  ASSERT_EQ(usage.links.size(), 4u);
  for (const LinkLoad& link : usage.links) {
    EXPECT_NEAR(link.bytes, 8192, 1e-6) << link.name;
    EXPECT_NEAR(link.capacity_bytes_per_us, 1e4, 1e-9) << link.name;
    for (const LoadSegment& s : link.segments) EXPECT_NEAR(s.bytes_per_us, 1e4, 1e-9);
    EXPECT_NEAR(link.utilization(sim.timeline.iteration_us),
                8192 / (1e4 * sim.timeline.iteration_us), 1e-12);
  }
  EXPECT_EQ(usage.links[0].name, "node 0 nic tx");
  std::ostringstream csv;
  writeLinkCsv(usage, csv);
  std::string first_row = csv.str().substr(csv.str().find('\n') + 1);
  first_row = first_row.substr(0, first_row.find('\n'));
  EXPECT_EQ(csv.str().substr(0, csv.str().find('\n')),
            "resource,capacity_gb_s,start_us,end_us,bytes,utilization");
  EXPECT_EQ(first_row.substr(0, first_row.find(',', first_row.find(',') + 1)),
            "node 0 nic tx,10.000");
  EXPECT_EQ(first_row.substr(first_row.rfind(',', first_row.rfind(',') - 1)), ",4096,1.0000");
  // Where the time went in the summary JSON (issue 28 item 6): the busiest links, the same four
  // of 8192 bytes at 10 GB/s; exposed communication per kind, mean device: the pipeline sends
  // block their device, 2 of 0.4096 us each on either device: pp 0.0008192 ms, nothing else.
  const nlohmann::json j = summaryJson(sim, kDefaultMemoryHeadroom, &usage);
  ASSERT_EQ(j["links"]["busiest"].size(), 4u);
  for (const nlohmann::json& l : j["links"]["busiest"]) {
    EXPECT_NEAR(l["bytes"].get<double>(), 8192, 1e-6);
    EXPECT_NEAR(l["capacity_gb_s"].get<double>(), 10, 1e-9);
    EXPECT_NEAR(l["utilization"].get<double>(), 8192 / (1e4 * sim.timeline.iteration_us), 1e-12);
  }
  EXPECT_NEAR(j["exposed_comm_ms"]["pp"].get<double>(), 2 * 0.4096 / 1e3, 1e-12);
  for (const char* kind : {"tp", "cp", "ep", "dp", "zero"}) {
    EXPECT_EQ(j["exposed_comm_ms"][kind].get<double>(), 0) << kind;
  }
}

// The sends-only plan of the LinkUsage tests below, simulated: 1 M, `pp` stages, `dp` replicas,
// m micro-batches of one, one GPU per node (10 GB/s NICs), every op 1 us, the 4096-byte sends
// 0.4096 us (each fills its NIC); with `buckets`, DP overlap in 40,000-byte buckets.
Simulation simulateSends(int pp, int dp, int m, bool buckets) {
  Strategy strategy = Strategy::of(1, pp, dp, 1, m);
  strategy.dp_overlap = buckets;
  strategy.dp_bucket_bytes = 40000;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
  const PipelineClass& pipeline = plan.pipelines[0];
  for (size_t l = 0; l < pipeline.forward_p2p.size(); ++l) {
    for (int e : {pipeline.forward_p2p[l], pipeline.backward_p2p[l]}) {
      EXPECT_EQ(plan.events[e].event.message_bytes, 4096);
      costs[e].time_us = 4096 / 1e4;
    }
  }
  return simulate(plan, costs);
}

// linkUsage records flows that never meet on a resource without shareLinks' event loop (each
// alone at its demand): the loads must be shareLinks' own, bit for bit, and so must they where
// flows meet (shareLinks then decides). One GPU per node (10 GB/s NICs), every op 1 us, 4096-byte
// sends of 0.4096 us (each fills its NIC). 1M4P1D, m = 8, DAPPLE: a send holds its device and
// the sends into a device never overlap, so no two flows meet. 1M4P2D with DP overlap and small
// buckets: a stage's buckets leave during its backward tasks, beside their sends on its NIC.
TEST(LinkUsage, LoadsAreShareLinksOwnWhetherFlowsMeetOrNot) {
  for (const bool buckets : {false, true}) {
    SCOPED_TRACE(buckets);
    const Simulation sim = simulateSends(4, buckets ? 2 : 1, buckets ? 16 : 8, buckets);
    const LinkMap map = linkMap(sim.plan);
    const TimelineFlows flows =
        timelineFlows(sim.plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
    // Whether two flows overlap in time on one resource, pair by pair.
    bool met = false;
    for (size_t f = 0; f < flows.size(); ++f) {
      for (size_t g = f + 1; g < flows.size(); ++g) {
        const SharedFlow &a = flows.flow(f), &b = flows.flow(g);
        if (a.duration_us <= 0 || b.duration_us <= 0) continue;
        const bool overlap =
            a.start_us < b.start_us + b.duration_us && b.start_us < a.start_us + a.duration_us;
        for (const LinkUse& u : a.uses) {
          for (const LinkUse& w : b.uses) met = met || (overlap && u.resource == w.resource);
        }
      }
    }
    EXPECT_EQ(met, buckets);
    const SharingResult want = shareLinks(flows.list, map.capacities(), /*record_load=*/true);
    const LinkUsage usage = linkUsage(sim);
    size_t link = 0;
    for (size_t r = 0; r < want.load.size(); ++r) {
      if (want.load[r].empty()) continue;
      ASSERT_LT(link, usage.links.size());
      const LinkLoad& got = usage.links[link++];
      EXPECT_EQ(got.name, linkName(sim.plan.cluster.topology, map.resources[r]));
      EXPECT_EQ(got.capacity_bytes_per_us, want.capacity_bytes_per_us[r]);
      ASSERT_EQ(got.segments.size(), want.load[r].size()) << got.name;
      for (size_t i = 0; i < got.segments.size(); ++i) {
        EXPECT_EQ(got.segments[i].start_us, want.load[r][i].start_us) << got.name << " " << i;
        EXPECT_EQ(got.segments[i].end_us, want.load[r][i].end_us) << got.name << " " << i;
        EXPECT_EQ(got.segments[i].bytes_per_us, want.load[r][i].bytes_per_us) << got.name;
      }
    }
    EXPECT_EQ(link, usage.links.size());
    // Without meetings each link carries its sends' bytes: node 0's NIC tx its 8 activations.
    if (!buckets) {
      EXPECT_NEAR(usage.links[0].bytes, 8 * 4096, 1e-6) << usage.links[0].name;
    }
  }
}

// The summary's link totals (LinkDetail::kTotals: each link's capacity and bytes, no segments)
// where no two flows meet come straight from the timeline's sends and collectives (no load
// segment listed); they must be the full report's numbers bit for bit, and where flows meet
// (shareLinks decides) too. Hand-traced first: 1M2P1D on two one-GPU nodes (10 GB/s NICs), m = 2,
// DAPPLE, every op 1 us, 4096-byte sends of 0.4096 us: each of the four NIC directions carries
// two sends alone, 8192 bytes at 1e4 bytes/us. Then the two plans of the test above: 1M4P1D,
// m = 8 (no meeting: the totals come without segments) and 1M4P2D with DP overlap and small
// buckets (buckets meet sends on a NIC: the totals are shareLinks' sums).
TEST(LinkUsage, TotalsAreTheFullReportsWhetherFlowsMeetOrNot) {
  struct Case {
    int pp, dp, m;
    bool buckets;
  };
  for (const Case c : {Case{2, 1, 2, false}, Case{4, 1, 8, false}, Case{4, 2, 16, true}}) {
    SCOPED_TRACE(fmt::format("1M{}P{}D m={}", c.pp, c.dp, c.m));
    const Simulation sim = simulateSends(c.pp, c.dp, c.m, c.buckets);
    const LinkUsage full = linkUsage(sim, LinkDetail::kSegments);
    const LinkUsage totals = linkUsage(sim, LinkDetail::kTotals);
    EXPECT_EQ(totals.iteration_us, full.iteration_us);
    ASSERT_EQ(totals.links.size(), full.links.size());
    for (size_t i = 0; i < full.links.size(); ++i) {
      const LinkLoad &got = totals.links[i], &want = full.links[i];
      EXPECT_EQ(got.name, want.name);
      EXPECT_EQ(got.capacity_bytes_per_us, want.capacity_bytes_per_us) << want.name;
      EXPECT_EQ(got.bytes, want.bytes) << want.name;  // bit for bit
      EXPECT_FALSE(want.segments.empty()) << want.name;
      // Without meetings the totals came without listing a segment; with them, shareLinks' own.
      EXPECT_EQ(got.segments.empty(), !c.buckets) << want.name;
    }
    if (c.pp == 2) {
      ASSERT_EQ(totals.links.size(), 4u);
      for (const LinkLoad& link : totals.links) {
        EXPECT_NEAR(link.bytes, 8192, 1e-6) << link.name;
        EXPECT_EQ(link.capacity_bytes_per_us, 1e4) << link.name;
      }
      EXPECT_EQ(totals.links[0].name, "node 0 nic tx");
    }
    if (c.pp == 4 && !c.buckets) {  // node 0's NIC out: its 8 activations, alone
      EXPECT_NEAR(totals.links[0].bytes, 8 * 4096, 1e-6) << totals.links[0].name;
    }
    // The summary reads the same numbers from either.
    EXPECT_EQ(summaryJson(sim, kDefaultMemoryHeadroom, &totals)["links"].dump(),
              summaryJson(sim, kDefaultMemoryHeadroom, &full)["links"].dump());
  }
}

// An in-task collective across nodes as a flow: tiny-moe on 1M1P2D with EP = 2 and one GPU per
// node (10 GB/s NICs: 1e4 bytes/us), so every MoE all-to-all crosses the node's NICs; DP overlap,
// small buckets. Costs: every all-to-all Ta, the first DP bucket Tb, everything else 0. An
// all-to-all of 32768 bytes over 2 ranks moves (n - 1) / n = 16384 bytes per rank, all to the
// other node (copies 1 x (2 - 1) / 1); Ta = 16384 / 1e4 fills the NIC, and so does Tb = 131328
// bytes (the 2-rank all-reduce's bus factor 1) / 1e4. F runs the 8 all-to-alls of 4 layers back
// to back: [0, 8 Ta]. B starts at 8 Ta; the first bucket is ready at once (after the final norm's
// gradient, free), beside B's first all-to-all, and B's 8 all-to-alls follow one another. Shared
// max-min: each all-to-all and the bucket at 5000 bytes/us while both run: the 8 all-to-alls
// (131072 bytes) take 16 Ta, the bucket has 131328 - 131072 = 256 bytes left, alone: 0.0256 us.
// So B's collectives end 8 Ta late (the task's stretch) and the bucket 8 Ta late too.
TEST(LinkFlows, AnExpertAllToAllBesideADpBucketTakesItsMaxMinShare) {
  Strategy s = test::strategy("1M1P2D", 1, 2);
  s.ep = 2;
  s.dp_overlap = true;
  s.dp_bucket_bytes = 40000;
  IterationPlan plan = buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-moe")),
                                          test::cluster(1, 0, test::kSlowLinks), s);
  const StagePlan& stage = plan.stages[0];
  const OpInstance& a2a = test::findOp(stage.forward, "moe_dispatch_alltoall", 0);
  const Event& a2a_event = test::eventOf(plan, a2a);
  ASSERT_EQ(a2a_event.message_bytes, 32768);
  ASSERT_EQ(a2a_event.placement.nodes, 2);
  ASSERT_GE(stage.dp_buckets.size(), 2u);
  const int bucket = stage.dp_buckets[0].event;
  ASSERT_EQ(plan.events[bucket].event.message_bytes, 131328);
  const double ta = 16384 / 1e4, tb = 131328 / 1e4;
  std::vector<EventCost> costs(plan.events.size(), EventCost{0.0});
  costs[a2a.event].time_us = ta;
  costs[bucket].time_us = tb;
  int all_to_alls = 0;
  for (const OpInstance& op : stage.backward) all_to_alls += op.event == a2a.event;
  ASSERT_EQ(all_to_alls, 8);

  plan.cluster.topology.link_sharing = false;
  const Simulation alone = simulate(plan, costs);
  const StageTimeline& a = alone.timeline.pipelines[0].stages[0];
  ASSERT_EQ(a.tasks.size(), 2u);
  EXPECT_NEAR(a.tasks[1].run.start_us, 8 * ta, 1e-9);
  EXPECT_NEAR(a.tasks[1].run.duration(), 8 * ta, 1e-9);
  EXPECT_NEAR(a.grad_sync[0].start_us, 8 * ta, 1e-9);
  EXPECT_NEAR(a.grad_sync[0].duration(), tb, 1e-9);

  plan.cluster.topology.link_sharing = true;
  const Simulation shared = simulate(plan, costs);
  const StageTimeline& b = shared.timeline.pipelines[0].stages[0];
  EXPECT_NEAR(b.tasks[0].run.duration(), 8 * ta, 1e-9);  // F overlaps nothing
  EXPECT_NEAR(b.tasks[1].run.duration(), 16 * ta, 1e-9);
  EXPECT_NEAR(b.grad_sync[0].end_us, 8 * ta + 16 * ta + 256 / 1e4, 1e-9);
  // The stretch counts as EP communication, all of it exposed (the mean device is this one).
  EXPECT_NEAR(shared.summary.mean_device.ep_comm_us - alone.summary.mean_device.ep_comm_us, 8 * ta,
              1e-9);
  // Where the time went (item 6): the node's NICs carried the 16 all-to-alls (F's and B's, 16384
  // bytes each) and the bucket's 131328 bytes; the buckets of no time are no flows.
  const LinkUsage usage = linkUsage(shared);
  ASSERT_FALSE(usage.links.empty());
  EXPECT_EQ(usage.links[0].name, "node 0 nic tx");
  EXPECT_NEAR(usage.links[0].bytes, 16 * 16384 + 131328, 1e-6);
  // The summary's totals (flows meet here, and inside tasks): the same, bit for bit.
  const LinkUsage totals = linkUsage(shared, LinkDetail::kTotals);
  ASSERT_EQ(totals.links.size(), usage.links.size());
  EXPECT_EQ(totals.links[0].name, "node 0 nic tx");
  EXPECT_EQ(totals.links[0].bytes, usage.links[0].bytes);
  EXPECT_EQ(totals.links[0].capacity_bytes_per_us, usage.links[0].capacity_bytes_per_us);
  // Unshared (--link-sharing off), each flow at its own rate: the same bytes.
  const LinkUsage unshared = linkUsage(alone);
  ASSERT_FALSE(unshared.links.empty());
  ASSERT_EQ(unshared.links[0].name, "node 0 nic tx");
  EXPECT_NEAR(unshared.links[0].bytes, 16 * 16384 + 131328, 1e-6);
  // Their loads add up where they overlap: B's all-to-alls and the bucket, 1e4 bytes/us each, over
  // [8 Ta, 16 Ta] (twice the NIC: a utilisation above 1 says so); alone before and after.
  double doubled_us = 0;
  for (const LoadSegment& seg : unshared.links[0].segments) {
    // (Back-to-back all-to-alls may overlap by a rounding sliver, where three loads add up.)
    if (seg.end_us - seg.start_us < 1e-9) continue;
    EXPECT_LE(seg.bytes_per_us, 2e4 * (1 + 1e-12));
    EXPECT_GE(seg.bytes_per_us, 1e4 * (1 - 1e-12));
    if (seg.bytes_per_us > 1.5e4) doubled_us += seg.end_us - seg.start_us;
  }
  EXPECT_NEAR(doubled_us, 8 * ta, 1e-9);
}

// A DualPipeV fused task's all-to-alls as flows (link_flows.h): tiny-moe (one MoE layer per
// virtual stage), 1M2P2D with EP = 2, one GPU per node (10 GB/s NICs: c = 1e4 bytes/us), m = 4.
// Every all-to-all moves 16384 bytes per rank and costs Ta = 16384 / c (it fills the NIC); every
// send moves 16384 bytes in 4 Ta (demand c/4); each stage's flash attention, forward and
// backward, costs k Ta, everything else 0. A fused [F B W] then has compute 2k Ta and all-to-all
// 4 Ta (two per member), run max(2k, 4) Ta, its all-to-alls back to back from its start; a send
// at c/4 never reaches its fair share beside one all-to-all (c/2), so it keeps its time and the
// all-to-all gets the rest. Device 1 (stages 1 and 2) sits on node 2.
//   k = 1.5 (communication-bound, slack 0): device 1's [F3b B1a W1a] runs [49, 53] Ta alone (the
//   schedule, asserted below), its last all-to-all [52, 53]. At 52.5 device 0's gradient send
//   (B2b's, to stage 2) enters node 2's rx: the all-to-all gets 3c/4, so by 53 it has done
//   0.5 + 0.375 = 0.875 Ta. At 53 the fused task's own two sends leave on node 2's tx: c/2 for
//   the all-to-all, its last 0.125 Ta take 0.25: it ends at 53.25. The run grows by 0.25 Ta.
//   k = 2.5 (compute-bound, slack 1 Ta): device 1's [F3a B1b W1b] runs [52, 57] Ta alone; the two
//   sends of its predecessor are on node 2's tx until 52.5, so its first all-to-all runs at c/2
//   for 0.5 Ta (0.25 done) and ends at 53.25: the chain is 0.25 Ta late, inside the compute's
//   1 Ta of slack: the run keeps its 5 Ta.
TEST(LinkFlows, AFusedTaskIsStretchedOnlyWhereItsAllToAllsOutlastItsCompute) {
  Strategy s = test::strategy("1M2P2D", 1, 8);
  s.ep = 2;
  s.schedule = Schedule::kDualPipeV;
  IterationPlan plan = buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-moe")),
                                          test::cluster(1, 0, test::kSlowLinks), s);
  const double ta = 16384 / 1e4;
  auto costsAt = [&](double k) {
    std::vector<EventCost> costs(plan.events.size(), EventCost{0.0});
    for (size_t e = 0; e < costs.size(); ++e) {
      const Event& ev = plan.events[static_cast<int>(e)].event;
      if (ev.kind == EventKind::kAllToAll) {
        EXPECT_EQ(ev.message_bytes, 32768);  // (n - 1) / n of it leaves the rank
        EXPECT_EQ(ev.placement.nodes, 2);
        costs[e].time_us = ta;
      }
      if (ev.kind == EventKind::kP2P) {
        EXPECT_EQ(ev.message_bytes, 16384);
        costs[e].time_us = 4 * ta;
      }
    }
    for (const StagePlan& stage : plan.stages) {
      costs[test::findOp(stage.forward, "flash_attention").event].time_us = k * ta;
      costs[test::findOp(stage.backward, "flash_attention_bwd").event].time_us = k * ta;
    }
    return costs;
  };
  auto nodeOf = [](const Simulation& sim, int device, Phase phase, int micro_batch, int chunk) {
    const StageTimeline& st = sim.timeline.pipelines[0].stages[device];
    for (size_t i = 0; i < st.tasks.size(); ++i) {
      const NodeTask& at = sim.timeline.graph.nodes[st.node(i)].task;
      if (at.phase == phase && at.micro_batch == micro_batch && at.chunk == chunk) {
        return st.node(i);
      }
    }
    ADD_FAILURE() << "no such task";
    return -1;
  };
  auto task = [&](const Simulation& sim, int device, Phase phase, int micro_batch, int chunk) {
    const int id = nodeOf(sim, device, phase, micro_batch, chunk);
    return id < 0 ? TaskTiming{}
                  : sim.timeline.pipelines[0].stages[device].tasks[sim.timeline.graph.positionOf(id)];
  };
  {
    const std::vector<EventCost> costs = costsAt(1.5);
    plan.cluster.topology.link_sharing = false;
    const Simulation alone = simulate(plan, costs);
    const TaskTiming fused = task(alone, 1, Phase::kForward, 3, 1);
    ASSERT_EQ(alone.timeline.graph.nodes[nodeOf(alone, 1, Phase::kForward, 3, 1)].fused_size, 3);
    EXPECT_NEAR(fused.run.start_us, 49 * ta, 1e-9);
    EXPECT_NEAR(fused.run.end_us, 53 * ta, 1e-9);
    EXPECT_NEAR(fused.send().start_us, 53 * ta, 1e-9);
    EXPECT_NEAR(task(alone, 0, Phase::kBackward, 2, 1).send().start_us, 52.5 * ta, 1e-9);
    plan.cluster.topology.link_sharing = true;
    const Simulation shared = simulate(plan, costs);
    EXPECT_NEAR(task(shared, 1, Phase::kForward, 3, 1).run.duration(), 4.25 * ta, 1e-9);
  }
  {
    const std::vector<EventCost> costs = costsAt(2.5);
    plan.cluster.topology.link_sharing = false;
    const Simulation alone = simulate(plan, costs);
    const TaskTiming fused = task(alone, 1, Phase::kForward, 3, 0);
    ASSERT_EQ(alone.timeline.graph.nodes[nodeOf(alone, 1, Phase::kForward, 3, 0)].fused_size, 3);
    EXPECT_NEAR(fused.run.start_us, 52 * ta, 1e-9);
    EXPECT_NEAR(fused.run.end_us, 57 * ta, 1e-9);
    const TaskTiming before = task(alone, 1, Phase::kForward, 2, 1);  // [F2b B0a W0a]
    EXPECT_NEAR(before.send().end_us, 52.5 * ta, 1e-9);
    // The flows: the four all-to-alls back to back from the run's start, one chain, with the
    // compute's slack; shared, the chain ends 0.25 Ta late.
    const LinkMap map = linkMap(plan);
    const TimelineFlows flows =
        timelineFlows(plan, alone.costs, alone.offsets, alone.input, alone.timeline, map);
    const SharingResult ends = shareLinks(flows.list, map.capacities());
    std::vector<size_t> chain;
    for (size_t i = 0; i < flows.size(); ++i) {
      const TimelineFlows::Origin& o = flows.origin(i);
      if (o.stage == 1 && o.kind == FlowKind::kEp && flows.flow(i).start_us >= 52 * ta - 1e-9 &&
          flows.flow(i).start_us < 57 * ta - 1e-9) {
        chain.push_back(i);
      }
    }
    ASSERT_EQ(chain.size(), 4u);
    for (size_t j = 0; j < 4; ++j) {
      const SharedFlow& f = flows.flow(chain[j]);
      EXPECT_NEAR(f.start_us, (52 + j) * ta, 1e-9) << j;
      EXPECT_NEAR(flows.origin(chain[j]).slack_us, ta, 1e-9) << j;
      EXPECT_EQ(f.after, j == 0 ? -1 : static_cast<int>(chain[j - 1])) << j;
      EXPECT_NEAR(ends.end_us[chain[j]], (53.25 + j) * ta, 1e-9) << j;
    }
    plan.cluster.topology.link_sharing = true;
    const Simulation shared = simulate(plan, costs);
    EXPECT_NEAR(task(shared, 1, Phase::kForward, 3, 0).run.duration(), 5 * ta, 1e-9);
  }
}

}  // namespace
}  // namespace evsim

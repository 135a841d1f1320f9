// Links shared over time (modeler/network/link_sharing.h): max-min fair progressive filling
// traced by hand, symmetric copies against expanded flows, chains of followers, and the flow
// list's compact form. The timing engine's transfers sharing links: link_flows_test.cpp.
#include "modeler/network/link_sharing.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "common/error.h"

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

// A follower waiting for the flow it follows holds its links against a flow that starts in the
// wait after the follower's own start (which the next-start check cannot see). NICs 0 and 1 of
// 100 bytes/us, every flow 100 bytes/us alone. A1 (NICs 0 and 1, 0-10) shares NIC 1 with C
// (0-10): both at 50, both end at 20.
// Uniform tail (every waiting flow on the same links: held once per link): A2 (NICs 0 and 1, own
// start 12, 2 us after A1 alone) starts at 22. X (NIC 0, 21-31) starts in the wait: held, it is
// not alone; alone 21-22 (1 us of its 10), then beside A2 at 50 each: X's last 9 us take 18, X
// ends at 40; A2 has 9 by then, its last 1 alone: 41. (Taken as alone, X would end at 31.)
// Mixed tail (counts per link): A2 on NIC 1 only (own start 12), A3 after it on NICs 0 and 1 (own
// start 24, 2 us after A2 alone). A2 starts at 22 and, A3 starting at 24 alone, ends at 32; A3
// starts at 34. X (NIC 0, 25-45, 2000 bytes) starts after A3's own start, while A3 waits: held by
// A3 (not by A2), X is not alone; alone 25-34 (9 of its 20 us), then beside A3 at 50 each: A3's
// 10 us take 20, A3 ends at 54; X has 19 by then, its last 1 alone: 55. (Taken as alone, X would
// end at 45 and A3 at 44.)
// Uniform tail of two: A2 and A3 both on NICs 0 and 1, so the tail holds each NIC once until its
// LAST flow, A3, starts (not until its first, A2). A2 (own start 12) starts at 22 as above and
// runs to 32 (A3's own start 24 is inside its run: not alone, but the only flow on its NICs); A3
// (own start 24, 2 us after A2 alone) starts at 32 + 2 = 34. X (NIC 0, own start 33, 20 us, 2000
// bytes) starts after A2 has started and ended, while A3 waits, and after A3's own start (so the
// next-start check cannot see A3): held by A3, X is not alone; alone 33-34 (100 bytes), then
// beside A3 at 50 each: A3's 1000 bytes take 20 us, A3 ends at 54; X has 100 + 1000 = 1100 by
// then, its last 900 alone at 100: 9 us, X ends at 63. (Let go at A2's start, X would be taken
// as alone and end at 53, and A3 at 44.)
TEST(LinkSharing, AWaitingTailHoldsItsLinksUniformOrMixed) {
  const std::vector<double> nics{100, 100};
  const LinkUses both{{0, 1}, {1, 1}};
  std::vector<SharedFlow> uniform{SharedFlow{0, 10, 1000, both}, SharedFlow{0, 10, 1000, {{1, 1}}},
                                  SharedFlow{12, 10, 1000, both}, onNic(21, 10, 1000)};
  uniform[2].after = 0;
  const SharingResult u = shareLinks(uniform, nics);
  const std::vector<double> u_ends{20, 20, 41, 40};  // A1, C, A2, X
  for (size_t f = 0; f < uniform.size(); ++f) EXPECT_DOUBLE_EQ(u.end_us[f], u_ends[f]) << f;
  std::vector<SharedFlow> mixed{SharedFlow{0, 10, 1000, both}, SharedFlow{0, 10, 1000, {{1, 1}}},
                                SharedFlow{12, 10, 1000, {{1, 1}}}, SharedFlow{24, 10, 1000, both},
                                onNic(25, 20, 2000)};
  mixed[2].after = 0;
  mixed[3].after = 2;
  const SharingResult m = shareLinks(mixed, nics);
  const std::vector<double> m_ends{20, 20, 32, 54, 55};  // A1, C, A2, A3, X
  for (size_t f = 0; f < mixed.size(); ++f) EXPECT_DOUBLE_EQ(m.end_us[f], m_ends[f]) << f;
  std::vector<SharedFlow> two{SharedFlow{0, 10, 1000, both}, SharedFlow{0, 10, 1000, {{1, 1}}},
                              SharedFlow{12, 10, 1000, both}, SharedFlow{24, 10, 1000, both},
                              onNic(33, 20, 2000)};
  two[2].after = 0;
  two[3].after = 2;
  const SharingResult t = shareLinks(two, nics);
  const std::vector<double> t_ends{20, 20, 32, 54, 63};  // A1, C, A2, A3, X
  for (size_t f = 0; f < two.size(); ++f) EXPECT_DOUBLE_EQ(t.end_us[f], t_ends[f]) << f;
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

}  // namespace
}  // namespace evsim

// A whole chain of followers at once (modeler/network/sharing_pass.cpp, runAlong): where nothing
// foreign touches a chain's links while its flows start, its followers end on the times their
// releases give, without the flow-by-flow checks; where something does, the chain goes flow by
// flow. Each case traced by hand, and each the same to the bit with whole chains off (the
// flow-by-flow way). Other link-sharing cases: link_sharing_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "modeler/network/link_sharing.h"

namespace evsim {
namespace {

// NICs of 100 bytes/us; every flow below moves 100 bytes/us alone unless it says otherwise.
const std::vector<double> kNics{100, 100, 100};

SharedFlow on(int nic, double start_us, double duration_us) {
  return SharedFlow{start_us, duration_us, 100 * duration_us, {{nic, 1}}};
}

// Each flow's end, whole chains on; expected to the bit, and the same with them off (which takes
// no follower at once). `taken_whole`, where given: how many followers went with their chain at
// once (SharingResult::whole_chain_flows), so that a fast way no longer taken fails a test.
std::vector<double> endsOf(const std::vector<SharedFlow>& flows,
                           const std::vector<double>& nics = kNics, size_t* taken_whole = nullptr) {
  const FlowList list = FlowList::of(flows);
  const SharingResult whole = shareLinks(list, nics, false, /*whole_chains=*/true);
  const SharingResult by_flow = shareLinks(list, nics, false, /*whole_chains=*/false);
  EXPECT_EQ(by_flow.whole_chain_flows, 0u);
  EXPECT_EQ(shareLinks(list, nics, /*record_load=*/true, true).whole_chain_flows, 0u);
  if (taken_whole != nullptr) *taken_whole = whole.whole_chain_flows;
  std::vector<double> ends;
  for (size_t f = 0; f < flows.size(); ++f) {
    EXPECT_EQ(whole.end_us[f], by_flow.end_us[f]) << "flow " << f;
    ends.push_back(whole.end_us[f]);
  }
  return ends;
}

// A chain of three on NIC 0 (alone 0-10, 12-22, 24-34: 2 us gaps) with flows around it that do
// not touch it while it runs: Y on NIC 1 inside its span, X on NIC 0 from 34, its last end. All
// keep their standalone times. A0 is alone (nothing on NIC 0 before 34) and takes A1 (12-22, the
// next start on NIC 0 is A2's 24) and A2 (24-34, X's 34 is not before its end) with it: 2.
TEST(LinkSharingChain, AChainNothingTouchesEndsOnItsStandaloneTimes) {
  std::vector<SharedFlow> flows{on(0, 0, 10), on(0, 12, 10), on(0, 24, 10), on(1, 5, 20),
                                on(0, 34, 10)};
  flows[1].after = 0;
  flows[2].after = 1;
  size_t taken_whole = 0;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 2u);
  const std::vector<double> expected{10, 22, 34, 25, 44};
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// A follower starts at max(its own start, the end before it + its gap) in floating point, the
// release's arithmetic: A0 (0.1, 0.1 us) ends at 0.2; A1's own start 0.6 leaves a gap of
// 0.6 - 0.1 - 0.1 = 0.4, and 0.2 + 0.4 is 0.6000000000000001, one ulp above 0.6, so A1 starts
// there and ends at 0.6000000000000001 + 0.1 = 0.7000000000000001, not at its standalone 0.7.
// Nothing else is on NIC 0: A0 takes A1 at once (with whole chains off, the release queue does).
TEST(LinkSharingChain, AFollowerStartsWhereTheReleaseArithmeticPutsIt) {
  const double gap = 0.6 - 0.1 - 0.1;
  ASSERT_EQ(0.1 + 0.1 + gap, 0.6000000000000001);
  std::vector<SharedFlow> flows{on(0, 0.1, 0.1), on(0, 0.6, 0.1)};
  flows[1].after = 0;
  size_t taken_whole = 0;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 1u);  // A1 with A0, alone: runAlong's arithmetic, not the release's
  EXPECT_EQ(ends[0], 0.2);
  EXPECT_EQ(ends[1], 0.7000000000000001);
  EXPECT_NE(ends[1], 0.6 + 0.1);
}

// X (NIC 0, 11-31 alone) starts inside the chain's span, between A0's end and A1's start: the
// chain goes flow by flow. A0 (0-10) is alone (X starts after its end). X meets A1 (own start
// 12): X alone 11-12 (1 of its 20 us), then both at 50: A1's 10 us take 20, A1 ends at 32, X has
// 10 by then (9 left). A2 starts its 2 us gap later, at 34; X alone 32-34 (7 left), then both at
// 50: X ends at 48, A2 has 7 by then, its last 3 alone: 51. (Taken at once, A1 and A2 would end at
// 22 and 34 and X, alone in flight, at 31.)
TEST(LinkSharingChain, AFlowStartingInsideTheSpanSendsTheChainFlowByFlow) {
  std::vector<SharedFlow> flows{on(0, 0, 10), on(0, 12, 10), on(0, 24, 10), on(0, 11, 20)};
  flows[1].after = 0;
  flows[2].after = 1;
  size_t taken_whole = 1;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 0u);
  const std::vector<double> expected{10, 32, 51, 48};  // A0, A1, A2, X
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// X (NIC 0, from 15) starts inside the chain's last flow, after its start: A1 (12-22 alone) is
// not alone. A1 alone 12-15 (3 us), then both at 50: A1's 7 take 14, A1 ends at 29; X has 7 by
// then, its last 3 alone: 32. (Taken at once, A1 would end at 22 and X at 25.)
TEST(LinkSharingChain, AFlowStartingInsideTheLastFlowSharesWithIt) {
  std::vector<SharedFlow> flows{on(0, 0, 10), on(0, 12, 10), on(0, 15, 10)};
  flows[1].after = 0;
  size_t taken_whole = 1;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 0u);
  const std::vector<double> expected{10, 29, 32};  // A0, A1, X
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// X (NIC 0, 12-22 alone) starts with A1 (own start 12, released on time) and is listed before
// it, so it starts first: X is not alone (A1 starts inside it), and A1 then finds X in flight.
// Both at 50 from 12: both end at 32. (Taken at once, A1 would end at 22 and X at 22.)
TEST(LinkSharingChain, AFlowStartingWithAFollowerAndBeforeItSharesWithIt) {
  std::vector<SharedFlow> flows{on(0, 0, 10), on(0, 12, 10), on(0, 12, 10)};
  std::swap(flows[1], flows[2]);  // X listed before A1
  flows[2].after = 0;
  size_t taken_whole = 1;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 0u);
  const std::vector<double> expected{10, 32, 32};  // A0, X, A1
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// Another chain touches the chain's link from its head's start: Y0 (NIC 2, from 5) shares NIC 2
// with Z (5 us, 500 bytes): both at 50, Z ends at 15, Y0 has 500 and ends at 20. Y1 follows Y0 on
// NIC 0 (own start 11, no gap): it waits from Y0's start and holds NIC 0, and starts at 20. Chain
// A on NIC 0: A0 0-10 alone (Y1's own start 11 is after its end); A1 (own start 12) finds NIC 0
// held by Y1, so it is not alone: alone in flight 12-20 (8 us), then beside Y1 at 50: its last 2
// take 4, A1 ends at 24. Y1 has 2 by then, alone 24-26 (4), then beside A2 (starting its 2 us gap
// later, at 26) at 50: Y1's last 6 take 12, Y1 ends at 38; A2 has 6, its last 4 alone: 42. (Taken
// at once, A1 and A2 would end at 22 and 34; Y1's head is on NIC 2 only, so the chain must count
// it from Y0's start, not Y1's.)
TEST(LinkSharingChain, ATailBeginningToHoldInsideTheSpanSendsTheChainFlowByFlow) {
  std::vector<SharedFlow> flows{on(0, 0, 10), on(0, 12, 10), on(0, 24, 10),
                                on(2, 5, 10), on(0, 11, 10), on(2, 5, 5)};
  flows[1].after = 0;
  flows[2].after = 1;
  flows[4].after = 3;
  size_t taken_whole = 1;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 0u);
  const std::vector<double> expected{10, 24, 42, 20, 38, 15};  // A0, A1, A2, Y0, Y1, Z
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// A head on other links than its followers: A0 on NIC 1 (0-10) alone, A1 on NIC 0 (own start
// 12). X (NIC 0, from 5, 10 us) is in flight there (A1's own start is inside it): X alone 5-12
// (7 us), then beside A1 at 50: X's last 3 take 6, X ends at 18; A1 has 3, its last 7 alone: 25.
// (A0's check reads NIC 1 only; taken at once, A1 would end at 22 and X at 15.)
TEST(LinkSharingChain, AHeadOnOtherLinksDoesNotVouchForItsFollowers) {
  std::vector<SharedFlow> flows{on(1, 0, 10), on(0, 12, 10), on(0, 5, 10)};
  flows[1].after = 0;
  size_t taken_whole = 1;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 0u);
  const std::vector<double> expected{10, 25, 18};  // A0, A1, X
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// A chain whose head shares and whose rest then runs alone: A0 (NIC 0, 0-10) beside B (NIC 0,
// from -1, 10 us): B alone -1-0 (1 us), then both at 50: B's last 9 take 18, B ends at 18, A0 has
// 9 by then, its last 1 alone: 19. A1 (own start 12, 2 us gap) starts at 21, alone (A2's own
// start 40 is after its end): 31; A2 (own start 40, gap 18) at 49, alone: 59. X on NIC 0 from
// 59, A2's end, is alone: 69. A1, found alone, takes A2 with it (49 is before X's 59): 1.
TEST(LinkSharingChain, AFollowerFoundAloneTakesTheRestOfItsChain) {
  std::vector<SharedFlow> flows{on(0, 0, 10), on(0, 12, 10), on(0, 40, 10), on(0, -1, 10),
                                on(0, 59, 10)};
  flows[1].after = 0;
  flows[2].after = 1;
  size_t taken_whole = 0;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 1u);
  const std::vector<double> expected{19, 31, 59, 18, 69};  // A0, A1, A2, B, X
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// A chain taken at once from a follower lets go of its links. B (NIC 0, from -0.5, 1 us) and A0
// (NIC 0, 0-1) share from 0 at 50 each: B's last 0.5 us take 1, B ends at 1; A0 has 0.5 by then,
// its last 0.5 alone: 1.5. A1 (own start 1.5, gap 0.5) starts at 2, alone (A2's own start 4 is
// after its end 3), and takes A2 (own start 4, gap 1.5) with it: 4.5-5.5. X (NIC 0, from 5.5,
// 7.1 us, 333 bytes) is then alone: 5.5 + 7.1 = 12.6. (Were the links still held, X would run in
// flight, alone at its demand d = 333 / 7.1, ending at 5.5 + (7.1 x d) / d = 12.600000000000001.)
TEST(LinkSharingChain, AChainTakenAtOnceLetsGoOfItsLinks) {
  ASSERT_NE(5.5 + 7.1 * (333 / 7.1) / (333 / 7.1), 5.5 + 7.1);
  std::vector<SharedFlow> flows{on(0, 0, 1), on(0, 1.5, 1), on(0, 4, 1), on(0, -0.5, 1),
                                SharedFlow{5.5, 7.1, 333, {{0, 1}}}};
  flows[1].after = 0;
  flows[2].after = 1;
  size_t taken_whole = 0;
  const std::vector<double> ends = endsOf(flows, kNics, &taken_whole);
  EXPECT_EQ(taken_whole, 1u);                                // A2
  const std::vector<double> expected{1.5, 3, 5.5, 1, 12.6};  // A0, A1, A2, B, X
  for (size_t f = 0; f < flows.size(); ++f) EXPECT_EQ(ends[f], expected[f]) << f;
}

// Random lists of chains (one link set or mixed, queued or not, gaps and overlaps, times that
// round) and lone flows on three NICs: whole chains on and off give the same ends to the bit, and
// the fast way is taken (some followers go at once, none with it off).
TEST(LinkSharingChain, RandomChainsEndTheSameWholeOrFlowByFlow) {
  size_t taken_whole = 0;
  std::mt19937 rng(34);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<double> durations{0.2, 0.35, 1, 2.5, 10};
  const std::vector<LinkUses> sets{
      {{0, 1}}, {{1, 1}}, {{2, 1}}, {{0, 1}, {1, 1}}, {{1, 2}, {2, 1}}};
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<SharedFlow> flows;
    const int chains = 1 + pick(6);
    for (int c = 0; c < chains; ++c) {
      const int length = 1 + pick(5);
      const bool mixed = pick(4) == 0;
      const int set = pick(static_cast<int>(sets.size()));
      double start = 0.1 * pick(300);
      for (int i = 0; i < length; ++i) {
        const double duration = durations[static_cast<size_t>(pick(5))];
        SharedFlow f{start, duration, 100 * duration * (0.5 + 0.1 * pick(6)),
                     sets[static_cast<size_t>(mixed ? pick(5) : set)]};
        if (i > 0) {
          f.after = static_cast<int>(flows.size()) - 1;
          f.queued = pick(5) == 0;
        }
        flows.push_back(f);
        start = std::max(0.0, start + duration + 0.1 * (pick(40) - 5));  // a gap or an overlap
      }
    }
    const FlowList list = FlowList::of(flows);
    const SharingResult whole = shareLinks(list, kNics, false, true);
    const SharingResult by_flow = shareLinks(list, kNics, false, false);
    taken_whole += whole.whole_chain_flows;
    ASSERT_EQ(by_flow.whole_chain_flows, 0u) << "trial " << trial;
    for (size_t f = 0; f < flows.size(); ++f) {
      ASSERT_EQ(whole.end_us[f], by_flow.end_us[f]) << "trial " << trial << " flow " << f;
    }
  }
  EXPECT_GT(taken_whole, 0u);
}

}  // namespace
}  // namespace evsim

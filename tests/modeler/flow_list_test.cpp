// FlowList's storage (link_sharing.h): a flow's shape in 16 bits until a shape index needs more,
// then every flow's in full; each flow reads back as it was added either way. A list reserved
// for 65,536 flows or more keeps its starts and its shapes' times alone on the tick at or before
// them (1/16 us), the starts in 4 bytes while they fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "modeler/network/link_sharing.h"

namespace evsim {
namespace {

// 65,538 shapes, shape s lasting s + 1 us and moving 2 s bytes over resource s % 3 with s % 5 + 1
// copies; a flow of each from the first, then flows of shapes 0, 65,535 (the last in 16 bits) and
// 65,537 again: every flow added before and after the widening keeps its start, shape and after.
TEST(FlowList, ShapesPast16BitsKeepEveryFlowsShape) {
  constexpr int kShapes = UINT16_MAX + 3;
  FlowList list;
  for (int s = 0; s < kShapes; ++s) {
    list.addShape(s + 1.0, 2.0 * s, {{s % 3, static_cast<float>(s % 5 + 1)}});
  }
  list.reserve(3);  // fewer than will be added: the storage grows past it
  for (int s = 0; s < kShapes; ++s) list.add(0.5 * s, s, s > 0 && s % 7 == 0 ? s - 1 : -1);
  const int first_extra = list.add(1e6, 0);
  list.add(2e6, UINT16_MAX, first_extra);
  list.add(3e6, kShapes - 1);
  ASSERT_EQ(list.size(), static_cast<size_t>(kShapes) + 3);
  for (int s = 0; s < kShapes; ++s) {
    const size_t f = static_cast<size_t>(s);
    ASSERT_EQ(list.shapeOf(f), s) << f;
    const SharedFlow flow = list.flow(f);
    EXPECT_EQ(flow.start_us, 0.5 * s) << f;
    EXPECT_EQ(flow.duration_us, s + 1.0) << f;
    EXPECT_EQ(flow.bytes, 2.0 * s) << f;
    ASSERT_EQ(flow.uses.size(), 1) << f;
    EXPECT_EQ(flow.uses.begin()->resource, s % 3) << f;
    EXPECT_EQ(flow.uses.begin()->copies, static_cast<float>(s % 5 + 1)) << f;
    EXPECT_EQ(flow.after, s > 0 && s % 7 == 0 ? s - 1 : -1) << f;
  }
  const size_t extra = static_cast<size_t>(kShapes);
  EXPECT_EQ(list.shapeOf(extra), 0);
  EXPECT_EQ(list.shapeOf(extra + 1), UINT16_MAX);
  EXPECT_EQ(list.after(extra + 1), static_cast<int>(extra));
  EXPECT_EQ(list.shapeOf(extra + 2), kShapes - 1);
  EXPECT_EQ(list.flow(extra + 2).duration_us, kShapes);
}

// Below 65,536 shapes, the same reads (the 16-bit storage alone).
TEST(FlowList, FewShapesReadBackAsAdded) {
  FlowList list;
  const int a = list.addShape(10, 1000, {{0, 1}, {1, 2}});
  const int b = list.addShape(4, 80, {{2, 1}});
  list.add(7, b);
  list.add(3, a, 0);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list.shapeOf(0), b);
  EXPECT_EQ(list.shapeOf(1), a);
  EXPECT_EQ(list.flow(1).uses.size(), 2);
  EXPECT_EQ(list.flow(1).after, 0);
  EXPECT_EQ(list.flow(0).duration_us, 4);
}

// Reserved for 65,536 flows: each start reads back as the 1/16 us at or before it (0.03 us is
// 0.48 ticks -> 0; 0.07 is 1.12 -> 1 tick, 0.0625; 1.6384 is 26.2144 -> 26, 1.625; 5.0625 is 81
// ticks exactly; 72 s + 0.1 us is 1,152,000,001.6 -> ...001 ticks, under 2^32), in 4-byte ticks.
TEST(FlowList, AListReservedFor65536FlowsKeepsItsStartsOnTheTick) {
  FlowList list;
  const int s = list.addShape(1, 100, {{0, 1}});
  list.reserve(FlowList::kTickedFromFlows);
  EXPECT_TRUE(list.startsOnTick());
  EXPECT_TRUE(list.startsInTicks());
  for (double start : {0.03, 0.07, 1.6384, 5.0625, 72e6 + 0.1}) list.add(start, s);
  const std::vector<double> expected{0.0, 0.0625, 1.625, 5.0625, 72e6 + 0.0625};
  for (size_t f = 0; f < expected.size(); ++f) {
    EXPECT_EQ(list.startUs(f), expected[f]) << f;
    EXPECT_EQ(list.flow(f).start_us, expected[f]) << f;
  }
  EXPECT_TRUE(list.startsInTicks());
  EXPECT_EQ(FlowList::onTick(1.6384), 1.625);
  EXPECT_EQ(FlowList::onTick(72e6 + 0.1), 72e6 + 0.0625);
  EXPECT_EQ(FlowList::onTick(-1.03), -1.0625);
}

// A start at or past 2^32 ticks (2^28 us; 300 s = 4.8e9 ticks), before 0, infinite or NaN moves
// the list to 8-byte starts, still on the tick at or before each (-1.03 us: -1.0625); the flows
// before read back as they did: 268 s (4.288e9 ticks) and (2^32 - 1) / 16 us, the last tick, fit.
TEST(FlowList, AStartOutside32BitsOfTicksWidensTheStartsOnTheTick) {
  const double last_tick_us = (0x1p32 - 1) / 16;
  for (const double outside : {300e6 + 0.03, 0x1p28, -1.03, std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN()}) {
    FlowList list;
    const int s = list.addShape(1, 100, {{0, 1}});
    list.reserve(FlowList::kTickedFromFlows + 1);
    list.add(0.07, s);
    list.add(268e6, s);
    list.add(last_tick_us, s);
    EXPECT_TRUE(list.startsInTicks()) << outside;
    list.add(outside, s);
    EXPECT_FALSE(list.startsInTicks()) << outside;
    EXPECT_TRUE(list.startsOnTick()) << outside;
    list.add(2.01, s);
    ASSERT_EQ(list.size(), 5u);
    EXPECT_EQ(list.startUs(0), 0.0625);
    EXPECT_EQ(list.startUs(1), 268e6);
    EXPECT_EQ(list.startUs(2), last_tick_us);
    EXPECT_EQ(list.startUs(4), 2.0);
    const double held = list.startUs(3);
    if (std::isnan(outside)) {
      EXPECT_TRUE(std::isnan(held));
    } else if (std::isinf(outside)) {
      EXPECT_TRUE(std::isinf(held) && held > 0);
    } else {
      EXPECT_EQ(held, outside == -1.03 ? -1.0625 : outside == 0x1p28 ? 0x1p28 : 300e6);
    }
  }
}

// A shape's time alone is on the tick too, whether added before or after the reserve (10.05 us
// -> 10.0; 3.0 stays), and so is a SharedFlow list of 65,536 flows or more (FlowList::of).
TEST(FlowList, AListOnTheTickHoldsItsShapesTimesOnTheTick) {
  FlowList list;
  const int a = list.addShape(10.05, 100, {{0, 1}});
  list.reserve(FlowList::kTickedFromFlows);
  const int b = list.addShape(3.0, 100, {{0, 1}});
  const int c = list.addShape(0.07, 100, {{0, 1}});
  EXPECT_EQ(list.shape(a).duration_us, 10.0);
  EXPECT_EQ(list.shape(b).duration_us, 3.0);
  EXPECT_EQ(list.shape(c).duration_us, 0.0625);
  const int d = list.addShape(0.03, 100, {{0, 1}});  // under a tick: 0, an instant flow
  EXPECT_EQ(list.shape(d).duration_us, 0.0);
  std::vector<SharedFlow> flows(FlowList::kTickedFromFlows, SharedFlow{0.07, 10.05, 100, {{0, 1}}});
  const FlowList of = FlowList::of(flows);
  EXPECT_TRUE(of.startsInTicks());
  EXPECT_EQ(of.flow(5).start_us, 0.0625);
  EXPECT_EQ(of.flow(5).duration_us, 10.0);
}

// Flows that meet stay apart on the tick: 70,000 flows, on NIC 0 chains of two (the second
// following the first as it ends: start = start + time alone in floating point; a chain every
// 20.4 us from 1000.01 us) and on NIC 1 lone flows each starting where the one before ends (the
// next bucket on a stream, from 1000.01 us), all 10.05 us alone: starts and times off the tick.
// Nothing overlaps, so nothing moves, as in the exact list. With the starts alone on the tick, a
// flow would overlap the one it meets by up to a tick and be stretched by it (42,000 moved).
TEST(FlowList, FlowsThatMeetDoNotOverlapOnTheTick) {
  constexpr int kFlows = 70000;
  FlowList list;
  const int chained = list.addShape(10.05, 1000, {{0, 1}});
  const int lone = list.addShape(10.05, 1000, {{1, 1}});
  list.reserve(kFlows);
  double chain_start = 1000.01, lone_start = 1000.01;
  for (int f = 0; f < kFlows; f += 2) {
    const int first = list.add(chain_start, chained);
    list.add(chain_start + 10.05, chained, first);
    chain_start += 2 * 10.05 + 0.3;
    list.add(lone_start, lone);
    lone_start = lone_start + 10.05;
  }
  ASSERT_TRUE(list.startsInTicks());
  const SharingResult r = shareLinks(list, std::vector<double>(2, 100));
  EXPECT_EQ(r.end_us.moved(), 0u);
  const SharingResult one_by_one =
      shareLinks(list, std::vector<double>(2, 100), false, /*whole_chains=*/false);
  EXPECT_EQ(one_by_one.end_us.moved(), 0u);
  EXPECT_EQ(list.startUs(0), 1000.0);  // 1000.01 us held on its tick
}

// The start's bytes the search's memory estimate charges, by the same rule as the list: 4 from
// 65,536 flows while the latest start is under 2^32 ticks (268 s fits; 2^28 us is 2^32 ticks),
// else 8.
TEST(FlowList, StartBytesFollowTheListsRule) {
  EXPECT_EQ(FlowList::startBytes(FlowList::kTickedFromFlows, 72e6), 4u);
  EXPECT_EQ(FlowList::startBytes(FlowList::kTickedFromFlows, 268e6), 4u);
  EXPECT_EQ(FlowList::startBytes(FlowList::kTickedFromFlows - 1, 72e6), 8u);
  EXPECT_EQ(FlowList::startBytes(FlowList::kTickedFromFlows, 0x1p28), 8u);
  EXPECT_EQ(FlowList::startBytes(1u << 20, 300e6), 8u);
}

// Reserved for fewer (or not at all), a list keeps its starts exactly, in 8 bytes.
TEST(FlowList, ASmallerListKeepsItsStartsExactly) {
  FlowList list;
  const int s = list.addShape(10.05, 100, {{0, 1}});
  list.reserve(FlowList::kTickedFromFlows - 1);
  list.add(0.03, s);
  list.add(1.6384, s);
  EXPECT_FALSE(list.startsOnTick());
  EXPECT_EQ(list.shape(s).duration_us, 10.05);
  EXPECT_FALSE(list.startsInTicks());
  EXPECT_EQ(list.startUs(0), 0.03);
  EXPECT_EQ(list.startUs(1), 1.6384);
  list.reserve(FlowList::kTickedFromFlows);  // too late: flows are listed already
  EXPECT_FALSE(list.startsOnTick());
}

// Sharing reads a list on the tick as it would read the same flows listed exactly at the ticked
// starts and times alone: 70,000 flows (every third following the one before, ~0.3 us later
// than its end) on three NICs of 100 bytes/us, flow f at 0.3 f us (0.9 us apart on a NIC), 1.03
// us alone (1.0 on the tick) and 60 bytes each: neighbours on a NIC overlap by ~0.1 us at 120
// bytes/us and share it (the NICs' load, 67 bytes/us, keeps the queues short). Every end equal
// to the bit, flow by flow and with whole chains, and most moved by sharing.
TEST(FlowList, SharingAListOnTheTickIsSharingItsTickedStartsExactly) {
  constexpr int kFlows = 70000;
  FlowList ticked, exact;
  for (int r = 0; r < 3; ++r) {
    ticked.addShape(1.03, 60, {{r, 1}});
    exact.addShape(FlowList::onTick(1.03), 60, {{r, 1}});
  }
  ticked.reserve(kFlows);
  ASSERT_TRUE(ticked.startsInTicks());
  for (int f = 0; f < kFlows; ++f) {
    const double start = 0.3 * f + (f % 3 == 1 ? 1 : 0);
    const int after = f % 3 == 1 ? f - 1 : -1;
    ticked.add(start, f % 3, after);
    exact.add(FlowList::onTick(start), f % 3, after);
  }
  ASSERT_FALSE(exact.startsOnTick());
  const std::vector<double> nics(3, 100);
  const SharingResult a = shareLinks(ticked, nics), b = shareLinks(exact, nics);
  const SharingResult one_by_one = shareLinks(ticked, nics, false, /*whole_chains=*/false);
  size_t moved = 0;
  for (size_t f = 0; f < static_cast<size_t>(kFlows); ++f) {
    ASSERT_EQ(a.end_us[f], b.end_us[f]) << f;
    ASSERT_EQ(a.end_us[f], one_by_one.end_us[f]) << f;
    if (a.end_us[f] != a.end_us.standaloneUs(f)) ++moved;
  }
  EXPECT_GT(moved, static_cast<size_t>(kFlows) / 2);
}

}  // namespace
}  // namespace evsim

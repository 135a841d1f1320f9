// FlowList's storage (link_sharing.h): a flow's shape in 16 bits until a shape index needs more,
// then every flow's in full; each flow reads back as it was added either way. A list reserved
// for 65,536 flows or more keeps its starts on the tick (1/16 us), in 4 bytes while they fit.
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

// A start past 2^32 ticks (300 s = 4.8e9 ticks), before 0, or infinite moves the list to 8-byte
// starts, still on the tick at or before each (-1.03 us: -1.0625); the flows before read back as
// they did (268 s = 4.288e9 ticks still fits).
TEST(FlowList, AStartOutside32BitsOfTicksWidensTheStartsOnTheTick) {
  FlowList list;
  const int s = list.addShape(1, 100, {{0, 1}});
  list.reserve(FlowList::kTickedFromFlows + 1);
  list.add(0.07, s);
  list.add(268e6, s);
  EXPECT_TRUE(list.startsInTicks());
  list.add(300e6 + 0.03, s);
  EXPECT_FALSE(list.startsInTicks());
  EXPECT_TRUE(list.startsOnTick());
  list.add(-1.03, s);
  list.add(std::numeric_limits<double>::infinity(), s);
  list.add(2.01, s);
  const std::vector<double> expected{0.0625, 268e6, 300e6, -1.0625, 0, 2.0};
  ASSERT_EQ(list.size(), expected.size());
  for (size_t f = 0; f < expected.size(); ++f) {
    if (f == 4) {
      EXPECT_TRUE(std::isinf(list.startUs(f)));
    } else {
      EXPECT_EQ(list.startUs(f), expected[f]) << f;
    }
  }
}

// Reserved for fewer (or not at all), a list keeps its starts exactly, in 8 bytes.
TEST(FlowList, ASmallerListKeepsItsStartsExactly) {
  FlowList list;
  const int s = list.addShape(1, 100, {{0, 1}});
  list.reserve(FlowList::kTickedFromFlows - 1);
  list.add(0.03, s);
  list.add(1.6384, s);
  EXPECT_FALSE(list.startsOnTick());
  EXPECT_FALSE(list.startsInTicks());
  EXPECT_EQ(list.startUs(0), 0.03);
  EXPECT_EQ(list.startUs(1), 1.6384);
  list.reserve(FlowList::kTickedFromFlows);  // too late: flows are listed already
  EXPECT_FALSE(list.startsOnTick());
}

// Sharing reads a list on the tick as it would read the same flows listed exactly at the ticked
// starts: 70,000 flows (every third following the one before, 0.3 us later than its end) on
// three NICs of 100 bytes/us, flow f at 0.3 f us (0.9 us apart on a NIC), 1 us and 60 bytes
// each: neighbours on a NIC overlap by ~0.1 us at 120 bytes/us and share it (the NICs' load,
// 67 bytes/us, keeps the queues short). Every end equal to the bit, and most moved by sharing.
TEST(FlowList, SharingAListOnTheTickIsSharingItsTickedStartsExactly) {
  constexpr int kFlows = 70000;
  FlowList ticked, exact;
  for (int r = 0; r < 3; ++r) {
    ticked.addShape(1, 60, {{r, 1}});
    exact.addShape(1, 60, {{r, 1}});
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
  size_t moved = 0;
  for (size_t f = 0; f < static_cast<size_t>(kFlows); ++f) {
    ASSERT_EQ(a.end_us[f], b.end_us[f]) << f;
    if (a.end_us[f] != a.end_us.standaloneUs(f)) ++moved;
  }
  EXPECT_GT(moved, static_cast<size_t>(kFlows) / 2);
}

}  // namespace
}  // namespace evsim

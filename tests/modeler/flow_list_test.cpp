// FlowList's storage (link_sharing.h): a flow's shape in 16 bits until a shape index needs more,
// then every flow's in full; each flow reads back as it was added either way.
#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace evsim

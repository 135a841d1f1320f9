// The pipeline layout (plan/pipeline_layout.h): virtual stage <-> (device, chunk), by hand.
#include "plan/pipeline_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "plan/pipeline_schedule.h"

namespace evsim {
namespace {

TEST(PipelineLayout, LoopedPutsChunkCAfterTheLastDeviceOfChunkCMinusOne) {
  const PipelineLayout looped(LayoutKind::kLooped, 4, 2);
  // P = 4, v = 2: stages 0..3 on devices 0..3 (chunk 0), stages 4..7 on devices 0..3 (chunk 1).
  const std::vector<int> device = {0, 1, 2, 3, 0, 1, 2, 3};
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(looped.device(k), device[k]) << k;
    EXPECT_EQ(looped.chunk(k), k / 4) << k;
    EXPECT_EQ(looped.virtualStage(looped.device(k), looped.chunk(k)), k) << k;
  }
  // Every link crosses devices; 3 -> 4 wraps from device 3 to device 0 (pair index 3).
  const std::vector<int> pair = {0, 1, 2, 3, 0, 1, 2};
  for (int k = 0; k < 7; ++k) EXPECT_EQ(looped.linkPair(k), pair[k]) << k;
  EXPECT_TRUE(looped.wraps());
  EXPECT_FALSE(PipelineLayout(LayoutKind::kLooped, 4, 1).wraps());
}

TEST(PipelineLayout, VGoesDownTheDevicesAndBackUp) {
  const PipelineLayout v(LayoutKind::kV, 4, 2);
  // Stages 0..3 on devices 0..3, stages 4..7 on devices 3..0.
  const std::vector<int> device = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(v.device(k), device[k]) << k;
    EXPECT_EQ(v.chunk(k), k / 4) << k;
    EXPECT_EQ(v.virtualStage(v.device(k), v.chunk(k)), k) << k;
  }
  EXPECT_EQ(v.virtualStage(0, 1), 7);  // device 0 holds the first and the last stage
  EXPECT_TRUE(v.sameDevice(3, 4));     // the turn stays on device 3
  // Links: 0-1, 1-2, 2-3 (pairs 0, 1, 2), the turn (none), then 3-2, 2-1, 1-0 (pairs 2, 1, 0).
  const std::vector<int> pair = {0, 1, 2, -1, 2, 1, 0};
  for (int k = 0; k < 7; ++k) EXPECT_EQ(v.linkPair(k), pair[k]) << k;
  EXPECT_FALSE(v.wraps());
}

TEST(PipelineLayout, BundledSchedulesAreLooped) {
  for (Schedule s : {Schedule::kGpipe, Schedule::kDapple, Schedule::kInterleaved, Schedule::kZbh1,
                     Schedule::kZbh2}) {
    EXPECT_EQ(pipelineSchedule(s).layout(), LayoutKind::kLooped) << scheduleName(s);
  }
}

}  // namespace
}  // namespace evsim

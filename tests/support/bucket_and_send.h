#pragma once
// The timing input two hand-traced link tests share (link_sharing_test.cpp, rail_test.cpp): a
// two-stage DAPPLE plan of one micro-batch with DP overlap, each stage F 10 us and B 20 us, its one
// gradient bucket ready 5 us into B; the sends and the buckets at `bytes_per_us` alone (a 2-rank
// all-reduce's links carry 2 (n - 1) / n = 1 times its buffer); and the timeline both trace where
// stage 1's gradient send and its bucket share one resource.

#include <gtest/gtest.h>

#include <vector>

#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"
#include "support/stage_cost.h"

namespace evsim::test {

struct BucketAndSend {
  double tf = 0;           // the activation send alone
  double tb = 0;           // the gradient send alone
  std::vector<double> ta;  // each stage's bucket alone
  TimingInput in;
};

inline BucketAndSend bucketAndSendInput(const IterationPlan& plan, double bytes_per_us) {
  BucketAndSend out;
  EXPECT_EQ(plan.pipelines.size(), 1u);
  if (plan.pipelines.empty()) return out;
  auto bytes = [&](int event) { return double(plan.events[event].event.message_bytes); };
  out.tf = bytes(plan.pipelines[0].forward_p2p[0]) / bytes_per_us;
  out.tb = bytes(plan.pipelines[0].backward_p2p[0]) / bytes_per_us;
  out.in.schedule = Schedule::kDapple;
  out.in.micro_batches = 1;
  out.in.dp_overlap = true;
  for (const StagePlan& stage : plan.stages) {
    EXPECT_EQ(stage.dp_buckets.size(), 1u);
    if (stage.dp_buckets.empty()) return out;
    out.ta.push_back(bytes(stage.dp_buckets[0].event) / bytes_per_us);
    StageCost cost = test::stageCost(10, 20);
    cost.buckets = {BucketCost{5, out.ta.back(), 1}};
    out.in.stages.push_back(cost);
  }
  out.in.pipelines.push_back(PipelineCost{{out.tf}, {out.tb}, {}});
  return out;
}

// Stage 1's gradient send and its bucket on one resource whose whole rate each takes alone (a NIC,
// an uplink share). Stage 1 runs F at [10 + tf, 20 + tf] and B at [20 + tf, 40 + tf]; its bucket
// from 25 + tf, alone for 15 us; the send from 40 + tf: both at half while the send lasts (2 tb,
// the bucket outlasts it), then the bucket alone again, tb late. Stage 0's activation send
// overlaps nothing, and its B starts when the gradient arrives, 40 + tf + 2 tb.
inline void expectSendSharesTheBucketHalfway(const IterationTimeline& shared,
                                             const BucketAndSend& setup) {
  const double tf = setup.tf, tb = setup.tb;
  const StageTimeline& s0 = shared.pipelines[0].stages[0];
  const StageTimeline& s1 = shared.pipelines[0].stages[1];
  EXPECT_NEAR(s0.tasks[0].send().duration(), tf, 1e-9);  // overlaps nothing
  EXPECT_NEAR(s1.tasks[1].send().start_us, 40 + tf, 1e-9);
  EXPECT_NEAR(s1.tasks[1].send().duration(), 2 * tb, 1e-9);
  ASSERT_EQ(s1.grad_sync.size(), 1u);
  EXPECT_NEAR(s1.grad_sync[0].start_us, 25 + tf, 1e-9);
  EXPECT_NEAR(s1.grad_sync[0].end_us, 25 + tf + setup.ta[1] + tb, 1e-9);
  EXPECT_NEAR(s0.tasks[1].run.start_us, 40 + tf + 2 * tb, 1e-9);
}

}  // namespace evsim::test

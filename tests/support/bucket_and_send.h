#pragma once
// The timing input two hand-traced link tests share (link_sharing_test.cpp, rail_test.cpp): a
// two-stage DAPPLE plan of one micro-batch with DP overlap, each stage F 10 us and B 20 us, its one
// gradient bucket ready 5 us into B; the sends and the buckets at `bytes_per_us` alone (a 2-rank
// all-reduce's links carry 2 (n - 1) / n = 1 times its buffer).

#include <gtest/gtest.h>

#include <vector>

#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"

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
    out.in.stages.push_back(StageCost{10, 20, 0, {BucketCost{5, out.ta.back(), 1}}, 0});
  }
  out.in.pipelines.push_back(PipelineCost{{out.tf}, {out.tb}, {}});
  return out;
}

}  // namespace evsim::test

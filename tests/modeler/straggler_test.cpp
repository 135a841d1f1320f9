// Stragglers and variability: --slow-ranks parsing, replicas split into their own pipeline class,
// the 1F1B closed form of a slow last stage, the DP collective waiting for the slowest replica, the
// critical path, and per-op jitter (deterministic per seed, its mean against the half-normal's).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "common/error.h"
#include "plan/iteration_plan.h"
#include "modeler/device_events.h"
#include "modeler/simulation.h"
#include "modeler/stragglers.h"
#include "modeler/timing_engine.h"
#include "modeler/variability.h"
#include "support/stage_cost.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::stageCost;

TEST(Stragglers, ParsesRanksAndNodes) {
  // 32 ranks on nodes of 8: node3 is ranks 24-31; rank 25 is named twice and keeps 1.3.
  const RankSlowdowns slow = parseSlowRanks("17:1.2, node3:1.1,25:1.3", 32, 8);
  ASSERT_EQ(slow.size(), 9u);
  EXPECT_DOUBLE_EQ(slow.at(17), 1.2);
  EXPECT_DOUBLE_EQ(slow.at(24), 1.1);
  EXPECT_DOUBLE_EQ(slow.at(25), 1.3);
  EXPECT_DOUBLE_EQ(slow.at(31), 1.1);
  EXPECT_EQ(test::inputErrorOf([] { parseSlowRanks("40:1.2", 32, 8); }),
            "--slow-ranks '40:1.2': unknown rank (the strategy has ranks 0-31)");
  EXPECT_EQ(test::inputErrorOf([] { parseSlowRanks("node4:1.2", 32, 8); }),
            "--slow-ranks 'node4:1.2': unknown node (the 32 ranks sit on nodes 0-3)");
  EXPECT_EQ(test::inputErrorOf([] { parseSlowRanks("3:0", 32, 8); }),
            "--slow-ranks '3:0': the factor must be a number > 0");
  EXPECT_EQ(test::inputErrorOf([] { parseSlowRanks("3", 32, 8); }),
            "--slow-ranks '3': expected RANK:FACTOR or nodeN:FACTOR");
}

IterationPlan smallPlan(int tp, int pp, int dp, int64_t global_batch) {
  return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                            test::cluster(8, 1, test::kSlowLinks),
                            Strategy::of(tp, pp, dp, 1, global_batch));
}

TEST(Stragglers, SlowReplicaBecomesItsOwnClass) {
  // 2M2P2D: rank = tp + 2 (dp + 2 pp). Rank 7 = tp 1, dp 1, pp 1; rank 6 (tp 0 of the same stage)
  // at 1.1: the stage takes the slower of its TP ranks, 1.3.
  IterationPlan plan = smallPlan(2, 2, 2, 4);
  ASSERT_EQ(plan.pipelines.size(), 1u);
  const std::vector<std::vector<double>> f = splitSlowReplicas(plan, {{7, 1.3}, {6, 1.1}});
  ASSERT_EQ(plan.pipelines.size(), 2u);
  EXPECT_EQ(plan.pipelines[0].replicas, std::vector<int>{0});
  EXPECT_EQ(plan.pipelines[1].replicas, std::vector<int>{1});
  EXPECT_EQ(f[0], (std::vector<double>{1, 1}));
  EXPECT_EQ(f[1], (std::vector<double>{1, 1.3}));
  EXPECT_EQ(plan.pipelineOf(1), 1);
}

TimingInput uniformInput(int P, int64_t m, double f, double b, int classes) {
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = m;
  in.stages.assign(P, stageCost(f, b));
  for (int k = 0; k < classes; ++k) {
    in.pipelines.push_back(
        PipelineCost{std::vector<double>(P - 1, 0.0), std::vector<double>(P - 1, 0.0), {}});
  }
  return in;
}

// 1F1B, uniform f, b, free sends, the last stage at factor x: its m tasks of x(f+b) become the
// bottleneck after the warm-up; the iteration is x m (f+b) + (P-1)(f+b), (x-1) m (f+b) more than
// the balanced (m+P-1)(f+b). P = 4, m = 8, f = 1, b = 2, x = 1.2: 28.8 + 9 = 37.8 vs 33.
TEST(Stragglers, SlowLastStageOneFOneBClosedForm) {
  struct Case {
    int P;
    int64_t m;
  };
  for (Case c : {Case{4, 8}, Case{2, 3}, Case{3, 5}, Case{8, 16}}) {
    SCOPED_TRACE(::testing::Message() << "P=" << c.P << " m=" << c.m);
    TimingInput in = uniformInput(c.P, c.m, 1, 2, 1);
    const double balanced = computeTimeline(in).iteration_us;
    EXPECT_DOUBLE_EQ(balanced, (c.m + c.P - 1) * 3.0);
    in.pipelines[0].stage_slowdown.assign(c.P, 1.0);
    in.pipelines[0].stage_slowdown.back() = 1.2;
    const double slow = computeTimeline(in).iteration_us;
    EXPECT_NEAR(slow, 1.2 * c.m * 3 + (c.P - 1) * 3.0, 1e-9);
    EXPECT_NEAR(slow - balanced, 0.2 * c.m * 3, 1e-9);
  }
}

// Two classes of one stage, m = 2, f = 1, b = 2, all-reduce 5, optimizer 1; class 1 at 1.5.
// Class 0 ends its tasks at 6, class 1 at 9; the all-reduce waits for the slowest: [9, 14];
// optimizers [14, 15] and [14, 15.5] (the slow rank's step is slow too). Iteration 15.5; the
// critical path runs through class 1's stage only.
TEST(Stragglers, DataParallelSyncWaitsForTheSlowestReplica) {
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = 2;
  StageCost cost;
  cost.forward_us = 1;
  cost.backward_us = 2;
  cost.grad_allreduce_us = 5;
  cost.optimizer_us = 1;
  in.stages = {cost};
  in.pipelines = {PipelineCost{{}, {}, {}}, PipelineCost{{}, {}, {1.5}}};
  const IterationTimeline tl = computeTimeline(in);
  EXPECT_DOUBLE_EQ(tl.pipelines[0].stages[0].pipeline_end_us, 6);
  EXPECT_DOUBLE_EQ(tl.pipelines[1].stages[0].pipeline_end_us, 9);
  EXPECT_DOUBLE_EQ(tl.pipelines[0].stages[0].grad_sync[0].start_us, 9);
  EXPECT_DOUBLE_EQ(tl.pipelines[0].stages[0].optimizer.end_us, 15);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 15.5);
  EXPECT_EQ(criticalPath(tl), (std::vector<StageRef>{{1, 0}}));
}

// P = 3, 1F1B, m = 3, two classes; class 0's middle stage at 3x. Its tasks dominate: the path
// runs from class 0's stage 0 start through stage 1 and back, never through class 1.
TEST(Stragglers, CriticalPathFollowsTheSlowClass) {
  TimingInput in = uniformInput(3, 3, 1, 2, 2);
  in.pipelines[0].stage_slowdown = {1, 3, 1};
  const IterationTimeline tl = computeTimeline(in);
  const std::vector<StageRef> path = criticalPath(tl);
  ASSERT_FALSE(path.empty());
  for (const StageRef& s : path) EXPECT_EQ(s.pipeline, 0);
  EXPECT_NE(std::find(path.begin(), path.end(), StageRef{0, 1}), path.end());
  // Balanced: the last task ends on stage 0 and the chain visits every stage.
  const std::vector<StageRef> balanced = criticalPath(computeTimeline(uniformInput(3, 3, 1, 2, 1)));
  EXPECT_EQ(balanced, (std::vector<StageRef>{{0, 0}, {0, 1}, {0, 2}}));
}

// 1M1P2D, m = 1 per replica, every compute op 1 us, the gradient all-reduce 5 us: one task pair
// of 66 + 90 ops and adam per rank. Rank 1 at 1.5: its replica is its own class, its 157 ops take
// 235.5 us in its device events, and the all-reduce waits for it: [234, 239] (after rank 1's 156
// task ops x 1.5); rank 0's adam [239, 240], rank 1's [239, 240.5], the iteration's end.
TEST(Stragglers, SlowRankStretchesItsDeviceEvents) {
  IterationPlan plan = smallPlan(1, 1, 2, 2);
  std::vector<EventCost> costs;
  for (int e = 0; e < plan.events.size(); ++e) {
    const EventKind kind = plan.events[e].event.kind;
    costs.push_back(EventCost{kind == EventKind::kCompute     ? 1.0
                              : kind == EventKind::kAllReduce ? 5.0
                                                              : 0.0,
                              Provenance::kMeasured});
  }
  std::vector<std::vector<double>> slow = splitSlowReplicas(plan, {{1, 1.5}});
  const Simulation sim = simulate(std::move(plan), std::move(costs), std::move(slow));
  auto computeUs = [&](int64_t rank) {
    double total = 0, end = 0;
    forEachDeviceEvent(sim, rank, [&](const DeviceEvent& e) {
      if (e.stream != Stream::kCompute) return;
      total += e.duration_us;
      end = std::max(end, e.start_us + e.duration_us);
    });
    return std::pair{total, end};
  };
  EXPECT_DOUBLE_EQ(computeUs(0).first, 157);
  EXPECT_DOUBLE_EQ(computeUs(1).first, 157 * 1.5);
  EXPECT_DOUBLE_EQ(computeUs(0).second, 240);
  EXPECT_DOUBLE_EQ(computeUs(1).second, 240.5);
  EXPECT_DOUBLE_EQ(sim.summary.iteration_us, 240.5);
  EXPECT_EQ(criticalPath(sim.timeline), (std::vector<StageRef>{{1, 0}}));
  EXPECT_EQ(stageRanks(sim.plan, {1, 0}), std::vector<int64_t>{1});
}

// One stage (1M1P1D), m = 2, every compute op 1 us: 2 (66 + 90) = 312 task ops and adam: 313 us
// (simulation_test.cpp). Jitter s multiplies each task op by 1 + s|z|: E|z| = sqrt(2/pi), so the
// mean iteration is 313 + 312 s sqrt(2/pi); at s = 0.03 that is 320.468, with a per-iteration
// standard deviation of s sqrt(312 (1 - 2/pi)) = 0.32 (0.032 for the mean of 100).
TEST(Variability, JitterMeanAndDeterminism) {
  IterationPlan plan = smallPlan(1, 1, 1, 2);
  std::vector<EventCost> costs;
  for (int e = 0; e < plan.events.size(); ++e) {
    costs.push_back(EventCost{plan.events[e].event.kind == EventKind::kCompute ? 1.0 : 0.0,
                              Provenance::kMeasured});
  }
  const Simulation sim = simulate(std::move(plan), std::move(costs));
  ASSERT_DOUBLE_EQ(sim.summary.iteration_us, 313);
  const IterationDistribution flat = sampleIterations(sim, 0, 1, 5);
  EXPECT_DOUBLE_EQ(flat.p50_us, 313);
  EXPECT_DOUBLE_EQ(flat.p99_us, 313);

  const IterationDistribution a = sampleIterations(sim, 0.03, 1, 100);
  const IterationDistribution b = sampleIterations(sim, 0.03, 1, 100);
  const IterationDistribution c = sampleIterations(sim, 0.03, 2, 100);
  EXPECT_EQ(a.iteration_us, b.iteration_us);  // same seed, same draws
  EXPECT_NE(a.iteration_us, c.iteration_us);
  EXPECT_NEAR(a.mean_us, 313 + 312 * 0.03 * std::sqrt(2 / std::numbers::pi), 0.2);
  EXPECT_LE(a.p50_us, a.p90_us);
  EXPECT_LE(a.p90_us, a.p99_us);
  // Nearest rank: p50 is the 50th of 100 sorted, p99 the 99th.
  EXPECT_DOUBLE_EQ(a.p50_us, a.iteration_us[49]);
  EXPECT_DOUBLE_EQ(a.p99_us, a.iteration_us[98]);
  ASSERT_EQ(a.critical.size(), 1u);
  EXPECT_DOUBLE_EQ(a.critical[0].share, 1.0);
  EXPECT_EQ(rankRanges({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

}  // namespace
}  // namespace evsim

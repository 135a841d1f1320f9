// simulateWithin (simulation.h): the timeline before link sharing as a lower bound that lets the
// pruned search skip the sharing pass. The plan is link_sharing_test's expert all-to-all beside a
// DP bucket (tiny-moe 1M1P2D, EP 2, one GPU per node, 10 GB/s NICs): alone, B's eight
// all-to-alls take 8 Ta; sharing the NIC with the bucket, B takes 16 Ta (traced by hand there).
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "config/model_config.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

TEST(SimulateWithin, StopsBeforeSharingOnlyWhenTheUnsharedTimelineIsAlreadyTooLong) {
  Strategy s = test::strategy("1M1P2D", 1, 2);
  s.ep = 2;
  s.dp_overlap = true;
  s.dp_bucket_bytes = 40000;
  IterationPlan plan = buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-moe")),
                                          test::cluster(1, 0, test::kSlowLinks), s);
  const StagePlan& stage = plan.stages[0];
  const OpInstance& a2a = test::findOp(stage.forward, "moe_dispatch_alltoall", 0);
  ASSERT_GE(stage.dp_buckets.size(), 2u);
  const double ta = 16384 / 1e4, tb = 131328 / 1e4;
  std::vector<EventCost> costs(plan.events.size(), EventCost{0.0});
  costs[a2a.event].time_us = ta;
  costs[stage.dp_buckets[0].event].time_us = tb;

  IterationPlan off = plan;
  off.cluster.topology.link_sharing = false;
  const double alone_us = simulate(off, costs).summary.iteration_us;
  const double shared_us = simulate(plan, costs).summary.iteration_us;
  // Sharing stretched B by 8 Ta (link_sharing_test): the full time is the longer.
  ASSERT_GT(shared_us, alone_us + ta);

  double unshared_us = -1;
  // A limit below the unshared timeline: no simulation, its time reported.
  EXPECT_FALSE(simulateWithin(plan, costs, alone_us * (1 - 1e-9), unshared_us).has_value());
  EXPECT_DOUBLE_EQ(unshared_us, alone_us);
  // At or above it the whole simulation runs, sharing included (even when the shared time
  // exceeds the limit: only the unshared time is a bound the caller may prune on).
  unshared_us = -1;
  const std::optional<Simulation> within = simulateWithin(plan, costs, alone_us, unshared_us);
  ASSERT_TRUE(within.has_value());
  EXPECT_DOUBLE_EQ(unshared_us, alone_us);
  EXPECT_DOUBLE_EQ(within->summary.iteration_us, shared_us);
  const std::optional<Simulation> unlimited = simulateWithin(
      plan, costs, std::numeric_limits<double>::infinity(), unshared_us);
  ASSERT_TRUE(unlimited.has_value());
  EXPECT_DOUBLE_EQ(unlimited->summary.iteration_us, shared_us);
}

}  // namespace
}  // namespace evsim

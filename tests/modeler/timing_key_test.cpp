// timingKey (plan/plan_core.h): strategies with one key simulate to the same summary, so the
// pruned search simulates one of them; and the P2P sends in the closed-form bound (issue 34).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "plan/plan_core.h"
#include "plan/strategy_space.h"
#include "support/test_support.h"

namespace evsim {
namespace {

SimulationSummary simulated(const ModelConfig& model, const ClusterConfig& cluster,
                            const CostModel& costs, const Strategy& s) {
  IterationPlan plan = buildIterationPlan(model, cluster, s);
  std::vector<EventCost> event_costs = costs.costAll(plan.events);
  return simulate(std::move(plan), std::move(event_costs)).summary;
}

// Every valid candidate of a small space over the dimensions timingKey folds (ZeRO 0-3,
// recomputation none/selective/full) and those it keeps (schedule, v, SP, DP overlap), on two
// nodes so that link sharing runs.
std::vector<Strategy> candidates(const ModelConfig& model, const ClusterConfig& cluster) {
  Strategy base;
  base.global_batch = 32;
  StrategySpace space;
  space.gpus = 16;
  space.micro_batches = {1, 2};
  space.schedules = {Schedule::kDapple, Schedule::kInterleaved};
  space.virtual_stages = {2};
  space.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  space.sequence_parallel = {false, true};
  space.zero_stages = {0, 1, 2, 3};
  space.dp_overlaps = {false, true};
  std::vector<Strategy> out;
  for (Candidate& c : enumerateCandidates(model, cluster, base, space)) {
    if (!c.violation) out.push_back(std::move(c.strategy));
  }
  return out;
}

TEST(TimingKeyTest, StrategiesWithOneKeySimulateToTheSameSummary) {
  // tiny-llama has fused attention: selective recomputation re-runs nothing there.
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  ASSERT_TRUE(model.spec.flash_attention);
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  const std::vector<Strategy> all = candidates(model, cluster);
  int zero_pairs = 0, recompute_pairs = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Strategy key = timingKey(model, all[i]);
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (!(timingKey(model, all[j]) == key)) continue;
      zero_pairs += all[i].zero_stage != all[j].zero_stage;
      recompute_pairs += all[i].recompute != all[j].recompute;
      const SimulationSummary a = simulated(model, cluster, costs, all[i]);
      const SimulationSummary b = simulated(model, cluster, costs, all[j]);
      const std::string at = all[i].name() + all[i].techniques() + " / " + all[j].techniques();
      EXPECT_EQ(a.iteration_us, b.iteration_us) << at;  // bit for bit
      EXPECT_EQ(a.bubble_fraction, b.bubble_fraction) << at;
      EXPECT_EQ(a.flops_per_gpu_per_s, b.flops_per_gpu_per_s) << at;
      EXPECT_EQ(a.mfu, b.mfu) << at;
      EXPECT_EQ(a.provenance_share, b.provenance_share) << at;
    }
  }
  // Only selective beside none folds: ZeRO-2 reduces in every micro-batch's backward
  // (plan/zero2_buckets.h), ZeRO-1 once per step, so no two ZeRO stages share a key.
  EXPECT_EQ(zero_pairs, 0);
  EXPECT_GT(recompute_pairs, 4);
}

TEST(TimingKeyTest, SelectiveRecomputationKeepsItsKeyWithoutFusedAttention) {
  // tiny-gpt saves the s x s scores: selective recomputation re-runs the attention core, a
  // different timeline, so the key must keep it apart.
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-gpt"));
  ASSERT_FALSE(model.spec.flash_attention);
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  Strategy none = Strategy::of(1, 2, 8, 1, 32);
  Strategy selective = none;
  selective.recompute = Recompute::kSelective;
  ASSERT_FALSE(strategyViolation(model, cluster, selective));
  EXPECT_FALSE(timingKey(model, none) == timingKey(model, selective));
  EXPECT_GT(simulated(model, cluster, costs, selective).iteration_us,
            simulated(model, cluster, costs, none).iteration_us);
  // Every ZeRO stage keeps its own key (ZeRO-2 times apart from ZeRO-1: its buckets reduce in
  // each micro-batch's backward).
  for (int zero : {0, 1, 2, 3}) {
    Strategy s = none;
    s.zero_stage = zero;
    EXPECT_EQ(timingKey(model, s).zero_stage, zero);
  }
}

// ZeRO-2 as DeepSpeed runs it (plan/zero2_buckets.h): each bucket's reduce-scatter inside every
// micro-batch's backward, nothing reduced at the step but the parameters' all-gather. On one
// node (no link sharing), 1M1P4D, m = 4, buckets of 64 KiB (14 on tiny-llama): the device's DP
// time is m x the sum of the backward's bucket reductions plus the all-gather, each at its own
// cost; without overlap_comm every bucket blocks the backward (exposed = all of it), with it only
// what outlasts the layers beside it, at least each backward's last bucket.
TEST(TimingKeyTest, ZeroTwoReducesEachMicroBatchsBucketsInItsBackward) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  Strategy s = Strategy::of(1, 1, 4, 1, 16);
  s.zero_stage = 2;
  s.dp_bucket_bytes = 1 << 16;  // several buckets on tiny-llama
  ASSERT_FALSE(strategyViolation(model, cluster, s));
  for (bool overlap : {false, true}) {
    s.dp_overlap = overlap;
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.micro_batches, 4);
    const std::vector<EventCost> c = costs.costAll(plan.events);
    const StagePlan& st = plan.stages[0];
    double buckets_us = 0, last_us = 0;
    int reductions = 0;
    for (const OpInstance& op : st.backward) {
      if (op.stream != Stream::kDpComm) continue;
      ++reductions;
      buckets_us += c[op.event].time_us;
      last_us = c[op.event].time_us;
    }
    // fp32 model and wire: buckets of 65,536 / 4 = 16,384 elements. The gradients in backward
    // order (plan/zero2_buckets.h): the head's output weight 512 x 64 = 32,768 then its norm 64;
    // per block FC2 192 x 64 = 12,288, FC1 384 x 64 = 24,576, projection 4,096, QKV
    // 64 x (64 + 2 x 2 x 16) = 8,192, the norms 128; the embedding 32,768. Each bucket is reduced
    // when the next gradient would overflow it: 32,768 (at the norm); 64 + 12,288 (at block 3's
    // FC1); 24,576 (at its projection); 4,096 + 8,192 + 128 = 12,416 (at block 2's FC2), 12,288
    // (at its FC1), 24,576 (at its projection), the same three for blocks 1 and 0; 12,416 at the
    // embedding; the embedding's 32,768 by the epilogue: 3 + 3 x 3 + 2 = 14.
    ASSERT_EQ(reductions, 14) << overlap;
    ASSERT_EQ(st.dp_reduce_scatter, -1);
    ASSERT_TRUE(st.dp_buckets.empty());
    ASSERT_GE(st.dp_allgather, 0);
    // The step's all-gather is issued by the host at the step: its host time with it
    // (simulation.cpp); the in-task reductions count their device time.
    const double gather_us = c[st.dp_allgather].host_us + c[st.dp_allgather].time_us;
    const SimulationSummary sum = simulate(std::move(plan), std::vector<EventCost>(c)).summary;
    const double total = 4 * buckets_us + gather_us;
    EXPECT_NEAR(sum.mean_device.dp_comm_us, total, 1e-6 * total) << overlap;
    if (!overlap) {
      EXPECT_NEAR(sum.mean_device.exposed_dp_comm_us, total, 1e-6 * total);
    } else {
      // The last bucket of each backward and the all-gather stay exposed, at least.
      EXPECT_LT(sum.mean_device.exposed_dp_comm_us, total);
      EXPECT_GE(sum.mean_device.exposed_dp_comm_us, 4 * last_us + gather_us - 1e-6 * total);
    }
  }
}

TEST(TimingKeyTest, TheBoundCountsEveryP2PSendOfADevice) {
  // A lone task's P2P send holds its device (timing_engine.h): a middle device of a 1F1B pipeline
  // sends one activation and one gradient per micro-batch, so the bound is at least m x (its
  // ops' serial time + both sends), summed here from the plan's own op lists, P2P events and the
  // cost model (the least over the pipeline classes).
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  const ClosedFormTier tier(model, cluster, costs, 0.1, cache);
  const Strategy s = Strategy::of(2, 4, 2, 1, 64);  // 16 GPUs: two nodes
  ASSERT_FALSE(strategyViolation(model, cluster, s));
  IterationPlan plan = buildIterationPlan(model, cluster, s);
  std::vector<EventCost> event_costs = costs.costAll(plan.events);
  const int device = 1;
  double serial_us = 0;
  for (const OpList* ops : {&plan.stages[device].forward, &plan.stages[device].backward}) {
    for (const OpInstance& op : *ops) {
      if (op.overlap_ops == 0) serial_us += event_costs[op.event].time_us;
    }
  }
  auto leastSend = [&](std::vector<int> PipelineClass::*sends, int link) {
    double least = std::numeric_limits<double>::infinity();
    for (const PipelineClass& c : plan.pipelines) {
      const EventCost& e = event_costs[(c.*sends)[link]];
      least = std::min(least, e.host_us + e.time_us);
    }
    return least;
  };
  // Its activation send to device + 1 and its gradient send back to device - 1.
  const double sends_us = leastSend(&PipelineClass::forward_p2p, device) +
                          leastSend(&PipelineClass::backward_p2p, device - 1);
  ASSERT_GT(sends_us, 0);
  const double m = static_cast<double>(plan.micro_batches);
  const ClosedFormResult closed = tier.evaluate(s);
  ASSERT_TRUE(closed.fits);
  EXPECT_GE(closed.lower_bound_us, m * (serial_us + sends_us) * (1 - 1e-12));
  Simulation sim = simulate(std::move(plan), std::move(event_costs));
  EXPECT_LE(closed.lower_bound_us, sim.summary.iteration_us * (1 + 1e-12));
}

}  // namespace
}  // namespace evsim

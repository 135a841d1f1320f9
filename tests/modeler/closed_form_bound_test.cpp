// The pruned search's closed-form tier (issue 14): its memory equal to the plan's estimate and its
// time bound never above the simulated time (the gradient reduction's wire dtype, uncosted ops,
// ZeRO-3's transfers, the overlap slowdown, activation states shared between threads). ZeRO-2's
// bound: zero2_bound_test.cpp.
#include "modeler/pruned_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "io/profile_db.h"
#include "modeler/closed_form_tier.h"
#include "modeler/cost_source.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "plan/zero2_buckets.h"
#include "support/pruned_search_cases.h"
#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using namespace test_support;

TEST(PrunedSearchTest, ClosedFormMemoryIsThePlansAndTheBoundIsBelowTheSimulation) {
  // Every valid candidate of the tiny space: memory equal to the plan's estimate, and
  // 0 < bound <= simulated iteration time. One workspace in enumeration order, as a search's
  // worker evaluates them: what it keeps per class (the memory peak by ZeRO stage and offload,
  // shared by both DP overlaps; activation copies' times) is checked too.
  BundledSearch b = bundledSearches()[2];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  ClosedFormTier tier(model, cluster, costs, 0.1, cache);
  ClosedFormTier::Workspace workspace;
  int checked = 0;
  for (Candidate& c : enumerateCandidates(model, cluster, b.options.base, b.options.space)) {
    if (c.violation) continue;
    for (bool overlap : {false, true}) {
      c.strategy.dp_overlap = overlap;
      if (strategyViolation(model, cluster, c.strategy)) continue;  // ZeRO-3 has no buckets
      ClosedFormResult closed = tier.evaluate(c.strategy, workspace);
      IterationPlan plan = buildIterationPlan(model, cluster, c.strategy);
      MemoryEstimate mem = estimateMemory(plan, 0.1);
      EXPECT_EQ(closed.peak_memory_bytes, mem.peak_bytes);
      EXPECT_EQ(closed.peak_memory_stage, mem.peak_stage);
      EXPECT_EQ(closed.fits, mem.fits());
      EXPECT_EQ(closed.micro_batches, plan.micro_batches);
      if (!closed.fits) continue;
      std::vector<EventCost> event_costs = costs.costAll(plan.events);
      Simulation sim = simulate(std::move(plan), std::move(event_costs));
      EXPECT_GT(closed.lower_bound_us, 0);
      EXPECT_LE(closed.lower_bound_us, sim.summary.iteration_us * (1 + 1e-12))
          << c.strategy.name() << c.strategy.techniques();
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// The bound asks for the DP gradient reduction in the plan's wire dtype: Megatron reduces a bf16
// model's gradients in fp32 (plan/optimizer_step.h), so a source that covers only that event (as a
// profile of the plan does) must give a bound, 0 < bound <= the simulated time; asking for a bf16
// reduction would find nothing and bound nothing. With --grad-reduce-in-bf16 the plan's and the
// bound's reduction is bf16, which this source does not cover: no bound (0), not a wrong one.
TEST(PrunedSearchTest, TheBoundCostsTheGradientReductionInThePlansWireDtype) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "llama3-8b"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel analytic(cluster, nullptr, true);
  const CostModel costs = costsWithout(cluster, analytic, [](const Event& e) {
    const bool reduction = e.kind == EventKind::kAllReduce || e.kind == EventKind::kReduceScatter;
    return reduction && e.placement.group_size == 2 && e.dtype != DType::kFp32;
  });
  PlanCache cache;
  const ClosedFormTier tier(model, cluster, costs, 0.1, cache);
  for (const int zero : {0, 1}) {
    SCOPED_TRACE(zero);
    Strategy s = Strategy::of(8, 1, 2, 1, 4);  // TP 8 (its all-reduces: groups of 8), DP 2
    s.zero_stage = zero;
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const ClosedFormResult closed = tier.evaluate(s);
    EXPECT_GT(closed.lower_bound_us, 0);
    EXPECT_LE(closed.lower_bound_us, sim.summary.iteration_us * (1 + 1e-12));
    s.grad_reduce_in_bf16 = true;
    EXPECT_EQ(tier.evaluate(s).lower_bound_us, 0);
  }
}

// A workspace keeps the events of the layer keys it computed (closed_form_facts.h, LayerEvents),
// so a later key finds most of its events there instead of costing them. An op without a cost
// must still leave every key that runs it unbounded (0): here the GEMMs, which every block runs.
// The ZeRO-0 strategy is evaluated first, then the ZeRO-3 one, whose layer key differs (its
// parameter gathers) but whose GEMMs are the same events: found in the workspace, they must still
// count as uncosted. With every cost known, the same two have a bound (> 0), in either order.
TEST(PrunedSearchTest, AnUncostedOpLeavesEveryLayerKeyUnboundedInOneWorkspace) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "llama3-8b"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel analytic(cluster, nullptr, true);
  const CostModel no_gemms =
      costsWithout(cluster, analytic, [](const Event& e) { return e.op == "gemm"; });
  Strategy plain = Strategy::of(8, 1, 2, 1, 4);
  Strategy zero3 = plain;
  zero3.zero_stage = 3;
  // Both orders, each in a fresh workspace: ZeRO-0's events first (the third evaluation finds its
  // layer times in the workspace), and ZeRO-3's first (ZeRO-0 computed beside its events).
  const std::vector<std::vector<Strategy>> orders = {{plain, zero3, plain}, {zero3, plain}};
  for (const CostModel* costs : {&analytic, &no_gemms}) {
    const bool complete = costs == &analytic;
    SCOPED_TRACE(complete ? "every cost" : "no GEMM costs");
    for (const std::vector<Strategy>& order : orders) {
      PlanCache cache;
      const ClosedFormTier tier(model, cluster, *costs, 0.1, cache);
      ClosedFormTier::Workspace workspace;
      for (const Strategy& s : order) {
        const ClosedFormResult closed = tier.evaluate(s, workspace);
        ASSERT_TRUE(closed.fits) << s.name();
        if (complete) {
          EXPECT_GT(closed.lower_bound_us, 0) << s.name() << " zero " << s.zero_stage;
        } else {
          EXPECT_EQ(closed.lower_bound_us, 0) << s.name() << " zero " << s.zero_stage;
        }
      }
    }
  }
}

TEST(PrunedSearchTest, TheZero3BoundCountsEveryBlocksGathersAndReduceScatters) {
  // ZeRO-3 runs each block's parameter gathers and gradient reduce-scatter in the task, prefetched
  // beside the block before or after it (plan/sharded_prefetch.h): in the steady state a block
  // costs at least the longer of its own ops and its transfers (which share the one DP stream).
  // One device (P = 1) spends at least m x that, summed over the blocks, plus the other ops, which
  // the bound must reach (before it counted transfers at all, it fell to 13% of the simulated time
  // at 16,384 GPUs). Summed here from the plan's own op lists and the cost model; the embedding's
  // and the head's transfers, which the bound leaves out, are left out here too.
  ModelConfig model = loadModelConfig(test::configPath("models", "tiny-gpt"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "cpu-local"));
  CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  ClosedFormTier tier(model, cluster, costs, 0.1, cache);
  for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    Strategy s = Strategy::of(1, 1, 4, 1, 16);
    s.zero_stage = 3;
    s.recompute = recompute;
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    double serial_us = 0, transfers_us = 0;
    for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
      std::map<int, double> block_ops_us, block_transfers_us;
      for (const OpInstance& op : *ops) {
        const double us = event_costs[op.event].time_us;
        if (op.stream != Stream::kDpComm) {
          serial_us += us;
          if (op.layer >= 0) block_ops_us[op.layer] += us;
        } else if (op.layer >= 0) {  // the embedding's and the head's left out
          block_transfers_us[op.layer] += us;
          transfers_us += us;
        }
      }
      for (const auto& [layer, us] : block_transfers_us) {
        serial_us += std::max(0.0, us - block_ops_us[layer]);
      }
    }
    ASSERT_GT(transfers_us, 0);  // the plan does gather per block
    const double m = static_cast<double>(plan.micro_batches);
    ClosedFormResult closed = tier.evaluate(s);
    ASSERT_TRUE(closed.fits);
    EXPECT_GE(closed.lower_bound_us, m * serial_us * (1 - 1e-12));
    Simulation sim = simulate(std::move(plan), std::move(event_costs));
    EXPECT_LE(closed.lower_bound_us, sim.summary.iteration_us * (1 + 1e-12));
  }
}

TEST(PrunedSearchTest, TheBoundStaysBelowTheSimulationWithTheOverlapSlowdown) {
  // The slowdown only lengthens ops (factors >= 1), and the closed form leaves it out.
  BundledSearch b = bundledSearches()[3];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  cluster.device.overlap_slowdown.nvlink.value = b.overlap_slowdown;
  cluster.device.overlap_slowdown.network.value = b.overlap_slowdown;
  CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  ClosedFormTier tier(model, cluster, costs, 0.1, cache);
  int checked = 0, slowed = 0;
  for (const Candidate& c : enumerateCandidates(model, cluster, b.options.base, b.options.space)) {
    if (c.violation) continue;
    ClosedFormResult closed = tier.evaluate(c.strategy);
    if (!closed.fits) continue;
    IterationPlan plan = buildIterationPlan(model, cluster, c.strategy);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    Simulation sim = simulate(std::move(plan), std::move(event_costs));
    EXPECT_LE(closed.lower_bound_us, sim.summary.iteration_us * (1 + 1e-12))
        << c.strategy.name() << c.strategy.techniques();
    ++checked;
    if (sim.summary.max_device.overlap_slowdown_us > 0) ++slowed;
  }
  EXPECT_GT(checked, 10);
  EXPECT_GT(slowed, 0);  // the space does exercise the slowdown
}

TEST(PrunedSearchTest, SharedActivationStatesGiveWhatEachCandidateWalkedAloneGives) {
  // The tier's activation states are shared by its workspaces (closed_form_tier.h): two threads
  // evaluating the space at once, then again after releaseShared(), must give each candidate the
  // memory and bound a tier of its own gives it (its own walk of its shape's orders).
  BundledSearch b = bundledSearches()[1];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  CostModel costs(cluster, nullptr, true);
  std::vector<Strategy> valid;
  for (const Candidate& c : enumerateCandidates(model, cluster, b.options.base, b.options.space)) {
    if (!c.violation) valid.push_back(c.strategy);
  }
  ASSERT_GT(valid.size(), 50u);
  std::vector<ClosedFormResult> alone;
  std::set<std::tuple<int, int, int64_t>> shapes;  // (schedule, P x v, m): walks to share
  for (const Strategy& s : valid) {
    PlanCache cache;
    alone.push_back(ClosedFormTier(model, cluster, costs, 0.1, cache).evaluate(s));
    shapes.emplace(static_cast<int>(s.schedule), s.pp * s.virtual_stages, s.microBatches());
  }
  ASSERT_LT(shapes.size(), valid.size() / 4);  // candidates do share shapes
  PlanCache cache;
  const ClosedFormTier tier(model, cluster, costs, 0.1, cache);
  for (int round = 0; round < 2; ++round) {
    std::vector<ClosedFormResult> shared(valid.size());
    // Both threads go through every candidate (in opposite orders), so both ask for each shape.
    auto walk = [&](bool forward) {
      ClosedFormTier::Workspace workspace;
      for (size_t n = 0; n < valid.size(); ++n) {
        const size_t i = forward ? n : valid.size() - 1 - n;
        const ClosedFormResult r = tier.evaluate(valid[i], workspace);
        if (forward) shared[i] = r;
      }
    };
    std::thread other(walk, false);
    walk(true);
    other.join();
    for (size_t i = 0; i < valid.size(); ++i) {
      const std::string at = "round " + std::to_string(round) + ": " + valid[i].name();
      EXPECT_EQ(shared[i].peak_memory_bytes, alone[i].peak_memory_bytes) << at;
      EXPECT_EQ(shared[i].peak_memory_stage, alone[i].peak_memory_stage) << at;
      EXPECT_EQ(shared[i].fits, alone[i].fits) << at;
      EXPECT_EQ(shared[i].lower_bound_us, alone[i].lower_bound_us) << at;
    }
    tier.releaseShared();
  }
}

}  // namespace
}  // namespace evsim

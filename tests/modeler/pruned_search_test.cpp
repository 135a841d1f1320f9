// The pruned, streaming search (issue 14) against the exhaustive one: the same top 10 on the
// bundled searches, the closed-form tier's memory equal to the plan's and its time bound never
// above the simulated time, counts that add up, and results independent of the thread count.
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
#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// `all`'s costs without the events `missing` picks (no cost for them: as a profile that lacks
// them), as a cost model of its own.
CostModel costsWithout(const ClusterConfig& cluster, const CostModel& all,
                       std::function<bool(const Event&)> missing) {
  class Without : public CostSource {
   public:
    Without(const CostModel& all, std::function<bool(const Event&)> missing)
        : all_(all), missing_(std::move(missing)) {}
    std::optional<EventCost> cost(const Event& e) const override {
      if (missing_(e)) return std::nullopt;
      return all_.cost(e);
    }

   private:
    const CostModel& all_;
    std::function<bool(const Event&)> missing_;
  };
  std::vector<std::unique_ptr<CostSource>> sources;
  sources.push_back(std::make_unique<Without>(all, std::move(missing)));
  return CostModel(cluster, std::move(sources));
}

struct BundledSearch {
  std::string model, cluster;
  SearchOptions options;
  double overlap_slowdown = 0;  // > 0: both of the device's factors set to it

  ModelConfig loadModel() const { return loadModelConfig(test::configPath("models", model)); }
  // The cluster with the overlap slowdown applied.
  ClusterConfig loadSlowedCluster() const {
    ClusterConfig c = loadClusterConfig(test::configPath("clusters", cluster));
    if (overlap_slowdown > 0) {
      c.device.overlap_slowdown.nvlink.value = overlap_slowdown;
      c.device.overlap_slowdown.network.value = overlap_slowdown;
    }
    return c;
  }
};

SearchOptions space(int64_t gpus, int64_t global_batch, std::vector<int64_t> micro_batches,
                    std::vector<Schedule> schedules) {
  SearchOptions o = test_support::searchOptions(gpus, global_batch, std::move(micro_batches),
                                                std::move(schedules));
  o.top_k = 10;
  return o;
}

// The searches the docs run (docs/SEARCH.md, README.md), and a tiny one over every dimension.
std::vector<BundledSearch> bundledSearches() {
  std::vector<BundledSearch> out;
  out.push_back({"bert-exlarge", "a40-4x4",
                 space(16, 16, {1, 2, 4, 8}, {Schedule::kGpipe, Schedule::kDapple})});
  SearchOptions gpt3 = space(1024, 1536, {1, 2}, {Schedule::kDapple, Schedule::kInterleaved});
  gpt3.space.virtual_stages = {2, 3};
  gpt3.space.recomputes = {Recompute::kNone, Recompute::kSelective};
  gpt3.space.sequence_parallel = {false, true};
  out.push_back({"gpt3-175b", "dgx-a100", gpt3});
  SearchOptions tiny =
      space(4, 16, {1, 2, 4},
            {Schedule::kGpipe, Schedule::kDapple, Schedule::kInterleaved, Schedule::kZbv});
  tiny.space.virtual_stages = {2, 3, 4};
  tiny.space.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  tiny.space.sequence_parallel = {false, true};
  tiny.space.zero_stages = {0, 1, 2, 3};
  tiny.space.dp_overlaps = {false, true};
  tiny.space.offloads = {Offload::kNone, Offload::kOptimizer, Offload::kActivations,
                         Offload::kBoth};
  out.push_back({"tiny-gpt", "cpu-local", tiny});
  // The overlap slowdown on (issue 28): DP buckets beside the backward and CP exchanges beside
  // attention slow compute; the closed form's bound ignores it and must stay a lower bound.
  SearchOptions slowed = space(4, 16, {1, 2}, {Schedule::kDapple, Schedule::kInterleaved});
  slowed.space.virtual_stages = {2};
  slowed.space.zero_stages = {0, 1};
  slowed.space.dp_overlaps = {false, true};
  slowed.space.context_parallel = {1, 2};
  out.push_back({"tiny-llama", "cpu-local", slowed, 1.5});
  return out;
}

void expectSameCandidate(const CandidateResult& a, const CandidateResult& b,
                         const std::string& at) {
  EXPECT_EQ(a.strategy.name(), b.strategy.name()) << at;
  EXPECT_EQ(a.strategy.micro_batch, b.strategy.micro_batch) << at;
  EXPECT_EQ(a.strategy.schedule, b.strategy.schedule) << at;
  EXPECT_EQ(a.strategy.virtual_stages, b.strategy.virtual_stages) << at;
  EXPECT_EQ(a.strategy.recompute, b.strategy.recompute) << at;
  EXPECT_EQ(a.strategy.sequence_parallel, b.strategy.sequence_parallel) << at;
  EXPECT_EQ(a.strategy.zero_stage, b.strategy.zero_stage) << at;
  EXPECT_EQ(a.strategy.dp_overlap, b.strategy.dp_overlap) << at;
  EXPECT_EQ(a.strategy.offload, b.strategy.offload) << at;
  EXPECT_EQ(a.rank, b.rank) << at;
  EXPECT_EQ(a.iteration_us, b.iteration_us) << at;  // the same simulation, bit for bit
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << at;
  EXPECT_EQ(a.peak_memory_stage, b.peak_memory_stage) << at;
  EXPECT_EQ(a.bubble_fraction, b.bubble_fraction) << at;
}

TEST(PrunedSearchTest, SameTopTenAsTheExhaustiveSearchOnTheBundledSearches) {
  for (const BundledSearch& b : bundledSearches()) {
    const ModelConfig model = b.loadModel();
    const ClusterConfig cluster = b.loadSlowedCluster();
    CostModel costs(cluster, nullptr, /*analytic_fallback=*/true);
    SearchReport all = runSearch(model, cluster, costs, b.options);
    SearchReport pruned = runPrunedSearch(model, cluster, costs, b.options);
    const std::string name = b.model + " on " + b.cluster;
    ASSERT_GE(all.ok, 10) << name;  // a top 10 to compare
    ASSERT_EQ(pruned.candidates.size(), 10u) << name;
    const std::vector<CandidateResult> pruned_rows = pruned.candidates.toVector();
    const std::vector<CandidateResult> all_rows = all.candidates.toVector();
    for (int i = 0; i < 10; ++i) {
      expectSameCandidate(pruned_rows[i], all_rows[i], name + " #" + std::to_string(i + 1));
    }
    EXPECT_EQ(pruned.total(), static_cast<int64_t>(all.candidates.size()) + all.equivalent) << name;
    EXPECT_EQ(pruned.ok, all.ok) << name;
    EXPECT_EQ(pruned.oom, all.oom) << name;
    EXPECT_EQ(pruned.invalid, all.invalid) << name;
    // Tiers: every valid candidate passes the closed form; the ok ones are simulated or pruned.
    EXPECT_EQ(pruned.closed_form, pruned.valid) << name;
    EXPECT_EQ(pruned.simulated + pruned.pruned_by_bound, pruned.ok) << name;
    int64_t by_rule = 0;
    for (const auto& [rule, count] : pruned.invalid_by_rule) by_rule += count;
    EXPECT_EQ(by_rule, pruned.invalid) << name;
  }
}

TEST(PrunedSearchTest, APoolSmallerThanTheTopTakesMorePassesAndTheSameTopTen) {
  // A pool of 3 cannot hold the top 10: each pass simulates the 3 best bounds of its range and
  // sets the rest aside, so the enumeration runs again until the top 10 is full and the least
  // bound set aside exceeds the 10th time. The result is the one-pass search's, and every ok
  // candidate is still counted once, simulated or pruned.
  for (const BundledSearch& b : bundledSearches()) {
    const ModelConfig model = b.loadModel();
    const ClusterConfig cluster = b.loadSlowedCluster();
    CostModel costs(cluster, nullptr, /*analytic_fallback=*/true);
    const SearchReport one_pass = runPrunedSearch(model, cluster, costs, b.options);
    SearchOptions small = b.options;
    small.pool_capacity = 3;
    const SearchReport passes = runPrunedSearch(model, cluster, costs, small);
    const std::string name = b.model + " on " + b.cluster;
    EXPECT_EQ(one_pass.passes, 1) << name;
    // At least ceil(10 / 3) passes to fill the top 10.
    EXPECT_GE(passes.passes, 4) << name;
    ASSERT_EQ(passes.candidates.size(), one_pass.candidates.size()) << name;
    const std::vector<CandidateResult> rows = passes.candidates.toVector();
    const std::vector<CandidateResult> one_rows = one_pass.candidates.toVector();
    for (size_t i = 0; i < rows.size(); ++i) {
      expectSameCandidate(rows[i], one_rows[i], name + " #" + std::to_string(i + 1));
    }
    EXPECT_EQ(passes.ok, one_pass.ok) << name;
    EXPECT_EQ(passes.oom, one_pass.oom) << name;
    EXPECT_EQ(passes.invalid, one_pass.invalid) << name;  // counted in the first pass only
    EXPECT_EQ(passes.closed_form, passes.valid) << name;
    EXPECT_EQ(passes.simulated + passes.pruned_by_bound, passes.ok) << name;
  }
}

TEST(PrunedSearchTest, TheBoundPrunesTheWidestBundledSpace) {
  // gpt3-175b with the README's techniques: most fitting candidates cannot reach the top 10.
  BundledSearch b = bundledSearches()[1];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  CostModel costs(cluster, nullptr, true);
  SearchReport pruned = runPrunedSearch(model, cluster, costs, b.options);
  EXPECT_GT(pruned.pruned_by_bound, 0);
  EXPECT_LT(pruned.simulated, pruned.ok);
}

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

// The ZeRO-2 bound's cases: Llama 3 8B at 256 tokens on DGX H100s, where the reductions (1 B
// parameters a rank in fp32 a micro-batch at TP 8) far outlast the compute, so the reductions, not
// the pipeline, make the bound.
class Zero2BoundTest : public ::testing::Test {
 protected:
  static ModelConfig shortLlama() {
    ModelConfig m = loadModelConfig(test::configPath("models", "llama3-8b"));
    m.seq_length = 256;
    return m;
  }
  const ModelConfig model = shortLlama();
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs{cluster, nullptr, true};
  PlanCache cache;
  const ClosedFormTier tier{model, cluster, costs, 0.1, cache};

  // TP 8, DP 4 over four nodes, m = 4, ZeRO-2, with or without --dp-overlap.
  static Strategy zero2(bool overlap) {
    Strategy s = Strategy::of(8, 1, 4, 1, 16);
    s.zero_stage = 2;
    s.dp_overlap = overlap;
    return s;
  }
  // One micro-batch's buckets on stage 0: their summed cost, and the cost of one reduce-scatter
  // of all their bytes (nullopt: no bucket).
  struct Buckets {
    double summed_us = 0;
    double one_us = 0;
  };
  std::optional<Buckets> buckets(const IterationPlan& plan,
                                 const std::vector<EventCost>& event_costs) const {
    Buckets out;
    int64_t bytes = 0;
    std::optional<Event> bucket;
    for (const OpInstance& op : plan.stages[0].backward) {
      if (op.name != kZero2ReduceName) continue;
      bucket = plan.events[op.event].event;
      bytes += bucket->message_bytes;
      out.summed_us += event_costs[op.event].time_us;
    }
    if (!bucket) return std::nullopt;
    out.one_us = costs
                     .cost(makeCommunication(EventKind::kReduceScatter, bytes, bucket->placement,
                                             bucket->dtype))
                     ->time_us;
    return out;
  }
};

// ZeRO-2 reduce-scatters every micro-batch's buckets on the DP stream, one at a time: the bound
// holds a device to m reduce-scatters of all its dense gradients (one message, which costs no
// more than the buckets) plus its step, and stays below the simulation, with and without overlap.
TEST_F(Zero2BoundTest, HoldsEveryMicroBatchsReductions) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap);
    const Strategy s = zero2(overlap);
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.micro_batches, 4);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    const std::optional<Buckets> reductions = buckets(plan, event_costs);
    ASSERT_TRUE(reductions.has_value());
    const double one_us = reductions->one_us;
    // concave in bytes: one message <= the parts
    EXPECT_LE(one_us, reductions->summed_us * (1 + 1e-12));
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const double bound = tier.evaluate(s).lower_bound_us;
    EXPECT_GE(bound, 4 * one_us);
    EXPECT_GT(4 * one_us, 0.5 * sim.summary.iteration_us);  // the case this test is about
    EXPECT_LE(bound, sim.summary.iteration_us * (1 + 1e-12));
  }
}

// ZeRO-2's reductions are ops of every micro-batch's backward task: without --dp-overlap they run
// between its compute ops, so one device (P = 1) spends at least m x (F + B + the buckets' device
// time); with it they run beside the ops on the DP stream, one at a time, and the task ends after
// the last, so at least m x (F + max(B, the buckets)). The bound counts the buckets as one
// reduce-scatter of all the gradients (no more than the parts) and must reach those sums, summed
// here from the plan's own op lists, while staying below the simulation. (Before, the reductions
// bounded only the DP stream, m x one reduce-scatter: Llama 3.1 405B's ZeRO-2 candidates on 1,024
// GPUs were bounded at 74 s and simulated at 105-140 s, 10 of its 50 simulations.)
TEST_F(Zero2BoundTest, CountsTheReductionsInsideEachBackward) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap);
    const Strategy s = zero2(overlap);
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.micro_batches, 4);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    // One micro-batch's forward and backward compute (every op blocks: no CP, no overlap) and
    // its buckets, summed by hand from the plan.
    double forward_us = 0, backward_us = 0;
    for (const OpInstance& op : plan.stages[0].forward) {
      ASSERT_EQ(op.overlap_ops, 0) << op.name;
      forward_us += event_costs[op.event].time_us;
    }
    for (const OpInstance& op : plan.stages[0].backward) {
      if (op.name == kZero2ReduceName) continue;
      ASSERT_EQ(op.overlap_ops, 0) << op.name;
      backward_us += event_costs[op.event].time_us;
    }
    const std::optional<Buckets> reductions = buckets(plan, event_costs);
    ASSERT_TRUE(reductions.has_value());
    const double one_us = reductions->one_us;
    // concave in bytes: one message <= the parts
    EXPECT_LE(one_us, reductions->summed_us * (1 + 1e-12));
    ASSERT_GT(one_us, backward_us);  // the case this test is about: the reductions outlast B
    const double task_us = overlap ? std::max(backward_us, one_us) : backward_us + one_us;
    const double work_us = 4 * (forward_us + task_us);
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const double bound = tier.evaluate(s).lower_bound_us;
    EXPECT_GE(bound, work_us * (1 - 1e-12));
    EXPECT_LE(bound, sim.summary.iteration_us * (1 + 1e-12));
  }
}

// With windows in the backward (an op beside the next ones) small buckets close inside them: a
// reduction there takes a window's slot, so by the window rule the task can grow by less than the
// reduction (a comm op C beside W with w last, a reduction R inserted: max(C, W - w + R) + w,
// less than max(C, W) + R when C > W - w). The bound then takes the longer of the backward and
// its reductions, not their sum, and must stay at most the simulated time. (The sum also stayed
// below the simulation in these six cases: no case found where it breaks; the longer-of form is
// the one that provably holds.)
TEST_F(Zero2BoundTest, StaysABoundWhenBucketsCloseInsideOverlapWindows) {
  // Windows from --tp-comm-overlap (TP 8 in a node), and from a CP 2 ring across two nodes (its
  // exchanges outlast the attention beside them at 128 tokens a rank: comm-bound windows).
  for (const int cp : {1, 2}) {
    for (const int64_t bucket_bytes : {int64_t{1} << 20, int64_t{16} << 20, int64_t{0}}) {
      SCOPED_TRACE(::testing::Message() << "cp " << cp << ", bucket " << bucket_bytes);
      Strategy s = Strategy::of(8, 1, 4 / cp, 1, 16);  // TP 8 x CP x DP over four nodes
      s.cp = cp;
      s.zero_stage = 2;
      s.sequence_parallel = true;
      s.tp_comm_overlap = cp == 1;
      s.dp_bucket_bytes = bucket_bytes;
      IterationPlan plan = buildIterationPlan(model, cluster, s);
      std::vector<EventCost> event_costs = costs.costAll(plan.events);
      bool windows = false;
      double reductions_us = 0;
      for (const OpInstance& op : plan.stages[0].backward) {
        windows = windows || op.overlap_ops > 0;
        if (op.name == kZero2ReduceName) reductions_us += event_costs[op.event].time_us;
      }
      ASSERT_TRUE(windows);
      ASSERT_GT(reductions_us, 0);
      const Simulation sim = simulate(std::move(plan), std::move(event_costs));
      const double bound = tier.evaluate(s).lower_bound_us;
      EXPECT_GT(bound, 0);
      EXPECT_LE(bound, sim.summary.iteration_us * (1 + 1e-12));
    }
  }
}

// A candidate is simulated in two passes (pruned_search.h): its timeline before link sharing first
// (sharing only lengthens it, so its time U bounds the simulated time T more tightly than the
// closed form's bound), then, only when U is the least key left, the full simulation with
// sharing. Checked on every fitting candidate of a space with context parallelism across nodes
// (link sharing stretches a third of them) and ZeRO-2, simulated both ways here: bound <= U <= T.
// The search keeps the three least T, and simulates in full at least every candidate whose U is
// at most the third time (none of them can be pruned).
TEST(PrunedSearchTest, LinkSharingRunsAfterTheTimeBeforeItAndTheChainOfBoundsHolds) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "llama3-8b"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  SearchOptions options = space(32, 64, {1}, {Schedule::kDapple, Schedule::kInterleaved});
  options.space.virtual_stages = {2};
  options.space.context_parallel = {2, 4};
  options.space.zero_stages = {1, 2};
  options.space.dp_overlaps = {false, true};
  options.space.sequence_parallel = {true};
  options.top_k = 3;
  PlanCache cache;
  const ClosedFormTier tier(model, cluster, costs, options.memory_headroom, cache);
  std::vector<double> unshared, full;
  int stretched = 0;
  for (const Candidate& c : enumerateCandidates(model, cluster, options.base, options.space)) {
    if (c.violation) continue;
    const ClosedFormResult closed = tier.evaluate(c.strategy);
    if (!closed.fits) continue;
    IterationPlan plan = buildIterationPlan(model, cluster, c.strategy);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    double u = 0;
    ASSERT_FALSE(simulateWithin(plan, event_costs, std::numeric_limits<double>::lowest(), u));
    const double t = simulate(std::move(plan), std::move(event_costs)).summary.iteration_us;
    const std::string at = c.strategy.name() + c.strategy.techniques();
    EXPECT_GT(closed.lower_bound_us, 0) << at;
    EXPECT_LE(closed.lower_bound_us, u * (1 + 1e-12)) << at;
    EXPECT_LE(u, t * (1 + 1e-12)) << at;
    if (t > u * (1 + 1e-6)) ++stretched;
    unshared.push_back(u);
    full.push_back(t);
  }
  ASSERT_GT(full.size(), 50u);
  EXPECT_GT(stretched, 10);  // link sharing does lengthen many of them
  std::vector<double> sorted = full;
  std::sort(sorted.begin(), sorted.end());
  const double third = sorted[2];
  const SearchReport report = runPrunedSearch(model, cluster, costs, options);
  const std::vector<CandidateResult> rows = report.candidates.toVector();
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rows[i].iteration_us, sorted[i]) << i;
  EXPECT_EQ(report.ok, static_cast<int64_t>(full.size()));
  EXPECT_EQ(report.simulated + report.pruned_by_bound, report.ok);
  const auto reaching = std::count_if(unshared.begin(), unshared.end(),
                                      [&](double u) { return u <= third; });
  EXPECT_GE(report.simulated, reaching);
  EXPECT_LT(report.simulated, report.ok / 4);  // most were pruned before any sharing
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

TEST(PrunedSearchTest, ResultsDoNotDependOnTheThreadCount) {
  // Each worker enumerates groups of its own with a pool of its own (candidate_stream.h); merged,
  // the counts, the invalid rules' first examples and the closest OOM candidate are one
  // enumeration's. With a pool of 3 the merged pools must also set aside the same candidates
  // (the same passes).
  // The rounds simulate longest first (any thread may take any simulation) and the activation
  // states are walked once for every worker (the first to ask walks, the others wait): 2 and 3
  // threads against 1, with the top K filled over one round (10) or the first round taking the
  // one simulation that fills it (1).
  BundledSearch b = bundledSearches()[1];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  CostModel costs(cluster, nullptr, true);
  for (auto [pool, top, threads] :
       {std::tuple{b.options.pool_capacity, 10, 3u}, std::tuple{size_t{3}, 10, 3u},
        std::tuple{b.options.pool_capacity, 1, 2u}, std::tuple{size_t{3}, 3, 2u}}) {
    const std::string at = "pool " + std::to_string(pool) + ", top " + std::to_string(top) +
                           ", " + std::to_string(threads) + " threads";
    b.options.pool_capacity = pool;
    b.options.top_k = top;
    b.options.threads = 1;
    SearchReport one = runPrunedSearch(model, cluster, costs, b.options);
    b.options.threads = threads;
    SearchReport three = runPrunedSearch(model, cluster, costs, b.options);
    ASSERT_EQ(one.candidates.size(), three.candidates.size()) << at;
    const std::vector<CandidateResult> one_rows = one.candidates.toVector();
    const std::vector<CandidateResult> three_rows = three.candidates.toVector();
    for (size_t i = 0; i < one_rows.size(); ++i) {
      expectSameCandidate(one_rows[i], three_rows[i], at + " #" + std::to_string(i + 1));
      EXPECT_EQ(one_rows[i].equivalents, three_rows[i].equivalents) << at;
    }
    EXPECT_EQ(one.passes, three.passes) << at;
    EXPECT_EQ(one.simulated, three.simulated) << at;
    EXPECT_EQ(one.pruned_by_bound, three.pruned_by_bound) << at;
    EXPECT_EQ(one.ok, three.ok) << at;
    EXPECT_EQ(one.oom, three.oom) << at;
    EXPECT_EQ(one.invalid, three.invalid) << at;
    EXPECT_EQ(one.invalid_by_rule, three.invalid_by_rule) << at;
    EXPECT_EQ(one.invalid_example, three.invalid_example) << at;
    ASSERT_TRUE(one.closest_oom.has_value()) << at;
    ASSERT_TRUE(three.closest_oom.has_value()) << at;
    expectSameCandidate(*one.closest_oom, *three.closest_oom, at + " closest OOM");
  }
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

TEST(PrunedSearchTest, ViolationRuleDropsTheValues) {
  EXPECT_EQ(violationRule("--strategy 3M1P1D: M=3 does not divide num_heads=16 of gpt3-175b"),
            "M=N does not divide num_heads=N of gpt3-175b");
  EXPECT_EQ(violationRule("no colon 12"), "no colon N");
  // Digits inside a name stay; numbers beside it go (issue 31: "llamaN-Nb").
  EXPECT_EQ(violationRule("x: M=16 does not divide num_query_groups=8 of llama3-70b"),
            "M=N does not divide num_query_groups=N of llama3-70b");
  EXPECT_EQ(violationRule("x: mixtral-8x7b has 32 layers, 2 x 1024 = 2048"),
            "mixtral-8x7b has N layers, N x N = N");
}

TEST(PrunedSearchTest, MissingCostsAreOneErrorWithTheHint) {
  // No source covers any event: the bound cannot be computed, so nothing is pruned, and the
  // simulated candidates' missing events come back in one InputError with the hint.
  BundledSearch b = bundledSearches()[2];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  ProfileDb empty;
  CostModel measured_only(cluster, &empty, /*analytic_fallback=*/false);
  try {
    runPrunedSearch(model, cluster, measured_only, b.options);
    FAIL() << "expected MissingCostsError";
  } catch (const MissingCostsError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "events have no cost");
  }
}

TEST(PrunedSearchTest, TopMustBePositive) {
  BundledSearch b = bundledSearches()[2];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  CostModel costs(cluster, nullptr, true);
  b.options.top_k = 0;
  EXPECT_THROW(runPrunedSearch(model, cluster, costs, b.options), InputError);
}

}  // namespace
}  // namespace evsim

// The pruned, streaming search (issue 14) against the exhaustive one: the same top 10 on the
// bundled searches, counts that add up, passes with a pool smaller than the top, link sharing
// simulated after the time before it, and results independent of the thread count. The
// closed-form tier's memory and bound: closed_form_bound_test.cpp and zero2_bound_test.cpp.
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
#include "modeler/worker_team.h"
#include "plan/iteration_plan.h"
#include "plan/zero2_buckets.h"
#include "support/pruned_search_cases.h"
#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using namespace test_support;

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

// The search's parallel regions (its enumeration passes, their serial ends, its simulation rounds:
// several of each here) all run on one team (worker_team.h): a search at T threads starts T - 1
// threads, where threads started per region would be at least T for the first pass alone.
TEST(PrunedSearchTest, ASearchStartsItsThreadsOnce) {
  BundledSearch b = bundledSearches()[1];
  ModelConfig model = loadModelConfig(test::configPath("models", b.model));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", b.cluster));
  CostModel costs(cluster, nullptr, true);
  b.options.pool_capacity = 3;  // several passes
  b.options.top_k = 10;
  for (unsigned threads : {1u, 2u, 3u}) {
    b.options.threads = threads;
    const uint64_t before = threadsStarted().load();
    const SearchReport report = runPrunedSearch(model, cluster, costs, b.options);
    EXPECT_EQ(threadsStarted().load() - before, threads - 1) << threads << " threads";
    EXPECT_GT(report.passes, 1) << threads << " threads";
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

// partitionLayers: contiguous stages minimising the largest stage cost; the embedding's cost counts
// on the first stage, the head's on the last; every stage gets at least one block.

#include "plan/stage_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "common/error.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using Starts = std::vector<int>;

// Largest stage cost of a partition, by the same rule the function minimises.
double maxStageCost(const std::vector<double>& cost, double first, double last, const Starts& s) {
  double worst = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    int end = k + 1 < s.size() ? s[k + 1] : static_cast<int>(cost.size());
    double c = std::accumulate(cost.begin() + s[k], cost.begin() + end, 0.0);
    if (k == 0) c += first;
    if (k + 1 == s.size()) c += last;
    worst = std::max(worst, c);
  }
  return worst;
}

TEST(StagePartition, UniformCostsDivideEvenly) {
  std::vector<double> ones(24, 1.0);
  EXPECT_EQ(partitionLayers(ones, 0, 0, 1), (Starts{0}));
  EXPECT_EQ(partitionLayers(ones, 0, 0, 2), (Starts{0, 12}));
  EXPECT_EQ(partitionLayers(ones, 0, 0, 3), (Starts{0, 8, 16}));
  EXPECT_EQ(partitionLayers(ones, 0, 0, 4), (Starts{0, 6, 12, 18}));
  EXPECT_EQ(partitionLayers(ones, 0, 0, 8), (Starts{0, 3, 6, 9, 12, 15, 18, 21}));
  EXPECT_EQ(partitionLayers(std::vector<double>(6, 2.5), 0, 0, 3), (Starts{0, 2, 4}));
}

TEST(StagePartition, UnevenCountStillOptimal) {
  // 8 equal blocks on 3 stages: the best largest stage holds 3 blocks (3+3+2 in some order).
  std::vector<double> ones(8, 1.0);
  Starts s = partitionLayers(ones, 0, 0, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(maxStageCost(ones, 0, 0, s), 3.0);
}

TEST(StagePartition, HeavyLastStageShiftsBlocksEarlier) {
  // 8 blocks of 1, last-stage extra 2: split j gives max(j, 8 - j + 2); j = 5 -> max(5, 5).
  std::vector<double> ones(8, 1.0);
  EXPECT_EQ(partitionLayers(ones, 0, 2, 2), (Starts{0, 5}));
  // 24 blocks, 2 stages, head worth 2.3 blocks: 12/12 -> 14.3, 13/11 -> 13.3, 14/10 -> 14.
  EXPECT_EQ(partitionLayers(std::vector<double>(24, 1.0), 0.01, 2.3, 2), (Starts{0, 13}));
}

TEST(StagePartition, HeavyFirstStageShiftsBlocksLater) {
  // 7 blocks of 1, first-stage extra 1, 4 stages: total 8, so each stage at best costs 2; stage 0
  // can then hold only one block, the others two each.
  EXPECT_EQ(partitionLayers(std::vector<double>(7, 1.0), 1, 0, 4), (Starts{0, 1, 3, 5}));
}

TEST(StagePartition, NonUniformBlocks) {
  // Costs 1,1,1,1,4 on 2 stages: [0,4) and [4,5) cost 4 and 4; any other split is worse.
  EXPECT_EQ(partitionLayers({1, 1, 1, 1, 4}, 0, 0, 2), (Starts{0, 4}));
  // Costs 5,1,1,1,1,1 on 2 stages: the heavy block alone, then 5 blocks of 1.
  EXPECT_EQ(partitionLayers({5, 1, 1, 1, 1, 1}, 0, 0, 2), (Starts{0, 1}));
}

TEST(StagePartition, EveryStageGetsABlock) {
  // An enormous head would rather have no blocks, but each stage must hold at least one.
  std::vector<double> ones(4, 1.0);
  EXPECT_EQ(partitionLayers(ones, 0, 100, 4), (Starts{0, 1, 2, 3}));
  EXPECT_EQ(partitionLayers(ones, 100, 0, 4), (Starts{0, 1, 2, 3}));
  EXPECT_EQ(partitionLayers(ones, 0, 100, 2), (Starts{0, 3}));
  EXPECT_EQ(partitionLayers(ones, 100, 0, 2), (Starts{0, 1}));
  // Random-ish costs: strictly increasing starts, first 0, all stages non-empty.
  std::vector<double> costs = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  for (int stages = 1; stages <= 12; ++stages) {
    Starts s = partitionLayers(costs, 2, 7, stages);
    ASSERT_EQ(static_cast<int>(s.size()), stages);
    EXPECT_EQ(s[0], 0);
    for (int k = 1; k < stages; ++k) EXPECT_LT(s[k - 1], s[k]);
    EXPECT_LT(s.back(), 12);
  }
}

TEST(StagePartition, MoreStagesThanBlocksIsAnInternalError) {
  EXPECT_THROW(partitionLayers({1, 1}, 0, 0, 3), Error);
  EXPECT_THROW(partitionLayers({1, 1}, 0, 0, 0), Error);
}

TEST(StagePartition, PlanStagesCoverEveryBlockOnce) {
  // tiny 8-block GPT on 4 stages: stages are contiguous, non-empty and cover [0, 8).
  ModelConfig model = test::model(64, 4, 256, 32, 512, 8);
  IterationPlan plan = buildIterationPlan(model, test::cluster(8), test::strategy("1M4P1D", 1, 4));
  ASSERT_EQ(plan.stages.size(), 4u);
  int next = 0;
  for (const StagePlan& s : plan.stages) {
    EXPECT_EQ(s.first_layer, next);
    EXPECT_GE(s.num_layers, 1);
    next += s.num_layers;
    EXPECT_EQ(s.has_embedding, s.stage == 0);
    EXPECT_EQ(s.has_head, s.stage == 3);
  }
  EXPECT_EQ(next, 8);
}

// The dynamic program as first written: every split j of every (stage count, prefix) scanned,
// the first j that improves by more than the relative tolerance kept. partitionLayers stops the
// scan early where no later j can improve; its results must be these.
Starts fullScan(const std::vector<double>& cost, double first_extra, double last_extra,
                int stages) {
  const int n = static_cast<int>(cost.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  auto stageCost = [&](int first, int end, int stage) {
    double c = prefix[end] - prefix[first];
    if (stage == 0) c += first_extra;
    if (stage == stages - 1) c += last_extra;
    return c;
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> split(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0.0;
  for (int k = 1; k <= stages; ++k) {
    for (int i = k; i <= n - (stages - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInf) continue;
        double candidate = std::max(best[k - 1][j], stageCost(j, i, k - 1));
        if (candidate < best[k][i] * (1 - 1e-12)) {
          best[k][i] = candidate;
          split[k][i] = j;
        }
      }
    }
  }
  Starts first(stages);
  int end = n;
  for (int k = stages; k >= 1; --k) {
    first[k - 1] = split[k][end];
    end = split[k][end];
  }
  return first;
}

TEST(StagePartition, EarlyStopGivesTheFullScansSplits) {
  // Random block costs, many with ties (a few distinct values, as real models repeat one block),
  // random extras, every stage count: the same starts as the full scan. (A stop at 0.99 of the
  // best instead of the tolerance fails here.)
  std::mt19937 rng(14);
  int cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    // Exact ties, near ties (costs within 2%: splits whose costs differ by under 1%), spread, and
    // blocks of zero or negligible cost (steps within the tolerance, where the scan walks back).
    const int kind = trial % 4;
    std::vector<double> cost(n);
    for (double& c : cost) {
      const double r = static_cast<double>(rng() % 100000);
      const double tiny[] = {0.0, 1e-14, 1.0};
      c = kind == 0   ? 1.0 + static_cast<double>(rng() % 3)
          : kind == 1 ? 100.0 + std::fmod(r, 2.0)
          : kind == 2 ? r / 7.0
                      : tiny[rng() % 3];
    }
    const double first = (rng() % 5) * 0.75, last = (rng() % 5) * 1.5;
    for (int stages = 1; stages <= n; ++stages) {
      ASSERT_EQ(partitionLayers(cost, first, last, stages), fullScan(cost, first, last, stages))
          << "n=" << n << " stages=" << stages << " trial=" << trial;
      ++cases;
    }
  }
  EXPECT_GT(cases, 6000);
}

// A model the full scan took minutes on (it grew as L^2 x P; issue 33): 65,536 equal blocks on
// 1,024 stages divide evenly, 64 blocks each; with a head worth 63.5 blocks the last stage holds
// one block and the others 65535 / 1023 = 64.06 -> 64 or 65 (the largest stage 65, the last 64.5).
TEST(StagePartition, LargeModelIsNearLinear) {
  const int stages = 1024;
  const std::vector<double> ones(65536, 1.0);
  const Starts even = partitionLayers(ones, 0, 0, stages);
  ASSERT_EQ(even.size(), static_cast<size_t>(stages));
  for (int k = 0; k < stages; ++k) ASSERT_EQ(even[k], 64 * k) << k;
  const Starts headed = partitionLayers(ones, 0, 63.5, stages);
  EXPECT_EQ(headed.back(), 65535);
  EXPECT_DOUBLE_EQ(maxStageCost(ones, 0, 63.5, headed), 65.0);
}

TEST(StagePartition, ScalingEveryCostByAPowerOfTwoKeepsTheSplits) {
  // What PlanCache's cost key relies on: 126 equal blocks (Llama 3.1 405B), a light embedding
  // and a heavy head, and a random non-uniform model, scaled by 2^-40 .. 2^40.
  std::vector<double> uniform(126, 3.0e12);
  std::vector<double> random(57);
  std::mt19937 rng(7);
  for (double& c : random) c = 1e9 + static_cast<double>(rng() % 1000000) * 1e5;
  for (const std::vector<double>* cost : {&uniform, &random}) {
    for (int stages : {2, 7, 16, 48}) {
      const Starts base = partitionLayers(*cost, 1.1e11, 5.3e12, stages);
      for (int e : {-40, -3, 1, 2, 3, 40}) {
        std::vector<double> scaled = *cost;
        for (double& c : scaled) c = std::ldexp(c, e);
        EXPECT_EQ(partitionLayers(scaled, std::ldexp(1.1e11, e), std::ldexp(5.3e12, e), stages),
                  base)
            << "stages " << stages << " scale 2^" << e;
      }
    }
  }
}

TEST(StagePartition, CachedSplitsEqualTheUncachedOnes) {
  // One cache across micro-batch sizes, TP degrees, recomputation and chunk counts (whose costs
  // may share a scaled key): each equals the split computed without a cache.
  ModelConfig model = test::model(64, 4, 256, 32, 512, 24);
  PlanCache cache;
  for (int64_t b : {1, 2, 4}) {
    for (int tp : {1, 2, 4}) {
      for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        for (int stages : {2, 3, 8}) {
          Strategy s = test::strategy("1M1P1D", b, 64);
          s.tp = tp;
          s.pp = stages;
          s.recompute = rc;
          EXPECT_EQ(stageFirstLayers(model, s, &cache), stageFirstLayers(model, s))
              << "b=" << b << " tp=" << tp << " stages=" << stages;
        }
      }
    }
  }
}

TEST(StagePartition, SplitIntoAUsedVectorEqualsAFreshOne) {
  // The closed-form tier keeps one vector per workspace and fills it per class
  // (stageFirstLayers(..., first)): filled after a split of more chunks (longer) and of fewer
  // (shorter), through a cache and without, it holds exactly the split a fresh call returns.
  ModelConfig model = test::model(64, 4, 256, 32, 512, 24);
  PlanCache cache;
  std::vector<int> used;
  for (int stages : {8, 3, 2, 3}) {
    for (PlanCache* c : {&cache, static_cast<PlanCache*>(nullptr)}) {
      Strategy s = test::strategy("1M1P1D", 1, 64);
      s.pp = stages;
      stageFirstLayers(model, s, c, used);
      EXPECT_EQ(used, stageFirstLayers(model, s)) << "stages=" << stages;
      ASSERT_EQ(used.size(), static_cast<size_t>(stages));
      EXPECT_EQ(used.front(), 0);
    }
  }
  // A user's split into the same vector: its prefix sums, nothing left of the split before.
  Strategy user = test::strategy("1M1P1D", 1, 64);
  user.pp = 2;
  user.stage_layers = {10, 14};
  stageFirstLayers(model, user, &cache, used);
  EXPECT_EQ(used, (std::vector<int>{0, 10}));
}

}  // namespace
}  // namespace evsim

// partitionLayers: contiguous stages minimising the largest stage cost; the embedding's cost counts
// on the first stage, the head's on the last; every stage gets at least one block.

#include "events/stage_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "events/iteration_plan.h"
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

}  // namespace
}  // namespace evsim

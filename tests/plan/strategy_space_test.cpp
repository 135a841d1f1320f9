// Strategy space: every (M, P, D) with M*P*D = N, in order of M then P, each valid or carrying the
// rule it breaks; and the union of events one profiling run must cover.

#include "plan/strategy_space.h"

#include <gtest/gtest.h>

#include <tuple>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using Triple = std::tuple<int, int, int>;

class StrategySpaceTest : public ::testing::Test {
 protected:
  ModelConfig bert_ =
      loadModelConfig(test::configPath("models", "bert-large"));  // 24 layers, 16 heads
  ClusterConfig a40_ = loadClusterConfig(test::configPath("clusters", "a40-4x4"));  // 4 nodes x 4

  std::vector<Candidate> candidates(const ModelConfig& model, int64_t gpus, int64_t global_batch,
                                    std::vector<int64_t> micro = {1},
                                    std::vector<Schedule> schedules = {Schedule::kDapple},
                                    bool cross_node_tp = false) {
    Strategy base;
    base.global_batch = global_batch;
    StrategySpace space;
    space.gpus = gpus;
    space.micro_batches = std::move(micro);
    space.schedules = std::move(schedules);
    space.allow_cross_node_tp = cross_node_tp;
    return enumerateCandidates(model, a40_, base, space);
  }
  // The candidate's message ("" when valid), as a search shows it.
  std::string message(const ModelConfig& model, const Candidate& c) const {
    return c.violation ? violationMessage(model, a40_, c.strategy, *c.violation) : std::string();
  }
};

std::vector<Triple> triples(const std::vector<Candidate>& cs) {
  std::vector<Triple> out;
  for (const Candidate& c : cs) out.emplace_back(c.strategy.tp, c.strategy.pp, c.strategy.dp);
  return out;
}

int validCount(const std::vector<Candidate>& cs) {
  int n = 0;
  for (const Candidate& c : cs) n += !c.violation.has_value();
  return n;
}

TEST_F(StrategySpaceTest, EightGpusHaveTenOrderedFactorizations) {
  // 8 = 2^3: the three exponents of 2 spread over (M, P, D): C(3+2, 2) = 10 ways.
  auto cs = candidates(bert_, 8, 64);
  std::vector<Triple> expected = {{1, 1, 8}, {1, 2, 4}, {1, 4, 2}, {1, 8, 1}, {2, 1, 4},
                                  {2, 2, 2}, {2, 4, 1}, {4, 1, 2}, {4, 2, 1}, {8, 1, 1}};
  EXPECT_EQ(triples(cs), expected);
  // Only 8M1P1D breaks a rule: 16 heads, h 1024, f 4096 all divide by 8, but the a40 node has 4
  // GPUs, so an 8-way TP group would cross nodes (not allowed by default).
  EXPECT_EQ(validCount(cs), 9);
  ASSERT_TRUE(cs.back().violation.has_value());
  EXPECT_EQ(cs.back().violation->rule, StrategyRule::kCrossNodeTp);
  EXPECT_CONTAINS(message(bert_, cs.back()),
                  "--strategy 8M1P1D: M=8 does not divide the 4 GPUs of a node");
  // Lifting the rule makes all 10 valid.
  EXPECT_EQ(validCount(candidates(bert_, 8, 64, {1}, {Schedule::kDapple}, true)), 10);
  // The base's batch and the candidate's own sizes are carried into each strategy.
  EXPECT_EQ(cs[5].strategy.name(), "2M2P2D");
  EXPECT_EQ(cs[5].strategy.global_batch, 64);
  EXPECT_EQ(cs[5].strategy.micro_batch, 1);
}

TEST_F(StrategySpaceTest, DpOverlapIsTriedWhereThereAreBucketsToOverlap) {
  // 8 GPUs: 6 of the 10 factorizations have D >= 2 ({1,1,8}, {1,2,4}, {1,4,2}, {2,1,4}, {2,2,2},
  // {4,1,2}). ZeRO 0: the 10 without overlap and those 6 with it; ZeRO 3 (only where D >= 2): the
  // 6, never overlapped (ZeRO-3 has no buckets).
  StrategySpace space;
  space.gpus = 8;
  space.micro_batches = {1};
  space.schedules = {Schedule::kDapple};
  space.allow_cross_node_tp = true;
  space.zero_stages = {0, 3};
  space.dp_overlaps = {false, true};
  Strategy base;
  base.global_batch = 64;
  const std::vector<Candidate> cs = enumerateCandidates(bert_, a40_, base, space);
  int overlapped = 0, zero3 = 0;
  for (const Candidate& c : cs) {
    overlapped += c.strategy.dp_overlap;
    zero3 += c.strategy.zero_stage == 3;
    if (c.strategy.dp_overlap) {
      EXPECT_GE(c.strategy.dp, 2);
      EXPECT_NE(c.strategy.zero_stage, 3);
    }
  }
  EXPECT_EQ(overlapped, 6);
  EXPECT_EQ(zero3, 6);
  EXPECT_EQ(cs.size(), 10u + 6u + 6u);
}

// Hand-worked: the layers taken off the first and/or last stage go in turn to the middle stages.
TEST(UnevenSplits, FirstLastAndBothShortened) {
  using Splits = std::vector<std::vector<int>>;
  // P = 4, 6 each, k = 2: first-1 {5,7,6,6}, last-1 {6,7,6,5}, both-1 {5,7,7,5} (stage 1 then 2),
  // first-2 {4,7,7,6}, last-2 {6,7,7,4}, both-2 {4,8,8,4}.
  EXPECT_EQ(
      unevenSplits({6, 6, 6, 6}, 2),
      (Splits{{5, 7, 6, 6}, {6, 7, 6, 5}, {5, 7, 7, 5}, {4, 7, 7, 6}, {6, 7, 7, 4}, {4, 8, 8, 4}}));
  // P = 2: the other stage takes them, no "both"; a stage is never emptied.
  EXPECT_EQ(unevenSplits({2, 2}, 3), (Splits{{1, 3}, {3, 1}}));
  EXPECT_TRUE(unevenSplits({5}, 2).empty());
  EXPECT_TRUE(unevenSplits({6, 6, 6}, 0).empty());
}

// bert-large (24 layers) on 8 GPUs, 1F1B: each valid candidate with P >= 2 is followed by its
// variants. 1M4P2D's FLOP-balanced split is 6,7,7,4 (the last stage also runs the LM head); at
// k = 2: first-1 5,8,7,4; last-1 6,8,7,3; both-1 5,8,8,3; first-2 4,8,8,4; last-2 6,8,8,2;
// both-2 4,9,9,2 (the four layers to stages 1, 2, 1, 2).
TEST_F(StrategySpaceTest, UnevenStagesFollowTheirBalancedCandidate) {
  Strategy base;
  base.global_batch = 64;
  StrategySpace space;
  space.gpus = 8;
  space.micro_batches = {1};
  space.schedules = {Schedule::kDapple};
  space.uneven_stage_shift = 2;
  const std::vector<Candidate> cs = enumerateCandidates(bert_, a40_, base, space);
  std::vector<std::vector<int>> after_1m4p2d;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].strategy.name() != "1M4P2D" || !cs[i].strategy.stage_layers.empty()) continue;
    const std::vector<int> first = stageFirstLayers(bert_, cs[i].strategy);
    ASSERT_EQ(first, (std::vector<int>{0, 6, 13, 20}));
    for (size_t j = i + 1; j < cs.size() && cs[j].strategy.name() == "1M4P2D"; ++j) {
      EXPECT_FALSE(cs[j].violation.has_value());
      after_1m4p2d.push_back(cs[j].strategy.stage_layers);
    }
  }
  EXPECT_EQ(
      after_1m4p2d,
      (std::vector<std::vector<int>>{
          {5, 8, 7, 4}, {6, 8, 7, 3}, {5, 8, 8, 3}, {4, 8, 8, 4}, {6, 8, 8, 2}, {4, 9, 9, 2}}));
  // P = 1 candidates have none: 1M1P8D, 2M1P4D, 4M1P2D, 8M1P1D (invalid) stay single.
  int plain = 0;
  for (const Candidate& c : cs) plain += c.strategy.stage_layers.empty();
  EXPECT_EQ(plain, 10);
}

TEST_F(StrategySpaceTest, InvalidCandidatesCarryTheirRule) {
  // B = 4, b = 1: D = 8 needs B divisible by 8.
  auto cs = candidates(bert_, 8, 4);
  ASSERT_EQ(cs.size(), 10u);
  EXPECT_CONTAINS(message(bert_, cs[0]),
                  "--global-batch 4: not divisible by micro-batch x D = 1 x 8 = 8");
  EXPECT_EQ(validCount(cs), 8);  // (1,1,8) by batch, (8,1,1) by cross-node TP
  // A 2-block model: P = 4 and P = 8 exceed the layers; M = 8 does not divide its 4 heads.
  ModelConfig tiny = test::model(64, 4, 256, 32, 512, 2);
  auto small = candidates(tiny, 8, 64);
  int by_layers = 0, by_heads = 0;
  for (const Candidate& c : small) {
    std::string why = message(tiny, c);
    by_layers += why.find("is more than the 2 layers") != std::string::npos;
    by_heads += why.find("does not divide num_heads=4") != std::string::npos;
  }
  EXPECT_EQ(by_layers, 3);  // (1,4,2), (1,8,1), (2,4,1)
  EXPECT_EQ(by_heads, 1);   // (8,1,1)
  EXPECT_EQ(validCount(small), 6);
}

TEST_F(StrategySpaceTest, EveryCandidateCarriesTheViolationOfItsOwnCheck) {
  // The enumeration checks an invalid strategy once for its technique variants: each candidate
  // must still carry exactly what checkStrategy (then the cross-node TP rule) says of it, and
  // its message be strategyViolation's — on an MoE model, whose M > 1 needs SP and whose EP
  // excludes ZeRO-3, and with CP (SP splits the sequence over C x M), over every technique and
  // offload.
  const ModelConfig moe = loadModelConfig(test::configPath("models", "tiny-moe"));
  const ClusterConfig local = loadClusterConfig(test::configPath("clusters", "cpu-local"));
  Strategy base;
  base.global_batch = 16;
  StrategySpace space;
  space.gpus = 4;
  space.micro_batches = {1, 2};
  space.schedules = {Schedule::kDapple, Schedule::kZbh1, Schedule::kInterleaved};
  space.recomputes = {Recompute::kNone, Recompute::kFull};
  space.sequence_parallel = {false, true};
  space.zero_stages = {0, 1, 3};
  space.dp_overlaps = {false, true};
  space.context_parallel = {1, 2};
  space.expert_parallel = {1, 2};
  space.offloads = {Offload::kNone, Offload::kOptimizer, Offload::kActivations};
  int valid_tp2_sp = 0, checked = 0;
  for (const Candidate& c : enumerateCandidates(moe, local, base, space)) {
    std::optional<StrategyViolation> own = checkStrategy(moe, local, c.strategy);
    std::optional<std::string> own_message = strategyViolation(moe, local, c.strategy);
    if (!own) own = checkCrossNodeTp(local, c.strategy);
    if (!own_message) own_message = crossNodeTpViolation(local, c.strategy);
    EXPECT_EQ(c.violation, own) << c.strategy.name() << c.strategy.techniques();
    ASSERT_EQ(c.violation.has_value(), own_message.has_value()) << c.strategy.name();
    if (c.violation) {
      EXPECT_EQ(violationMessage(moe, local, c.strategy, *c.violation), *own_message)
          << c.strategy.name() << c.strategy.techniques();
    }
    valid_tp2_sp += !c.violation && c.strategy.tp == 2 && c.strategy.sequence_parallel;
    ++checked;
  }
  EXPECT_GT(checked, 500);
  EXPECT_GT(valid_tp2_sp, 0);  // M = 2 with SP is valid for the MoE model
}

TEST_F(StrategySpaceTest, CountsForOtherN) {
  // 12 = 2^2 * 3: C(4,2) * C(3,2) = 6 * 3 = 18 triples. M in {3, 6, 12} does not divide 16 heads:
  // M=3 has 3 (P,D) pairs (P*D = 4), M=6 has 2, M=12 has 1: 6 invalid, 12 valid.
  auto twelve = candidates(bert_, 12, 48);
  EXPECT_EQ(twelve.size(), 18u);
  EXPECT_EQ(validCount(twelve), 12);
  // 16 = 2^4: C(6,2) = 15. 1: just (1,1,1). 6 = 2*3: 3 * 3 = 9.
  EXPECT_EQ(candidates(bert_, 16, 64).size(), 15u);
  EXPECT_EQ(triples(candidates(bert_, 1, 64)), (std::vector<Triple>{{1, 1, 1}}));
  EXPECT_EQ(candidates(bert_, 6, 60).size(), 9u);
  // 32 GPUs do not fit the 16 of a40-4x4: every candidate is invalid. Rules are checked heads,
  // hidden, ffn, layers, GPUs: 32M1P1D breaks the heads rule and 1M32P1D the layers rule first;
  // the other 19 name the GPU rule.
  auto too_many = candidates(bert_, 32, 64);
  EXPECT_EQ(too_many.size(), 21u);  // 2^5: C(7,2)
  EXPECT_EQ(validCount(too_many), 0);
  int by_gpus = 0;
  for (const Candidate& c : too_many) {
    by_gpus += message(bert_, c).find("needs 32 GPUs, cluster a40-4x4 has 16") != std::string::npos;
  }
  EXPECT_EQ(by_gpus, 19);
  // Micro-batches x schedules multiply the list: 10 * 2 * 2.
  EXPECT_EQ(candidates(bert_, 8, 64, {1, 2}, {Schedule::kGpipe, Schedule::kDapple}).size(), 40u);
}

TEST_F(StrategySpaceTest, UnionOfEventsCoversEveryValidCandidate) {
  Strategy base;
  base.global_batch = 64;
  StrategySpace space;
  space.gpus = 8;
  space.micro_batches = {1};
  space.schedules = {Schedule::kDapple};
  EventTable all = unionOfEvents(bert_, a40_, base, space);
  for (const Candidate& c : enumerateCandidates(bert_, a40_, base, space)) {
    if (c.violation) continue;
    IterationPlan plan = buildIterationPlan(bert_, a40_, c.strategy);
    for (const UniqueEvent& u : plan.events.events()) {
      EXPECT_GE(test::countOf(all, u.signature), u.count)
          << c.strategy.name() << " " << u.signature;
    }
  }
  // M = 1 QKV forward GEMM (T = 512, n = 3h = 3072, k = h = 1024) appears in the 4 candidates
  // with M = 1; each runs it L * m * M * D = 24 * (64 / D) * D = 1536 times: 4 * 1536 = 6144.
  EXPECT_EQ(test::countOf(all, "gemm m=512 n=3072 k=1024 layout=nt dtype=fp16"), 6144);

  // Uneven splits bring their own optimizer events (a stage's parameter count): covered too.
  StrategySpace uneven = space;
  uneven.uneven_stage_shift = 1;
  const EventTable with_uneven = unionOfEvents(bert_, a40_, base, uneven);
  int uneven_candidates = 0;
  for (const Candidate& c : enumerateCandidates(bert_, a40_, base, uneven)) {
    if (c.violation || c.strategy.stage_layers.empty()) continue;
    ++uneven_candidates;
    IterationPlan plan = buildIterationPlan(bert_, a40_, c.strategy);
    for (const UniqueEvent& u : plan.events.events()) {
      EXPECT_GE(test::countOf(with_uneven, u.signature), u.count)
          << c.strategy.name() << c.strategy.techniques() << " " << u.signature;
    }
  }
  EXPECT_GT(uneven_candidates, 0);

  // Schedules share events and are counted once.
  StrategySpace both = space;
  both.schedules = {Schedule::kGpipe, Schedule::kDapple};
  EventTable all2 = unionOfEvents(bert_, a40_, base, both);
  ASSERT_EQ(all2.size(), all.size());
  for (int i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all2[i].signature, all[i].signature);
    EXPECT_EQ(all2[i].count, all[i].count);
  }
}

}  // namespace
}  // namespace evsim

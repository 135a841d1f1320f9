// Uneven pipeline stages (issue 16, item 3): --stage-layers replaces the FLOP-balanced split, and
// the plan, its parameters and its memory follow it; impossible splits name the rule.
#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// h = 64, a = 4, f = 256, s = 32, V = 512, 8 decoder blocks.
ModelConfig model() { return test::model(64, 4, 256, 32, 512, 8, "fp16"); }
ClusterConfig cluster() { return test::cluster(4, 2, test::kSlowLinks); }

TEST(UnevenStages, TheGivenSplitIsThePlansSplit) {
  Strategy s = Strategy::of(1, 4, 1, 1, 8);
  s.stage_layers = {1, 3, 3, 1};
  const IterationPlan plan = buildIterationPlan(model(), cluster(), s);
  ASSERT_EQ(plan.stages.size(), 4u);
  const int expected_first[] = {0, 1, 4, 7};
  const int expected_count[] = {1, 3, 3, 1};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(plan.stages[k].first_layer, expected_first[k]) << k;
    EXPECT_EQ(plan.stages[k].num_layers, expected_count[k]) << k;
  }
  // One GPT block at t = 1: QKV 64x192 + 192, projection 64x64 + 64, fc1 64x256 + 256,
  // fc2 256x64 + 64, two LayerNorms 2 x 128 = 49,984 parameters; the middle stages hold 3 each.
  const int64_t block = 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64 + 256;
  EXPECT_EQ(block, 49984);
  EXPECT_EQ(plan.stages[1].parameters, 3 * block);
  EXPECT_EQ(plan.stages[2].parameters, 3 * block);
  EXPECT_EQ(s.techniques(), " layers=1,3,3,1");
}

TEST(UnevenStages, AChunkBeforeALossOnlyChunkSendsTheActivation) {
  // --account-for-loss-in-pipeline-split leaves the last chunk no block: the chunk before it
  // sends the hidden state as every other chunk does, b x s x h fp16 = 1 x 32 x 64 x 2 = 4,096
  // bytes (its "next block" is past the model's last; looking there for cross-attention once
  // read past the blocks' array and sent 110x that on Llama 3.1 405B).
  Strategy s = Strategy::of(1, 4, 1, 1, 8);
  s.stage_layers = {1, 3, 4, 0};
  const IterationPlan plan = buildIterationPlan(model(), cluster(), s);
  ASSERT_EQ(plan.stages.size(), 4u);
  EXPECT_EQ(plan.stages[3].num_layers, 0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(plan.stages[k].activation_bytes_out, 1 * 32 * 64 * 2) << k;
  int p2p_events = 0;
  for (const UniqueEvent& e : plan.events.events()) {
    if (e.event.kind != EventKind::kP2P) continue;
    ++p2p_events;
    EXPECT_EQ(e.event.message_bytes, 4096) << e.signature;
  }
  EXPECT_GE(p2p_events, 1);
}

TEST(UnevenStages, ImpossibleSplitsNameTheRule) {
  Strategy s = Strategy::of(1, 4, 1, 1, 8);
  s.stage_layers = {2, 2, 4};
  EXPECT_CONTAINS(*strategyViolation(model(), cluster(), s),
                  "--stage-layers: 3 entries for 4 model chunks (P x v)");
  s.stage_layers = {2, 2, 2, 1};
  EXPECT_CONTAINS(*strategyViolation(model(), cluster(), s),
                  "--stage-layers: 7 layers in all, but test-model has 8");
  s.stage_layers = {4, 0, 2, 2};
  EXPECT_CONTAINS(*strategyViolation(model(), cluster(), s), "every chunk needs >= 1 layer");
  // The first and last chunks carry the embedding and the loss: they may hold no block
  // (Megatron's --account-for-embedding/loss-in-pipeline-split with one layer per chunk).
  s.stage_layers = {0, 4, 4, 0};
  EXPECT_FALSE(strategyViolation(model(), cluster(), s).has_value());
}

}  // namespace
}  // namespace evsim

// torchtitan's per-layer selective activation checkpointing (--recompute full --recompute-every N,
// its selective_ac_option = "N"; plan/layer_checkpoint.h): which blocks a rank checkpoints, by
// hand from apply_ac's per-process counter, and what that does to the saved activations, the
// recompute transient and the recomputed work.
//
// Tiny Llama (as tests/ops/op_checkpoint_test.cpp): h = 256, 8 heads of 32, 2 K/V heads, SwiGLU
// f = 512, s = 64, bf16, flash attention, no dropout, 4 blocks; b = 2, so T = 128 tokens.
#include "plan/layer_checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "modeler/memory_model.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig tinyLlama() {
  return parseModelConfig(
      "name: tiny-llama-layer-sac\ndtype: bf16\nhidden_size: 256\nnum_heads: 8\n"
      "num_query_groups: 2\nffn_hidden_size: 512\nseq_length: 64\nvocab_size: 1024\n"
      "normalization: rmsnorm\nactivation: swiglu\nposition_embedding: rope\n"
      "add_bias_linear: false\nflash_attention: true\nhidden_dropout: 0.0\n"
      "attention_dropout: 0.0\nlayers:\n  - {type: embedding}\n"
      "  - {type: decoder, count: 4, cross_attention: false}\n  - {type: head}\n",
      "tiny-llama-layer-sac");
}

IterationPlan plan(Recompute rc, int every) {
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.recompute = rc;
  s.recompute_every = every;
  return buildIterationPlan(tinyLlama(), test::cluster(8), s);
}

std::vector<int> flagged(const std::vector<char>& flags) {
  std::vector<int> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

TEST(LayerCheckpoint, EveryNthBlockOfTheRankByItsCounter) {
  // One rank, 4 blocks: the counter reaches 1, 2, 3, 4; N = 2 checkpoints blocks 2 and 4
  // (layers 1 and 3), N = 4 block 4 only, N = 1 or 0 every block.
  Strategy s = test::strategy("1M1P1D", 1, 1);
  s.recompute = Recompute::kFull;
  s.recompute_every = 2;
  EXPECT_EQ(flagged(checkpointedBlocks(s, {0}, 4)), (std::vector<int>{1, 3}));
  s.recompute_every = 4;
  EXPECT_EQ(flagged(checkpointedBlocks(s, {0}, 4)), (std::vector<int>{3}));
  s.recompute_every = 1;
  EXPECT_EQ(flagged(checkpointedBlocks(s, {0}, 4)), (std::vector<int>{0, 1, 2, 3}));
  s.recompute_every = 0;
  EXPECT_EQ(flagged(checkpointedBlocks(s, {0}, 4)), (std::vector<int>{0, 1, 2, 3}));
  s.recompute = Recompute::kNone;
  EXPECT_TRUE(flagged(checkpointedBlocks(s, {0}, 4)).empty());
}

TEST(LayerCheckpoint, TheCounterRunsOverTheRanksChunksInStageOrder) {
  // 8 blocks in P*v = 4 chunks of 1, 3, 2, 2 blocks (first layers 0, 1, 4, 6), N = 3.
  // Looped (interleaved) layout: rank 0 builds chunks 0 and 2 (layers 0 | 4 5: counts 1 | 2 3),
  // rank 1 chunks 1 and 3 (layers 1 2 3 | 6 7: counts 1 2 3 | 4 5): layers 5 and 3.
  Strategy s = test::strategy("1M2P1D", 1, 4);
  s.schedule = Schedule::kInterleaved;
  s.virtual_stages = 2;
  s.recompute = Recompute::kFull;
  s.recompute_every = 3;
  EXPECT_EQ(flagged(checkpointedBlocks(s, {0, 1, 4, 6}, 8)), (std::vector<int>{3, 5}));
  // V layout (ZB-V): rank 0 builds stages 0 and 3 (layers 0 | 6 7: counts 1 | 2 3), rank 1
  // stages 1 and 2 (layers 1 2 3 | 4 5: counts 1 2 3 | 4 5): layers 7 and 3.
  s.schedule = Schedule::kZbv;
  s.virtual_stages = 1;
  EXPECT_EQ(flagged(checkpointedBlocks(s, {0, 1, 4, 6}, 8)), (std::vector<int>{3, 7}));
}

TEST(LayerCheckpoint, MemoryKeepsTheUncheckpointedBlocksWhole) {
  // A block keeps 823,296 bytes without recomputation (op_checkpoint_test counts them) and its
  // input, 2 x 128 x 256 = 65,536, when checkpointed. N = 2 checkpoints 2 of the 4 blocks:
  // 2 x (823,296 - 65,536) = 1,515,520 bytes fewer than none, and as many more than full.
  const MemoryEstimate none = estimateMemory(plan(Recompute::kNone, 0));
  const MemoryEstimate every2 = estimateMemory(plan(Recompute::kFull, 2));
  const MemoryEstimate full = estimateMemory(plan(Recompute::kFull, 0));
  const int64_t none_bytes = none.stages[0].activation_bytes_per_micro_batch;
  EXPECT_EQ(none_bytes - every2.stages[0].activation_bytes_per_micro_batch, 1'515'520);
  EXPECT_EQ(every2.stages[0].activation_bytes_per_micro_batch -
                full.stages[0].activation_bytes_per_micro_batch,
            1'515'520);
  // The transient of rebuilding one checkpointed block: 823,296 - 65,536.
  EXPECT_EQ(every2.stages[0].recompute_bytes, 757'760);
  EXPECT_EQ(full.stages[0].recompute_bytes, 757'760);
  EXPECT_EQ(none.stages[0].recompute_bytes, 0);
  // N = 5 > 4 blocks: no block reaches the count, nothing recomputes and nothing is rebuilt.
  const MemoryEstimate every5 = estimateMemory(plan(Recompute::kFull, 5));
  EXPECT_EQ(every5.stages[0].activation_bytes_per_micro_batch, none_bytes);
  EXPECT_EQ(every5.stages[0].recompute_bytes, 0);
}

TEST(LayerCheckpoint, OnlyTheCheckpointedBlocksReRunTheirForward) {
  const IterationPlan every2 = plan(Recompute::kFull, 2);
  const IterationPlan full = plan(Recompute::kFull, 0);
  const IterationPlan none = plan(Recompute::kNone, 0);
  auto recomputedFlops = [](const IterationPlan& p, std::vector<int>& layers) {
    double flops = 0;
    for (const OpInstance& op : p.stages[0].backward) {
      if (!op.recompute) continue;
      flops += p.events[op.event].event.flops;
      if (layers.empty() || layers.back() != op.layer) layers.push_back(op.layer);
    }
    return flops;
  };
  std::vector<int> every2_layers, full_layers;
  const double every2_flops = recomputedFlops(every2, every2_layers);
  const double full_flops = recomputedFlops(full, full_layers);
  // Backward runs the blocks last to first: layers 3 and 1 re-run their forward.
  EXPECT_EQ(every2_layers, (std::vector<int>{3, 1}));
  EXPECT_EQ(full_layers, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_GT(full_flops, 0);
  EXPECT_DOUBLE_EQ(every2_flops, full_flops / 2);
  // In time: every event costs 1 us per MFLOP, so the iteration is the FLOPs run: N = 2 adds half
  // of what full recomputation adds.
  auto iterationUs = [](IterationPlan p) {
    std::vector<EventCost> costs(static_cast<size_t>(p.events.size()));
    for (int e = 0; e < p.events.size(); ++e) {
      costs[static_cast<size_t>(e)].time_us = p.events[e].event.flops / 1e6;
    }
    return simulate(std::move(p), std::move(costs)).summary.iteration_us;
  };
  const double t_none = iterationUs(none), t_full = iterationUs(full);
  EXPECT_GT(t_full, t_none);
  EXPECT_NEAR(iterationUs(every2) - t_none, (t_full - t_none) / 2, 1e-6 * t_full);
}

TEST(LayerCheckpoint, NeedsFullRecomputation) {
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.recompute = Recompute::kSelective;
  s.recompute_every = 2;
  EXPECT_CONTAINS(test::inputErrorOf([&] { validateStrategy(tinyLlama(), test::cluster(8), s); }),
                  "--recompute-every 2: checkpoints every N-th block in full");
}

TEST(LayerCheckpoint, StepIsAtMostTheMostBlocksAModelMayHave) {
  // The plan cache keys the step as recompute + 16 x step: 2^16 keeps that far from int's range.
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.recompute = Recompute::kFull;
  s.recompute_every = (1 << 16) + 1;
  EXPECT_CONTAINS(test::inputErrorOf([&] { validateStrategy(tinyLlama(), test::cluster(8), s); }),
                  "--recompute-every 65537: at most 65536");
  s.recompute_every = 1 << 16;
  EXPECT_NO_THROW(validateStrategy(tinyLlama(), test::cluster(8), s));
}

}  // namespace
}  // namespace evsim

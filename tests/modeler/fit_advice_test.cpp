// What makes a candidate fit when nothing does (modeler/fit_advice.h): the smallest change is the
// first of the ordered list whose plan fits by the memory model, checked here against the memory
// model directly.
#include "modeler/fit_advice.h"

#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "modeler/memory_model.h"
#include "support/test_support.h"

namespace evsim {
namespace {

int64_t peak(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& s) {
  return estimateMemory(buildIterationPlan(model, cluster, s), 0.1).peak_bytes;
}

TEST(FitAdvice, SequenceParallelismIsTriedFirst) {
  // Llama-3-70B at seq 8192 on 32 A100s: 8M4P1D b=1 holds 4 micro-batches of activations on its
  // first stage and misses 72 GiB; sequence parallelism divides the norm and dropout regions by 8.
  const ModelConfig model = loadModelConfig(test::configPath("models", "llama3-70b"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const Strategy base = Strategy::of(8, 4, 1, 1, 64);
  const int64_t usable =
      static_cast<int64_t>(static_cast<double>(cluster.device.memoryBytes()) * 0.9);
  ASSERT_GT(peak(model, cluster, base), usable);
  const std::optional<FitAdvice> advice = adviseFit(model, cluster, base, 0.1);
  ASSERT_TRUE(advice);
  EXPECT_EQ(advice->change, "--sequence-parallel on");
  Strategy with_sp = base;
  with_sp.sequence_parallel = true;
  EXPECT_EQ(advice->peak_memory_bytes, peak(model, cluster, with_sp));
  EXPECT_LE(advice->peak_memory_bytes, usable);
}

TEST(FitAdvice, TheFirstChangeThatFitsInOrderThenPairsThenNone) {
  const ModelConfig gpt3 = loadModelConfig(test::configPath("models", "gpt3-175b"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  // GPT-3 175B on 8 A100s (8M1P1D): 175e9 / 8 parameters x 18 bytes = 367 GiB of model state per
  // GPU, and D = 1 leaves ZeRO nothing to shard: nothing fits.
  EXPECT_FALSE(adviseFit(gpt3, cluster, Strategy::of(8, 1, 1, 1, 8), 0.1));

  // 8M16P1D b=4, B=64: 16 micro-batches of b=4 activations in flight on stage 0.
  const Strategy base = Strategy::of(8, 16, 1, 4, 64);
  auto with = [&](auto change) {
    Strategy s = base;
    change(s);
    return peak(gpt3, cluster, s);
  };
  const int64_t sp = with([](Strategy& s) { s.sequence_parallel = true; });
  const int64_t selective = with([](Strategy& s) { s.recompute = Recompute::kSelective; });
  const int64_t b2 = with([](Strategy& s) { s.micro_batch = 2; });
  const int64_t b1 = with([](Strategy& s) { s.micro_batch = 1; });
  const int64_t full = with([](Strategy& s) { s.recompute = Recompute::kFull; });
  // At 72 GiB usable the earlier changes miss and full recomputation is the first that fits.
  const int64_t usable_90 =
      static_cast<int64_t>(static_cast<double>(cluster.device.memoryBytes()) * 0.9);
  for (int64_t p : {sp, selective, b2, b1}) EXPECT_GT(p, usable_90);
  ASSERT_LE(full, usable_90);
  std::optional<FitAdvice> advice = adviseFit(gpt3, cluster, base, 0.1);
  ASSERT_TRUE(advice);
  EXPECT_EQ(advice->change, "--recompute full");
  EXPECT_EQ(advice->peak_memory_bytes, full);
  // At 40 GiB usable (headroom 0.5) no single change fits; pairs are tried in order, sequence
  // parallelism first: with selective recomputation, b=2 or b=1 it still misses, with full
  // recomputation it fits.
  const int64_t usable_50 = cluster.device.memoryBytes() / 2;
  for (int64_t p : {sp, selective, b2, b1, full}) EXPECT_GT(p, usable_50);
  auto sp_and = [&](auto change) {
    Strategy s = base;
    s.sequence_parallel = true;
    change(s);
    return estimateMemory(buildIterationPlan(gpt3, cluster, s), 0.5).peak_bytes;
  };
  EXPECT_GT(sp_and([](Strategy& s) { s.recompute = Recompute::kSelective; }), usable_50);
  EXPECT_GT(sp_and([](Strategy& s) { s.micro_batch = 2; }), usable_50);
  EXPECT_GT(sp_and([](Strategy& s) { s.micro_batch = 1; }), usable_50);
  const int64_t sp_full = sp_and([](Strategy& s) { s.recompute = Recompute::kFull; });
  ASSERT_LE(sp_full, usable_50);
  advice = adviseFit(gpt3, cluster, base, 0.5);
  ASSERT_TRUE(advice);
  EXPECT_EQ(advice->change, "--sequence-parallel on --recompute full");
  EXPECT_EQ(advice->peak_memory_bytes, sp_full);
}

}  // namespace
}  // namespace evsim

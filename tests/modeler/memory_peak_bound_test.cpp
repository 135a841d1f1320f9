// The memory model's cheap lower bound of a stage's peak (stagePeakLowerBound, stage_memory.h),
// which lets a search's closed-form tier call a candidate out of memory without the full
// per-stage estimate: never above the full estimate's peak, worked by hand on one stage, and over
// a sweep of strategies (both frameworks, every ZeRO stage, offload, schedule, recomputation,
// SP and CP) with adversarial chunk figures; through the tier, the same fits/OOM verdicts.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "modeler/cost_model.h"
#include "modeler/memory_model.h"
#include "modeler/stage_memory.h"
#include "plan/strategy_space.h"
#include "support/search_options.h"
#include "support/test_support.h"
#include "support/tiny_fp16_model.h"

namespace evsim {
namespace {

constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();

// The hand-worked tiny fp16 model (support/tiny_fp16_model.h).
const std::string kTinyYaml = test::tinyFp16ModelYaml("tiny-mem", 2);

// One stage, one micro-batch (P = M = D = 1, DAPPLE): the chunk's figures are
// StagePeakByHand's: 134,912 parameters (18 bytes each: 2,428,416 of model states), 260,352
// bytes of activations per micro-batch, the word embedding's fp16 gradient 2*V*h = 65,536 the
// largest transient. Overheads: a 4 MiB workspace and a 300 MiB CUDA context, no NCCL buffers
// (one rank, no communicator) and no fragmentation.
TEST(MemoryPeakBoundTest, OneStageByHand) {
  const ModelConfig model = parseModelConfig(kTinyYaml, "tiny-bound.yaml");
  const Strategy s = Strategy::of(1, 1, 1, 1, 1, Schedule::kDapple);
  MemoryOverheads overheads;
  overheads.cuda_context_mib.value = 300;
  overheads.cublas_workspace_mib.value = 4;
  overheads.nccl_mib_per_communicator.value = 0;
  overheads.allocator_fragmentation.value = 0;
  const std::vector<DeviceChunkSums> devices =
      deviceChunkSums(s, 1, {ChunkMemoryInput{.parameters = 134'912, .activation_bytes = 260'352}});
  ASSERT_EQ(devices.size(), 1u);
  const StrategyTerms terms = checkedStrategyTerms(model, s, devices, 0.0, overheads);
  // Bound: states 2,428,416 + activations 260,352 + workspace 4,194,304 + context 314,572,800.
  constexpr int64_t kBound = 2'428'416 + 260'352 + 4'194'304 + 314'572'800;  // 321,455,872
  EXPECT_EQ(stagePeakLowerBound(terms, devices[0]), kBound);
  // The full estimate adds the embedding gradient's 65,536 (the only transient; no buffer).
  const StageMemory full = stageMemory(model, s, terms, devices[0], 0, int64_t{1} << 30, true);
  EXPECT_EQ(full.peak_bytes, kBound + 65'536);

  // Through estimateMemoryPeak: on a 300 MiB device (usable 314,572,800 < the bound) the bound
  // decides when asked (bound_from <= it), marked inexact; above it the peak is computed.
  constexpr int64_t kSmall = int64_t{300} << 20;
  const MemoryPeak bound = estimateMemoryPeak(model, s, kSmall, devices, 0.0, {}, overheads, 0);
  EXPECT_EQ(bound.peak_bytes, kBound);
  EXPECT_FALSE(bound.exact);
  EXPECT_FALSE(bound.fits);
  const MemoryPeak at =
      estimateMemoryPeak(model, s, kSmall, devices, 0.0, {}, overheads, kBound);
  EXPECT_FALSE(at.exact);  // the bound equals bound_from: no closer than that
  const MemoryPeak above =
      estimateMemoryPeak(model, s, kSmall, devices, 0.0, {}, overheads, kBound + 1);
  EXPECT_TRUE(above.exact);
  EXPECT_EQ(above.peak_bytes, kBound + 65'536);
  EXPECT_FALSE(above.fits);
  // Where it fits (1 GiB), the bound decides nothing: the peak is exact.
  const MemoryPeak fits =
      estimateMemoryPeak(model, s, int64_t{1} << 30, devices, 0.0, {}, overheads, 0);
  EXPECT_TRUE(fits.exact);
  EXPECT_TRUE(fits.fits);
  EXPECT_EQ(fits.peak_bytes, kBound + 65'536);
}

// Every valid candidate of a space over both frameworks and every technique the memory model
// distinguishes.
std::vector<Strategy> sweep(const ModelConfig& model, const ClusterConfig& cluster) {
  SearchOptions o = test_support::searchOptions(
      16, 32, {1, 2},
      {Schedule::kGpipe, Schedule::kDapple, Schedule::kInterleaved, Schedule::kZbh1});
  o.space.virtual_stages = {2};
  o.space.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  o.space.sequence_parallel = {false, true};
  o.space.zero_stages = {0, 1, 2, 3};
  o.space.dp_overlaps = {false, true};
  o.space.offloads = {Offload::kNone, Offload::kOptimizer, Offload::kActivations, Offload::kBoth};
  o.space.context_parallel = {1, 2};
  std::vector<Strategy> out;
  for (Framework framework : {Framework::kMegatron, Framework::kFsdp}) {
    o.base.framework = framework;
    for (const Candidate& c : enumerateCandidates(model, cluster, o.base, o.space)) {
      if (!c.violation) out.push_back(c.strategy);
    }
  }
  return out;
}

// Per stage, with chunk figures drawn at random (parameters, experts among them, activations,
// the largest layer, W's held inputs, the transients' inputs): bound <= the full estimate's peak,
// and <= the search's reduced one (full = false), which has the same peak.
TEST(MemoryPeakBoundTest, NeverAboveTheStagePeakOverASweep) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "llama3-8b"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const std::vector<Strategy> strategies = sweep(model, cluster);
  ASSERT_GT(strategies.size(), 1000u);
  std::mt19937_64 random(34);
  std::uniform_int_distribution<int64_t> bytes(0, int64_t{1} << 34);
  int64_t stages = 0, tight = 0;
  for (const Strategy& s : strategies) {
    const int K = s.pp * std::max(1, s.virtual_stages);
    std::vector<ChunkMemoryInput> chunks(K);
    for (ChunkMemoryInput& c : chunks) {
      c.parameters = bytes(random) / 8;
      c.expert_parameters = c.parameters / 4;
      c.activation_bytes = bytes(random);
      c.largest_layer_bytes = c.activation_bytes / 3;
      c.weight_grad_input_bytes = c.activation_bytes / 5;
      c.block_parameters = c.parameters / 2;
      c.largest_layer_parameters = c.parameters / 5;
      c.largest_block_parameters = c.parameters / 6;
      c.root_parameters = c.parameters / 7;
      c.recompute_transient_bytes = bytes(random) / 16;
      c.embedding_parameters = c.parameters / 9;
      c.head_parameters = c.parameters / 9;
    }
    const std::vector<DeviceChunkSums> devices = deviceChunkSums(s, s.microBatches(), chunks);
    const StrategyTerms terms =
        checkedStrategyTerms(model, s, devices, 0.05, cluster.device.memory);
    for (int d = 0; d < s.pp; ++d) {
      const int64_t bound = stagePeakLowerBound(terms, devices[d]);
      const StageMemory full =
          stageMemory(model, s, terms, devices[d], d, cluster.device.memoryBytes(), true);
      const StageMemory reduced =
          stageMemory(model, s, terms, devices[d], d, cluster.device.memoryBytes(), false);
      ASSERT_LE(bound, full.peak_bytes) << s.name() << s.techniques() << " stage " << d;
      ASSERT_EQ(reduced.peak_bytes, full.peak_bytes);
      // Not a trivial bound: at least the states and held activations it names.
      ASSERT_GE(bound, full.model_state_bytes);
      ASSERT_GE(bound, full.activation_bytes);
      ++stages;
      tight += bound == full.peak_bytes;
    }
  }
  EXPECT_GT(stages, 5000);
  EXPECT_LT(tight, stages);  // transients and buffers exist: the bound is below the peak somewhere
}

// Through the closed-form tier, candidate by candidate as a search's worker sees them: asked for
// exact peaks only below 0 (any bound will do), every verdict is the exact estimate's, every
// peak at most the exact one (equal where it says it is exact), and the bound decides some.
TEST(MemoryPeakBoundTest, TheTiersVerdictsAreTheExactEstimates) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "llama3-8b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  cluster.device.memory_gib = 24;  // some candidates fit, many do not
  const CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  const ClosedFormTier tier(model, cluster, costs, 0.05, cache);
  ClosedFormTier::Workspace exact_workspace, bound_workspace;
  int fitting = 0, bounded = 0, oom = 0;
  for (const Strategy& s : sweep(model, cluster)) {
    const ClosedFormResult exact = tier.evaluate(s, exact_workspace);
    const ClosedFormResult bound = tier.evaluate(s, bound_workspace, 0);
    ASSERT_TRUE(exact.peak_exact);
    ASSERT_EQ(bound.fits, exact.fits) << s.name() << s.techniques();
    ASSERT_LE(bound.peak_memory_bytes, exact.peak_memory_bytes) << s.name() << s.techniques();
    if (bound.peak_exact) {
      ASSERT_EQ(bound.peak_memory_bytes, exact.peak_memory_bytes);
      ASSERT_EQ(bound.peak_memory_stage, exact.peak_memory_stage);
    } else {
      ASSERT_FALSE(bound.fits);
      ++bounded;
    }
    // The bound kept in the class's memo does not answer a later ask for the exact peak.
    const ClosedFormResult again = tier.evaluate(s, bound_workspace);
    ASSERT_TRUE(again.peak_exact);
    ASSERT_EQ(again.peak_memory_bytes, exact.peak_memory_bytes);
    fitting += exact.fits;
    oom += !exact.fits;
  }
  EXPECT_GT(fitting, 0);
  EXPECT_GT(bounded, oom / 2);  // most OOM candidates are clearly out of memory
}

}  // namespace
}  // namespace evsim

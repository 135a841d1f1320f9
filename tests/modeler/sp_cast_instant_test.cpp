// --grad-reduce-sync step with sequence parallelism (issue 29): a bucket's cast runs in a gradient
// hook, after its linear's backward has returned, so at that instant the SP input gradient
// (Megatron's grad_input, full sequence x h) is freed and only the kept gather buffer (e T h) is
// held; inside a backward task both come and go (2 e T h). The memory walk keeps its cast
// instants apart from its plateaus (modeler/memory_components.h, pendingReductionPeak and
// bucketMoment). Walks, stage figures and simulated peaks worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "modeler/cost_model.h"
#include "modeler/memory_components.h"
#include "modeler/memory_model.h"
#include "modeler/pending_reductions.h"
#include "modeler/simulation.h"
#include "modeler/summary_report.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// Activations a [0, 10] 100 B; a bucket filled in [2, 5] with 50 B and cast at 5 into 100 B held
// to 9. Instants (frees, allocations, then the cast's source): 0: 100; 2: 150; 5: the copy
// 250 (the cast instant), its source freed 200 (the plateau to 6); 9: 100; 10: 0. The
// activations' own peak 100: plateaus 150 - 100 = 50 and 200 - 100 = 100, the cast 150.
// A second bucket in one dtype [6, 8] 120: the plateau at 6 100 + 100 + 120 = 320: 220; its
// issue allocates nothing, so no other cast instant: 150 still.
TEST(SpCastInstant, WalkTellsCastInstantsFromPlateausByHand) {
  const std::vector<HeldBytes> activations = {{0, 10, 100}};
  std::vector<HeldBytes> pending = {{2, 5, 50, true}, {5, 9, 100}};
  PendingReductionPeak p = pendingReductionPeak(activations, pending);
  EXPECT_EQ(p.plateau_bytes, 100);
  EXPECT_EQ(p.cast_bytes, 150);
  pending.push_back({6, 8, 120});
  p = pendingReductionPeak(activations, pending);
  EXPECT_EQ(p.plateau_bytes, 220);
  EXPECT_EQ(p.cast_bytes, 150);
  // A cast at an instant where activations are freed first (a backward's end): at 5 the
  // activations' 100 go, then the copy comes: 50 + 100 = 150, 50 above the activations' peak.
  p = pendingReductionPeak({{0, 5, 100}}, {{2, 5, 50, true}, {5, 9, 100}});
  EXPECT_EQ(p.plateau_bytes, 50);  // at 2: 150
  EXPECT_EQ(p.cast_bytes, 50);
}

// The stage's backward moment with comm = 2X (the SP gather buffer and the input gradient, X =
// e T h = 40) and comm_at_cast = X: the plateau adds 80 + plateau, the cast 40 + cast.
//   {100, 150}: 180 against 190, the cast's: 40 and 150 (the old rule's 80 + 150 = 230, X more);
//   {220, 150}: 300 against 190, the plateau's: 80 and 220 (the old rule's the same);
//   {100, 140}: 180 against 180, a tie, the plateau's.
TEST(SpCastInstant, BucketMomentByHand) {
  BucketMoment m = bucketMoment(80, 40, {100, 150});
  EXPECT_EQ(m.comm_transient_bytes, 40);
  EXPECT_EQ(m.pending_reduction_bytes, 150);
  EXPECT_TRUE(m.at_cast);
  m = bucketMoment(80, 40, {220, 150});
  EXPECT_EQ(m.comm_transient_bytes, 80);
  EXPECT_EQ(m.pending_reduction_bytes, 220);
  EXPECT_FALSE(m.at_cast);
  m = bucketMoment(80, 40, {100, 140});
  EXPECT_EQ(m.comm_transient_bytes, 80);
  EXPECT_FALSE(m.at_cast);
}

ModelConfig bf16TinyLlama() {
  ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  model.dtype = DType::kBf16;
  return model;
}

Strategy spStepZero2(int tp, int pp, int dp, int64_t micro_batch, int64_t global_batch) {
  Strategy s = Strategy::of(tp, pp, dp, micro_batch, global_batch);
  s.sequence_parallel = true;
  s.zero_stage = 2;
  s.grad_reduce_sync = GradReduceSync::kStep;
  return s;
}

// tiny-llama (h 64, s 32) in bf16: e T h = 2 x 32 b x 64 = 4,096 b bytes with SP; none without SP
// or with --tp-comm-overlap (the gathers land in userbuffers).
TEST(SpCastInstant, SequenceParallelGradInputBytesByHand) {
  const ModelConfig model = bf16TinyLlama();
  Strategy s = spStepZero2(2, 1, 2, 1, 2);
  EXPECT_EQ(sequenceParallelGradInputBytes(model, s), 4096);
  s.micro_batch = 2;
  EXPECT_EQ(sequenceParallelGradInputBytes(model, s), 8192);
  EXPECT_EQ(tensorContextBufferBytes(model, s), 2 * 8192);  // the kept buffer and the gradient
  s.tp_comm_overlap = true;
  EXPECT_EQ(sequenceParallelGradInputBytes(model, s), 0);
  s.tp_comm_overlap = false;
  s.sequence_parallel = false;
  EXPECT_EQ(sequenceParallelGradInputBytes(model, s), 0);
}

// A plan's stage (tiny-llama bf16, 2M2P2D, SP, ZeRO-2 under step, m = 4) given walk figures
// {plateau, cast}, against the same with nothing pending: comm = 2 X = 8,192, X = 4,096.
//   {1,000, 10,000}: plateau 8,192 + 1,000 = 9,192, cast 4,096 + 10,000 = 14,096: the cast's,
//     14,096 - 8,192 = 5,904 = 10,000 - X more (the old rule, one figure max = 10,000: X more);
//   {12,000, 10,000}: 20,192 against 14,096: the plateau's, 12,000 more (as the old rule);
//   without SP (comm 0) {1,000, 10,000}: the cast's 10,000 whole.
TEST(SpCastInstant, StageCountsTheKeptBufferAloneAtACastByHand) {
  const ModelConfig model = bf16TinyLlama();
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  for (const bool sp : {true, false}) {
    SCOPED_TRACE(sp ? "SP" : "no SP");
    Strategy s = spStepZero2(2, 2, 2, 1, 8);
    s.sequence_parallel = sp;
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    const IterationPlan plan = buildIterationPlan(model, cluster, s);
    const MemoryEstimate none =
        estimateMemory(plan, kDefaultMemoryHeadroom, std::vector<PendingReductionPeak>(2));
    ASSERT_FALSE(none.stages[0].peak_at_optimizer_step);
    EXPECT_EQ(none.stages[0].comm_transient_bytes, sp ? 8192 : 0);
    const int64_t x = sp ? 4096 : 0;
    const MemoryEstimate cast =
        estimateMemory(plan, kDefaultMemoryHeadroom, {{1000, 10000}, {1000, 10000}});
    EXPECT_EQ(cast.stages[0].allocated_bytes - none.stages[0].allocated_bytes, 10000 - x);
    EXPECT_EQ(cast.stages[0].pending_reduction_bytes, 10000);
    EXPECT_EQ(cast.stages[0].comm_transient_bytes, sp ? 4096 : 0);
    EXPECT_TRUE(cast.stages[0].peak_at_bucket_cast);
    const MemoryEstimate plateau =
        estimateMemory(plan, kDefaultMemoryHeadroom, {{12000, 10000}, {12000, 10000}});
    EXPECT_EQ(plateau.stages[0].allocated_bytes - none.stages[0].allocated_bytes, 12000);
    EXPECT_EQ(plateau.stages[0].comm_transient_bytes, sp ? 8192 : 0);
    EXPECT_FALSE(plateau.stages[0].peak_at_bucket_cast);
  }
}

// Simulated, one stage, m = 1 (tiny-llama bf16, 2M1P2D, SP, ZeRO-2 under step): the rank holds N =
// 16,384 (embedding 512 x 64 / 2) + 4 x 24,704 (qkv 4,096, proj 2,048, fc1 12,288, fc2 6,144,
// norms 128) + 16,448 (output 16,384, final norm 64) = 131,648 parameters, one bucket of them
// (DeepSpeed's 5e8 elements), filled in bf16 (f = 2N) through B and cast at B's end into the fp32
// wire (g = 4N) until its reduction ends. F [0, t_F], B [t_F, t_B]; the micro-batch's a bytes are
// held over [t_F, t_B]. The walk: at t_F a + 2N (a plateau); at t_B the activations go (2N), the
// copy comes (6N: the cast instant), its source goes (4N). The activations' peak a:
//   plateau max(2N, 4N - a), cast 6N - a.
// Stage: comm 2X (X = e T h = 2 x 32 b x 64), at the cast X. With b = 1 (X = 4,096) a < 2N, so
// the cast's 6N - a + X beats the plateau's 4N - a + 2X: the peak is the old rule's (the full 2X
// beside the cast) less exactly X. With b = 4 (X = 16,384), 4N <= a < 6N: the plateau 2N (mid-B,
// its bucket filling beside every activation) beats the cast's 6N - a > 0 (below 2N by more than
// X): unchanged.
TEST(SpCastInstant, SimulatedPeakAtACastHoldsTheKeptBufferAloneByHand) {
  const ModelConfig model = bf16TinyLlama();
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  constexpr int64_t kN = 16'384 + 4 * 24'704 + 16'448;
  for (const int64_t b : {int64_t{1}, int64_t{4}}) {
    SCOPED_TRACE(::testing::Message() << "micro-batch " << b);
    const Strategy s = spStepZero2(2, 1, 2, b, 2 * b);
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.micro_batches, 1);
    ASSERT_EQ(plan.stages[0].parameters, kN);
    ASSERT_EQ(plan.stages[0].micro_batch_buckets.size(), 1u);
    ASSERT_EQ(plan.stages[0].micro_batch_buckets[0].bytes, 4 * kN);  // the fp32 wire
    const int64_t a = estimateMemory(plan).stages[0].activation_bytes_per_micro_batch;
    const int64_t x = 2 * 32 * b * 64;
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const StageTimeline& stage = sim.timeline.pipelines[0].stages[0];
    ASSERT_EQ(stage.tasks.size(), 2u);
    ASSERT_EQ(stage.reduction_ready_us.size(), 1u);
    EXPECT_DOUBLE_EQ(stage.reduction_ready_us[0], stage.tasks[1].run.end_us);  // B's end
    const std::vector<PendingReductionPeak> walked = pendingReductionPeaks(sim);
    ASSERT_EQ(walked.size(), 1u);
    EXPECT_EQ(walked[0].plateau_bytes, std::max(2 * kN, 4 * kN - a));
    EXPECT_EQ(walked[0].cast_bytes, 6 * kN - a);
    const MemoryEstimate after = estimateMemory(sim.plan, kDefaultMemoryHeadroom, walked);
    // The old rule: the walk's one figure (its largest instant) beside the full SP term.
    const MemoryEstimate old_rule = estimateMemory(
        sim.plan, kDefaultMemoryHeadroom,
        {{std::max(walked[0].plateau_bytes, walked[0].cast_bytes), 0}});
    const StageMemory& m = after.stages[0];
    ASSERT_FALSE(m.peak_at_optimizer_step);
    ASSERT_FALSE(old_rule.stages[0].peak_at_optimizer_step);
    const nlohmann::json memory = summaryJson(sim)["stages"][0]["memory"];
    EXPECT_EQ(memory["device_bytes"].get<int64_t>(), m.peak_bytes);
    EXPECT_EQ(memory["pending_reduction_bytes"].get<int64_t>(), m.pending_reduction_bytes);
    if (b == 1) {
      ASSERT_LT(a, 2 * kN);
      EXPECT_TRUE(m.peak_at_bucket_cast);
      EXPECT_TRUE(memory["peak_at_bucket_cast"].get<bool>());
      EXPECT_EQ(m.pending_reduction_bytes, 6 * kN - a);
      EXPECT_EQ(m.comm_transient_bytes, x);
      EXPECT_EQ(old_rule.stages[0].peak_bytes - m.peak_bytes, x);
    } else {
      ASSERT_GE(a, 4 * kN);
      ASSERT_LT(a, 6 * kN);
      EXPECT_FALSE(m.peak_at_bucket_cast);
      EXPECT_FALSE(memory["peak_at_bucket_cast"].get<bool>());
      EXPECT_EQ(m.pending_reduction_bytes, 2 * kN);
      EXPECT_EQ(m.comm_transient_bytes, 2 * x);
      EXPECT_EQ(old_rule.stages[0].peak_bytes, m.peak_bytes);
    }
  }
}

}  // namespace
}  // namespace evsim

// --grad-reduce-sync step (Strategy::grad_reduce_sync): ZeRO-2's per-micro-batch reductions queued
// on the DP stream and waited for only before the optimizer step (modeler/timing_engine.h), the
// queue bound, the memory of the pending reductions (modeler/memory_components.h), and the plan
// and option plumbing. Timelines worked by hand in the comment above each test.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "modeler/cost_model.h"
#include "modeler/memory_components.h"
#include "modeler/memory_model.h"
#include "modeler/pending_reductions.h"
#include "modeler/summary_report.h"
#include "modeler/simulation.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "plan/zero2_buckets.h"
#include "support/stage_cost.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::stageCost;

constexpr Phase F = Phase::kForward;
constexpr Phase B = Phase::kBackward;

// DAPPLE, P = 2, m = 2, free sends, f = 1 and b = 2 on both stages, one ZeRO-2 bucket per stage
// reduced in R us when the backward's last op has run (its epilogue), optimizer 1 us.
// `at_step`: the bucket is a micro_batch_buckets entry (ready at offset b); otherwise it is in
// the backward's op list, in series at its end (today's behaviour): B lasts b + R.
// Stage 0's micro-batch buckets as the one reduce-scatter the closed-form bound counts: their
// bytes together, in the last bucket's group and dtype (all share them).
Event stageZeroBucketsAsOne(const IterationPlan& plan) {
  int64_t bytes = 0;
  std::optional<Event> bucket;
  for (const GradBucket& b : plan.stages[0].micro_batch_buckets) {
    bucket = plan.events[b.event].event;
    bytes += bucket->message_bytes;
  }
  EXPECT_TRUE(bucket.has_value()) << "stage 0 has no micro-batch buckets";
  if (!bucket) return Event{};
  return makeCommunication(EventKind::kReduceScatter, bytes, bucket->placement, bucket->dtype);
}

TimingInput twoStageZero2(bool at_step, double reduce_us, int queue = 0) {
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = 2;
  for (int s = 0; s < 2; ++s) {
    StageCost c = stageCost(1, at_step ? 2 : 2 + reduce_us, 0, 1);
    if (at_step) c.micro_batch_buckets = {BucketCost{2, reduce_us}};
    in.stages.push_back(c);
  }
  in.pipelines.push_back(PipelineCost{{0.0}, {0.0}, {}});
  in.grad_reduce_at_step = at_step;
  in.grad_reduce_queue = queue;
  return in;
}

void expectRuns(const IterationTimeline& tl, const StageTimeline& stage,
                const std::vector<std::tuple<Phase, int, double, double>>& rows) {
  ASSERT_EQ(stage.tasks.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [phase, mb, start, end] = rows[i];
    SCOPED_TRACE(::testing::Message() << "task " << i);
    EXPECT_EQ(Phase{tl.graph.nodes[stage.node(i)].task.phase}, phase);
    EXPECT_EQ(tl.graph.nodes[stage.node(i)].task.micro_batch, mb);
    EXPECT_DOUBLE_EQ(stage.tasks[i].run.start_us, start);
    EXPECT_DOUBLE_EQ(stage.tasks[i].run.end_us, end);
  }
}

// R = 3. Orders (1F1B): stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1.
// backward (B = 2 + 3 = 5, the reduction waited at its end):
//   s0 F0 [0, 1], F1 [1, 2];  s1 F0 [1, 2], B0 [2, 7], F1 [7, 8], B1 [8, 13]
//   s0 B0 max(2, 7) = [7, 12], B1 max(12, 13) = [13, 18];  optimizer s0 [18, 19], s1 [13, 14]
//   iteration 19.
// step (B = 2; each B queues its reduction at its end on the DP stream):
//   s1 B0 [2, 4] -> r [4, 7];  F1 [4, 5];  B1 [5, 7] -> r max(7, 7) = [7, 10]
//   s0 B0 max(2, 4) = [4, 6] -> r [6, 9];  B1 max(6, 7) = [7, 9] -> r max(9, 9) = [9, 12]
//   micro-batch 0's reduction on s0 [6, 9] runs beside micro-batch 1's backward [7, 9]
//   optimizer s0 max(9, 12) = [12, 13], s1 max(7, 10) = [10, 11]: iteration 13.
TEST(GradReduceSyncTest, StepQueuesTheReductionsBesideLaterMicroBatchesByHand) {
  const IterationTimeline waited = computeTimeline(twoStageZero2(false, 3));
  expectRuns(waited, waited.pipelines[0].stages[0], {{F, 0, 0, 1}, {F, 1, 1, 2}, {B, 0, 7, 12},
                                                     {B, 1, 13, 18}});
  expectRuns(waited, waited.pipelines[0].stages[1], {{F, 0, 1, 2}, {B, 0, 2, 7}, {F, 1, 7, 8},
                                                     {B, 1, 8, 13}});
  EXPECT_DOUBLE_EQ(waited.pipelines[0].stages[0].optimizer.start_us, 18);
  EXPECT_DOUBLE_EQ(waited.iteration_us, 19);

  const IterationTimeline queued = computeTimeline(twoStageZero2(true, 3));
  const StageTimeline& s0 = queued.pipelines[0].stages[0];
  const StageTimeline& s1 = queued.pipelines[0].stages[1];
  expectRuns(queued, s0, {{F, 0, 0, 1}, {F, 1, 1, 2}, {B, 0, 4, 6}, {B, 1, 7, 9}});
  expectRuns(queued, s1, {{F, 0, 1, 2}, {B, 0, 2, 4}, {F, 1, 4, 5}, {B, 1, 5, 7}});
  ASSERT_EQ(s0.grad_sync.size(), 2u);
  EXPECT_DOUBLE_EQ(s0.grad_sync[0].start_us, 6);
  EXPECT_DOUBLE_EQ(s0.grad_sync[0].end_us, 9);
  EXPECT_DOUBLE_EQ(s0.grad_sync[1].start_us, 9);
  EXPECT_DOUBLE_EQ(s0.grad_sync[1].end_us, 12);
  // Micro-batch 0's reduction overlaps micro-batch 1's backward.
  EXPECT_LT(s0.grad_sync[0].start_us, s0.tasks[3].run.end_us);
  EXPECT_GT(s0.grad_sync[0].end_us, s0.tasks[3].run.start_us);
  ASSERT_EQ(s1.grad_sync.size(), 2u);
  EXPECT_DOUBLE_EQ(s1.grad_sync[0].start_us, 4);
  EXPECT_DOUBLE_EQ(s1.grad_sync[0].end_us, 7);
  EXPECT_DOUBLE_EQ(s1.grad_sync[1].start_us, 7);
  EXPECT_DOUBLE_EQ(s1.grad_sync[1].end_us, 10);
  EXPECT_EQ(s0.grad_sync_chunk, (std::vector<int>{0, 0}));
  EXPECT_EQ(s0.grad_sync_bucket, (std::vector<int>{0, 0}));
  EXPECT_DOUBLE_EQ(s0.pipeline_end_us, 9);
  EXPECT_DOUBLE_EQ(s0.optimizer.start_us, 12);
  EXPECT_DOUBLE_EQ(s1.optimizer.start_us, 10);
  EXPECT_DOUBLE_EQ(queued.iteration_us, 13);
  EXPECT_DOUBLE_EQ(s0.grad_reduce_wait_us, 0);
}

// R = 5, step, queue bound K = 1 (a task that ends with more than one reduction pending waits
// for the oldest).
// No bound: s1 B0 [2, 4] -> r0 [4, 9]; F1 [4, 5]; B1 [5, 7] -> r1 max(9, 7) = [9, 14];
//   s0 B0 [4, 6] -> r0 [6, 11]; B1 [7, 9] -> r1 [11, 16]. Ends: s0 9, s1 7; optimizer s0
//   [16, 17], s1 [14, 15]: iteration 17.
// K = 1: s1 B0 ends at 4 with r0 pending (1: no wait); B1 ends at 7 with r0 and r1 pending: waits
//   for r0 until 9 (2 us); s0 B0 ends at 6 with 1 pending; B1 (its input at 7, s1's B1 send
//   end) [7, 9] leaves two pending: waits for r0 until 11 (2 us). Pipeline ends s0 11, s1 9; the
//   queue is unchanged (r1 could not start before the r0 it waited for anyway), so the optimizer
//   and the iteration stay as above.
TEST(GradReduceSyncTest, QueueBoundMakesComputeWaitForTheOldestByHand) {
  const IterationTimeline free_queue = computeTimeline(twoStageZero2(true, 5));
  EXPECT_DOUBLE_EQ(free_queue.pipelines[0].stages[0].pipeline_end_us, 9);
  EXPECT_DOUBLE_EQ(free_queue.pipelines[0].stages[1].pipeline_end_us, 7);
  EXPECT_DOUBLE_EQ(free_queue.iteration_us, 17);

  const IterationTimeline bounded = computeTimeline(twoStageZero2(true, 5, /*queue=*/1));
  const StageTimeline& s0 = bounded.pipelines[0].stages[0];
  const StageTimeline& s1 = bounded.pipelines[0].stages[1];
  expectRuns(bounded, s1, {{F, 0, 1, 2}, {B, 0, 2, 4}, {F, 1, 4, 5}, {B, 1, 5, 7}});
  expectRuns(bounded, s0, {{F, 0, 0, 1}, {F, 1, 1, 2}, {B, 0, 4, 6}, {B, 1, 7, 9}});
  EXPECT_DOUBLE_EQ(s1.grad_reduce_wait_us, 2);
  EXPECT_DOUBLE_EQ(s0.grad_reduce_wait_us, 2);
  EXPECT_DOUBLE_EQ(s1.pipeline_end_us, 9);
  EXPECT_DOUBLE_EQ(s0.pipeline_end_us, 11);
  ASSERT_EQ(s0.grad_sync.size(), 2u);
  EXPECT_DOUBLE_EQ(s0.grad_sync[1].start_us, 11);
  EXPECT_DOUBLE_EQ(s0.grad_sync[1].end_us, 16);
  EXPECT_DOUBLE_EQ(bounded.iteration_us, 17);
}

// The same with a third micro-batch, where the wait moves compute: m = 3, R = 5, K = 1.
// Orders: s0 F0 F1 B0 F2 B1 B2; s1 F0 B0 F1 B1 F2 B2.
// No bound: s1 F0 [1, 2] B0 [2, 4] (r0 [4, 9]) F1 [4, 5] B1 [5, 7] (r1 [9, 14]) F2 needs s0's F2
//   s0: F0 [0, 1] F1 [1, 2] B0 [4, 6] (r0 [6, 11]) F2 [6, 7] B1 [7, 9] (r1 [11, 16])
//   s1 F2 max(7, 7) = [7, 8] B2 [8, 10] (r2 [14, 19]); s0 B2 max(9, 10) = [10, 12] (r2 [16, 21])
//   optimizer s0 [21, 22]: iteration 22.
// K = 1: s1 B1 ends at 7 with 2 pending: waits to 9; F2 [9, 10] (s0's F2 ended at 7); B2
//   [10, 12] (r2 max(14, 12) = [14, 19]; ends with r1, r2 pending: waits to 14).
//   s0 B1 [7, 9] ends with r0, r1 pending: waits to 11; B2 needs s1's B2 (12): [12, 14]
//   (r2 max(16, 14) = [16, 21]); ends with r1, r2 pending: waits to 16. Optimizer s0 [21, 22].
TEST(GradReduceSyncTest, QueueBoundDelaysLaterMicroBatchesByHand) {
  TimingInput in = twoStageZero2(true, 5, /*queue=*/1);
  in.micro_batches = 3;
  const IterationTimeline tl = computeTimeline(in);
  const StageTimeline& s0 = tl.pipelines[0].stages[0];
  const StageTimeline& s1 = tl.pipelines[0].stages[1];
  expectRuns(tl, s1, {{F, 0, 1, 2}, {B, 0, 2, 4}, {F, 1, 4, 5}, {B, 1, 5, 7}, {F, 2, 9, 10},
                      {B, 2, 10, 12}});
  expectRuns(tl, s0, {{F, 0, 0, 1}, {F, 1, 1, 2}, {B, 0, 4, 6}, {F, 2, 6, 7}, {B, 1, 7, 9},
                      {B, 2, 12, 14}});
  EXPECT_DOUBLE_EQ(s1.grad_reduce_wait_us, 2 + 2);
  EXPECT_DOUBLE_EQ(s0.grad_reduce_wait_us, 2 + 2);
  EXPECT_DOUBLE_EQ(s0.pipeline_end_us, 16);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 22);
}

// What the pending reductions add above the held activations' peak (memory_components.h), a
// walk over time with frees before allocations at one instant:
//   activations a1 [0, 10] 100 B, a2 [2, 6] 100 B: their own peak 200 (2-6);
//   buckets b1 [4, 8] 50, b2 [6, 7] 100: at 4: 250; at 6 a2 is freed before b2 is allocated:
//   100 + 50 + 100 = 250 (350 if b2 came first); at 7: 150; at 8: 100. Peak 250: 50 above.
//   b3 [8, 20] 300 more: at 8 b1 is freed first, 100 + 300 = 400: 200 above.
// No bucket: 0; buckets alone (no activations): their own peak.
TEST(GradReduceSyncTest, PendingReductionPeakBytesByHand) {
  const std::vector<HeldBytes> activations = {{0, 10, 100}, {2, 6, 100}};
  std::vector<HeldBytes> pending = {{4, 8, 50}, {6, 7, 100}};
  // No cast (every bucket in one dtype): plateaus alone.
  auto expectPeak = [](const PendingReductionPeak& p, int64_t plateau, int64_t cast) {
    EXPECT_EQ(p.plateau_bytes, plateau);
    EXPECT_EQ(p.cast_bytes, cast);
  };
  expectPeak(pendingReductionPeak(activations, pending), 50, 0);
  pending.push_back({8, 20, 300});
  expectPeak(pendingReductionPeak(activations, pending), 200, 0);
  expectPeak(pendingReductionPeak(activations, {}), 0, 0);
  expectPeak(pendingReductionPeak({}, {{0, 2, 7}, {1, 3, 5}}), 12, 0);
  // No IPG buffer under step, even with overlap_comm (each bucket is its own buffer, the one being
  // filled among those the walk counts); under backward a 4 MiB bucket of the fp32 wire holds
  // 1,048,576 elements, in the model dtype (2 bytes) here, two such buffers with overlap_comm.
  Strategy s = Strategy::of(1, 1, 4, 1, 8);
  s.zero_stage = 2;
  s.dp_bucket_bytes = 4 << 20;
  s.dp_overlap = true;
  s.grad_reduce_sync = GradReduceSync::kStep;
  EXPECT_EQ(zero2BufferBytes(s, 4, 2), 0);
  s.grad_reduce_sync = GradReduceSync::kBackward;
  EXPECT_EQ(zero2BufferBytes(s, 4, 2), 2 * 1'048'576 * 2);
}

// The walk's intervals on the hand-traced timelines above (DAPPLE, P = 2, m = 3, f = 1, b = 2,
// one bucket per backward reduced in R = 5 us), with a chunk's saved activations a = 10 bytes a
// micro-batch and its bucket g = 100 bytes: a bucket is held from its first gradient (its
// backward's start) to its reduction's end.
// No bound, stage 0: F0 [0, 1], F1 [1, 2], B0 [4, 6], F2 [6, 7], B1 [7, 9], B2 [10, 12];
//   r0 [6, 11], r1 [11, 16], r2 [16, 21]: buckets [4, 11], [7, 16], [10, 21].
//   held activations: 10 at 1, 20 at 2, 10 at 6, 20 at 7, 10 at 9, 0 at 12: peak 20.
//   activations + buckets: 20 + 100 at 4; 10 + 100 at 6; at 7 F2's 10 and r1's 100 come: 220;
//   210 at 9; at 10 r2's: 10 + 300 = 310 (the peak); 210 at 11; 200 at 12. 310 - 20 = 290.
// Queue bound K = 1, stage 0: B1 [7, 9] waits to 11, B2 [12, 14] (r2 [16, 21]): buckets
//   [4, 11], [7, 16], [12, 21]; at most one closed bucket beside the one being filled: 220 at 7,
//   210 at 9, 110 at 11, 210 at 12, 200 at 14: 220 - 20 = 200 = 2g.
// Stage 1, no bound: B0 [2, 4], B1 [5, 7], B2 [8, 10]; r0 [4, 9], r1 [9, 14], r2 [14, 19]:
//   buckets [2, 9], [5, 14], [8, 19]; held peak 10; at 8: 10 + 300 = 310: 300.
// Stage 1, K = 1: B1 waits to 9, F2 [9, 10], B2 [10, 12] (r2 [14, 19]): buckets [2, 9], [5, 14],
//   [10, 19]: 210 at 5, 100 at 9, 210 at 10: 200 = 2g.
// The old rule (a bucket from its issue, the backward's end, beside one IPG buffer) gave stage 0
// 190 with and without the bound (at 9: 10 + r0 + r1), stage 1 200 and 190: a bound that did not
// lower what it bounds, and the bucket being filled left to the IPG buffer.
// Filled in a narrower dtype (50 bytes, cast to the wire's 100 at the issue), stage 0 without a
// bound: fill [4, 6], [7, 9], [10, 12], wire [6, 11], [9, 16], [12, 21]; at 6 B0's activations
// go (60), r0's copy comes (160), then its source (110); at 7 F2 and B1's filling (170); at 9 F1's
// activations go (160), r1's copy comes beside r0 (260: 10 + 100 + 50 + 100), then its source
// (210); 260 at 10; 160 at 11; at 12 250, then 200. 260 - 20 = 240, both at a plateau (10) and
// at a cast instant (9, the copy made and its source not yet freed).
TEST(GradReduceSyncTest, PendingBucketsHeldFromTheirFirstGradientByHand) {
  const std::vector<ChunkHeldBytes> chunks = {{10, {{100, 0}}}};
  struct Case {
    int queue;
    std::vector<std::vector<HeldBytes>> buckets;  // per stage
    std::vector<int64_t> peak;                    // per stage
  };
  const std::vector<Case> cases = {
      {0, {{{4, 11, 100}, {7, 16, 100}, {10, 21, 100}}, {{2, 9, 100}, {5, 14, 100}, {8, 19, 100}}},
       {290, 300}},
      {1, {{{4, 11, 100}, {7, 16, 100}, {12, 21, 100}}, {{2, 9, 100}, {5, 14, 100}, {10, 19, 100}}},
       {200, 200}},
  };
  for (const Case& c : cases) {
    TimingInput in = twoStageZero2(true, 5, c.queue);
    in.micro_batches = 3;
    const IterationTimeline tl = computeTimeline(in);
    for (int st = 0; st < 2; ++st) {
      SCOPED_TRACE(::testing::Message() << "queue " << c.queue << ", stage " << st);
      std::vector<HeldBytes> activations, pending;
      stageHeldBytes(tl.graph, tl.pipelines[0].stages[st], chunks, activations, pending);
      ASSERT_EQ(pending.size(), 3u);
      for (size_t i = 0; i < pending.size(); ++i) {
        EXPECT_DOUBLE_EQ(pending[i].start_us, c.buckets[st][i].start_us) << i;
        EXPECT_DOUBLE_EQ(pending[i].end_us, c.buckets[st][i].end_us) << i;
        EXPECT_EQ(pending[i].bytes, 100) << i;
      }
      ASSERT_EQ(activations.size(), 3u);
      const PendingReductionPeak peak = pendingReductionPeak(activations, pending);
      EXPECT_EQ(peak.plateau_bytes, c.peak[st]);
      EXPECT_EQ(peak.cast_bytes, 0);  // one dtype: no cast
    }
  }
  TimingInput in = twoStageZero2(true, 5);
  in.micro_batches = 3;
  const IterationTimeline tl = computeTimeline(in);
  std::vector<HeldBytes> activations, pending;
  stageHeldBytes(tl.graph, tl.pipelines[0].stages[0], {{10, {{100, 0, 50}}}}, activations,
                 pending);
  ASSERT_EQ(pending.size(), 6u);
  EXPECT_DOUBLE_EQ(pending[0].start_us, 4);
  EXPECT_DOUBLE_EQ(pending[0].end_us, 6);
  EXPECT_EQ(pending[0].bytes, 50);
  EXPECT_TRUE(pending[0].freed_after_allocations);
  EXPECT_DOUBLE_EQ(pending[1].start_us, 6);
  EXPECT_DOUBLE_EQ(pending[1].end_us, 11);
  EXPECT_EQ(pending[1].bytes, 100);
  EXPECT_FALSE(pending[1].freed_after_allocations);
  // The plateau's 260 at 10 and the cast instant's at 9 (above).
  const PendingReductionPeak peak = pendingReductionPeak(activations, pending);
  EXPECT_EQ(peak.plateau_bytes, 240);
  EXPECT_EQ(peak.cast_bytes, 240);
}

// A chunk with three buckets, the last in two parts (dense and experts', issued after the same
// op): the second opens when the first closes, both parts of the third when the second closes.
// One stage, m = 1, f = 1, b = 4, buckets ready at offsets 1, 3 and 4 (4 twice) and reduced in
// 2 us each: B [1, 5]; ready 2, 4, 5, 5; reductions [2, 4], [4, 6], [6, 8], [8, 10];
// opened at 1, 2, 4, 4.
TEST(GradReduceSyncTest, LaterBucketsOpenWhenTheOneBeforeClosesByHand) {
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = 1;
  StageCost c = stageCost(1, 4, 0, 1);
  c.micro_batch_buckets = {BucketCost{1, 2}, BucketCost{3, 2}, BucketCost{4, 2}, BucketCost{4, 2}};
  in.stages.push_back(c);
  in.pipelines.push_back(PipelineCost{{}, {}, {}});
  in.grad_reduce_at_step = true;
  const IterationTimeline tl = computeTimeline(in);
  const std::vector<ChunkHeldBytes> chunks = {{50, {{1, 3}, {2, 7}, {3, 9}, {4, 9}}}};
  std::vector<HeldBytes> activations, pending;
  stageHeldBytes(tl.graph, tl.pipelines[0].stages[0], chunks, activations, pending);
  ASSERT_EQ(pending.size(), 4u);
  const std::vector<std::tuple<double, double, int64_t>> expected = {
      {1, 4, 1}, {2, 6, 2}, {4, 8, 3}, {4, 10, 4}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_DOUBLE_EQ(pending[i].start_us, std::get<0>(expected[i])) << i;
    EXPECT_DOUBLE_EQ(pending[i].end_us, std::get<1>(expected[i])) << i;
    EXPECT_EQ(pending[i].bytes, std::get<2>(expected[i])) << i;
  }
  ASSERT_EQ(activations.size(), 1u);
  EXPECT_DOUBLE_EQ(activations[0].start_us, 1);
  EXPECT_DOUBLE_EQ(activations[0].end_us, 5);
}

// The plan and a simulation on tiny-llama (fp32 model and wire), 1M2P2D, m = 4, one bucket per
// chunk (DeepSpeed's default 5e8 elements hold a chunk): under step each chunk's reduction leaves
// the backward for StagePlan::micro_batch_buckets (same event, its op the backward's last, one
// use per micro-batch as before); the timeline queues m per device, and the iteration is
// shorter.
TEST(GradReduceSyncTest, PlanMovesTheReductionsToTheQueue) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  Strategy s = Strategy::of(1, 2, 2, 1, 8);
  s.zero_stage = 2;
  ASSERT_FALSE(strategyViolation(model, cluster, s));
  const IterationPlan waited = buildIterationPlan(model, cluster, s);
  s.grad_reduce_sync = GradReduceSync::kStep;
  ASSERT_FALSE(strategyViolation(model, cluster, s));
  const IterationPlan queued = buildIterationPlan(model, cluster, s);
  ASSERT_EQ(queued.micro_batches, 4);
  EXPECT_EQ(queued.op_executions, waited.op_executions);
  for (size_t k = 0; k < queued.stages.size(); ++k) {
    const StagePlan& w = waited.stages[k];
    const StagePlan& q = queued.stages[k];
    EXPECT_EQ(test::countOps(w.backward, kZero2ReduceName), 1) << k;
    EXPECT_EQ(test::countOps(q.backward, kZero2ReduceName), 0) << k;
    EXPECT_EQ(q.backward.size() + 1, w.backward.size()) << k;
    ASSERT_EQ(q.micro_batch_buckets.size(), 1u) << k;
    const GradBucket& b = q.micro_batch_buckets[0];
    EXPECT_EQ(b.ready_after_op, static_cast<int>(q.backward.size()) - 1);
    EXPECT_FALSE(b.expert);
    EXPECT_EQ(queued.events[b.event].event.signature(),
              waited.events[w.backward.back().event].event.signature());
    EXPECT_EQ(b.bytes, 4 * q.parameters);  // the chunk's fp32 gradients
  }
  const Simulation sw = simulate(waited, costs.costAll(waited.events));
  const Simulation sq = simulate(queued, costs.costAll(queued.events));
  for (int st = 0; st < 2; ++st) {
    EXPECT_TRUE(sw.timeline.pipelines[0].stages[st].grad_sync.empty());
    EXPECT_EQ(sq.timeline.pipelines[0].stages[st].grad_sync.size(), 4u);
  }
  EXPECT_LT(sq.timeline.iteration_us, sw.timeline.iteration_us);

  // Memory: without a timeline the least first bucket (one bucket a chunk here: its parameters
  // in the fp32 model dtype, pending_bucket_bound_test.cpp); given what a timeline's walk found,
  // the stage adds that instead at the backward's moment.
  const MemoryEstimate no_timeline = estimateMemory(queued);
  for (int st = 0; st < 2; ++st) {
    EXPECT_EQ(no_timeline.stages[st].pending_reduction_bytes, 4 * queued.stages[st].parameters);
  }
  const MemoryEstimate before =
      estimateMemory(queued, kDefaultMemoryHeadroom, std::vector<PendingReductionPeak>(2));
  for (int st = 0; st < 2; ++st) EXPECT_EQ(before.stages[st].pending_reduction_bytes, 0);
  const MemoryEstimate after =
      estimateMemory(queued, kDefaultMemoryHeadroom, {{3000, 0}, {2000, 0}});
  EXPECT_EQ(after.stages[0].pending_reduction_bytes, 3000);
  EXPECT_EQ(after.stages[1].pending_reduction_bytes, 2000);
  ASSERT_FALSE(after.stages[0].peak_at_optimizer_step);
  EXPECT_EQ(after.stages[0].allocated_bytes - before.stages[0].allocated_bytes, 3000);
  EXPECT_EQ(estimateMemory(waited, kDefaultMemoryHeadroom, {{3000, 0}, {2000, 0}})
                .stages[0]
                .pending_reduction_bytes,
            0);
}

// The summary's memory of a simulated plan under step (tiny-llama, fp32 model and wire, 1M2P2D,
// m = 4, one bucket a chunk of g = 4 x its parameters): no IPG buffer, so the DP buffers are the
// later micro-batches' fresh partition alone (4 bytes x parameters / D = 2); the buckets above the
// activations' peak at least g (1F1B: the held activations peak at stage 0's first backward, while
// its bucket fills), and with a queue bound K = 1 at most 2g (one closed bucket pending beside the
// one being filled). The old rule counted a 5e8-element IPG buffer beside the pending buckets.
TEST(GradReduceSyncTest, SummaryCountsTheBucketsOnceUnderStep) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  for (const int queue : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "queue " << queue);
    Strategy s = Strategy::of(1, 2, 2, 1, 8);
    s.zero_stage = 2;
    s.grad_reduce_sync = GradReduceSync::kStep;
    s.grad_reduce_queue = queue;
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.micro_batches, 4);
    std::vector<int64_t> parameters;
    for (const StagePlan& chunk : plan.stages) {
      ASSERT_EQ(chunk.micro_batch_buckets.size(), 1u);
      ASSERT_EQ(chunk.micro_batch_buckets[0].bytes, 4 * chunk.parameters);
      parameters.push_back(chunk.parameters);
    }
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const nlohmann::json summary = summaryJson(sim);
    for (int st = 0; st < 2; ++st) {
      SCOPED_TRACE(::testing::Message() << "stage " << st);
      const nlohmann::json& memory = summary["stages"][st]["memory"];
      const int64_t g = 4 * parameters[static_cast<size_t>(st)];
      EXPECT_EQ(memory["dp_buffer_bytes"].get<int64_t>(), 4 * parameters[static_cast<size_t>(st)] / 2);
      const int64_t buckets = memory.value("pending_reduction_bytes", int64_t{0});
      EXPECT_GE(buckets, g);
      if (queue == 1) {
        EXPECT_LE(buckets, 2 * g);
      }
    }
  }
}

// The pruned search's closed-form bound (closed_form_bound.cpp) under step keeps only its weaker
// ZeRO-2 form, the DP stream's m reductions before the step: on TP 8 x DP 4 over four nodes
// (llama3-8b at 256 tokens, m = 4, Zero2BoundTest's case, where one micro-batch's reductions
// outlast its backward; the in-series form of --grad-reduce-sync backward, m (F + B + the
// reductions), does not hold for a queue in general, as the reductions leave the tasks) the
// weaker one stays at most the simulated time and at least m reduce-scatters of the chunk's
// bucket bytes, with and without a queue bound. The memory
// check's peak is estimateMemory's without a timeline (the least first bucket), below the peak
// with pending buckets (4 GiB of them: with no IPG buffer under step this plan peaks at its
// optimizer step, where nothing is pending, unless the backward's buckets pass the step's
// gradient copies).
TEST(GradReduceSyncTest, ClosedFormBoundStaysBelowTheQueuedSimulation) {
  ModelConfig model = loadModelConfig(test::configPath("models", "llama3-8b"));
  model.seq_length = 256;
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  const ClosedFormTier tier{model, cluster, costs, 0.1, cache};
  for (const bool overlap : {false, true}) {
    for (const int queue : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "overlap " << overlap << ", queue " << queue);
      Strategy s = Strategy::of(8, 1, 4, 1, 16);
      s.zero_stage = 2;
      s.dp_overlap = overlap;
      s.grad_reduce_sync = GradReduceSync::kStep;
      s.grad_reduce_queue = queue;
      ASSERT_FALSE(strategyViolation(model, cluster, s));
      IterationPlan plan = buildIterationPlan(model, cluster, s);
      ASSERT_EQ(plan.micro_batches, 4);
      std::vector<EventCost> event_costs = costs.costAll(plan.events);
      const double one_us = costs.cost(stageZeroBucketsAsOne(plan))->time_us;
      const MemoryEstimate no_timeline = estimateMemory(plan);
      const MemoryEstimate with_pending =
          estimateMemory(plan, kDefaultMemoryHeadroom, {{int64_t{1} << 32, 0}});
      const Simulation sim = simulate(std::move(plan), std::move(event_costs));
      const ClosedFormResult closed = tier.evaluate(s);
      EXPECT_GE(closed.lower_bound_us, 4 * one_us * (1 - 1e-12));
      EXPECT_LE(closed.lower_bound_us, sim.summary.iteration_us * (1 + 1e-12));
      EXPECT_EQ(closed.peak_memory_bytes, no_timeline.peak_bytes);
      EXPECT_LT(closed.peak_memory_bytes, with_pending.peak_bytes);
    }
  }
}

TEST(GradReduceSyncTest, OptionsAreCheckedAndNamed) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  Strategy s = Strategy::of(1, 2, 2, 1, 8);
  s.zero_stage = 1;
  s.grad_reduce_sync = GradReduceSync::kStep;
  const auto zero1 = strategyViolation(model, cluster, s);
  ASSERT_TRUE(zero1.has_value());
  EXPECT_TRUE(test::containsText(*zero1, "--grad-reduce-sync step: needs --zero 2"));
  s.zero_stage = 2;
  EXPECT_FALSE(strategyViolation(model, cluster, s));
  s.grad_reduce_queue = 2;
  EXPECT_FALSE(strategyViolation(model, cluster, s));
  EXPECT_TRUE(test::containsText(s.techniques(Strategy::TechniqueStyle::kLong),
                                 "grad-reduce-at-step(q2)"));
  s.grad_reduce_sync = GradReduceSync::kBackward;
  const auto queue = strategyViolation(model, cluster, s);
  ASSERT_TRUE(queue.has_value());
  EXPECT_TRUE(test::containsText(*queue, "--grad-reduce-queue 2"));
  EXPECT_EQ(parseGradReduceSync("step", "--grad-reduce-sync"), GradReduceSync::kStep);
  EXPECT_EQ(test::inputErrorOf([] { parseGradReduceSync("later", "--grad-reduce-sync"); }),
            "--grad-reduce-sync 'later': must be backward or step");
}


// Many micro-batches on a DP-bound plan: the queued reductions pay device time only, so the
// bound's m reductions must be device times too; with each one's host time added (65 us an op on
// the H100 device file) the bound passed the simulated iteration (found in review). For that to
// show, the simulation must be the first micro-batch's tasks (the fill) + m reductions + the step,
// with m host times above the fill: one wide layer (hidden 16384, ffn 65536: 3.2 G parameters, fp32
// gradients reduce-scattered over 16 ranks on two nodes, 30.5 ms) at 16 tokens (a micro-batch's
// tasks well below that), in one bucket (the bound's one reduce-scatter exactly: with the default
// bucket size each micro-batch's several buckets cost ~0.7 ms more than one, which hides the
// 65 us), and m = 2048 (the fill is ~9.7 ms: 2048 x 65 us = 133 ms passes it; 128 x 65 us did not).
// Checked (session 24): with the host time summed back in (closed_form_bound.cpp's reductionUs as
// syncUs) this test fails at m = 2048 (bound 62,617,370 us against a simulated 62,493,500 us); the
// premise is asserted below. The earlier form on tiny-llama (host-bound at ~7 ms a micro-batch
// beside 77 us reductions) could not fail.
TEST(GradReduceSyncTest, ClosedFormBoundStaysBelowManyQueuedReductions) {
  const ModelConfig model = test::model(16384, 128, 65536, 16, 512, 1, "bf16");
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  PlanCache cache;
  const ClosedFormTier tier{model, cluster, costs, 0.1, cache};
  for (const int micro_batches : {4, 2048}) {
    SCOPED_TRACE(::testing::Message() << micro_batches << " micro-batches");
    Strategy s = Strategy::of(1, 1, 16, 1, 16 * micro_batches);
    s.zero_stage = 2;
    s.grad_reduce_sync = GradReduceSync::kStep;
    s.dp_bucket_bytes = int64_t{1} << 36;  // one bucket: the bound's one reduce-scatter exactly
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.micro_batches, micro_batches);
    ASSERT_EQ(plan.stages[0].micro_batch_buckets.size(), 1u);
    // One reduce-scatter of the chunk's buckets' bytes, device and host time.
    const EventCost one = *costs.cost(stageZeroBucketsAsOne(plan));
    ASSERT_GT(one.host_us, 0);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const double bound = tier.evaluate(s).lower_bound_us;
    EXPECT_LE(bound, sim.summary.iteration_us * (1 + 1e-12));
    EXPECT_GE(bound, micro_batches * one.time_us * (1 - 1e-12));
    if (micro_batches == 2048) {  // the premise: issued times would pass the simulation
      EXPECT_GT(micro_batches * (one.time_us + one.host_us), sim.summary.iteration_us);
    }
  }
}

}  // namespace
}  // namespace evsim

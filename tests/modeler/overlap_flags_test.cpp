// Megatron-LM's --tp-comm-overlap and --overlap-param-gather (issue 31, item 2): the chunked op
// lists by hand, the exposed time of each overlap pattern traced by hand, the userbuffers'
// bytes, the deferred parameter gather on a hand-traced timeline, and Megatron's refusals.
#include <gtest/gtest.h>

#include <string>

#include "io/run_options.h"
#include "modeler/memory_model.h"
#include "modeler/op_offsets.h"
#include "modeler/simulation.h"
#include "modeler/timing_engine.h"
#include "ops/layer_ops.h"
#include "plan/iteration_plan.h"
#include "plan/layer_shape.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// h 64, 4 heads, FFN 256, s 32, vocabulary 128, 2 blocks, fp16 (GELU, LayerNorm, no flash).
ModelConfig tinyModel() { return test::model(64, 4, 256, 32, 128, 2); }

Strategy overlapped(const std::string& text, int64_t b, int64_t B) {
  Strategy s = test::strategy(text, b, B);
  s.sequence_parallel = true;
  s.tp_comm_overlap = true;
  return s;
}

std::vector<const OpInstance*> opsNamed(const OpList& ops, std::string_view name, int layer) {
  std::vector<const OpInstance*> out;
  for (const OpInstance& op : ops) {
    if (op.name == name && op.layer == layer) out.push_back(&op);
  }
  return out;
}

TEST(TpCommOverlap, ChunkedOpListsByHand) {
  // M = 2, b = 2: T = 64 tokens; a shard is 32 tokens x 64 x 2 bytes = 4096 bytes.
  const IterationPlan plan =
      buildIterationPlan(tinyModel(), test::cluster(2), overlapped("2M1P1D", 2, 2));
  const StagePlan& st = plan.stages[0];
  // QKV: M = 2 chunks of 32 rows, one ring step of one shard to the neighbour beside the first.
  const auto qkv = opsNamed(st.forward, "qkv_gemm", 0);
  ASSERT_EQ(qkv.size(), 2u);
  EXPECT_EQ(test::dimValues(test::eventOf(plan, *qkv[0])), (std::vector<int64_t>{32, 96, 64}));
  const auto ring = opsNamed(st.forward, "qkv_input_ring_exchange", 0);
  ASSERT_EQ(ring.size(), 1u);
  EXPECT_EQ(ring[0]->overlap_ops, 1);
  EXPECT_EQ(ring[0]->stream, Stream::kTpComm);
  EXPECT_EQ(ring[0] + 1, qkv[0]);  // the step runs beside the first chunk
  const Event& step = test::eventOf(plan, *ring[0]);
  EXPECT_EQ(step.kind, EventKind::kP2P);
  EXPECT_EQ(step.message_bytes, 4096);
  EXPECT_EQ(step.placement, (Placement{2, 1, 2}));
  // The first chunk carries the layer's weights (3h x h + 3h biases over 2) and saved input.
  EXPECT_EQ(qkv[0]->weights, 96 * 64 + 96);
  EXPECT_EQ(qkv[1]->weights, 0);
  // proj: 4 chunks of 16 rows, each chunk's reduce-scatter (16 x 64 x 2 = 2048 bytes) beside the
  // next chunk, the last one alone; the chunks launched on all but TE's 16 SMs of the
  // reduce-scatter kernel (sm_margin), the ring's chunks above on all of them.
  const auto proj = opsNamed(st.forward, "attn_proj_gemm", 0);
  const auto rs = opsNamed(st.forward, "attn_proj_reduce_scatter", 0);
  ASSERT_EQ(proj.size(), 4u);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(test::dimValues(test::eventOf(plan, *proj[0])),
            (std::vector<int64_t>{16, 64, 32, 16}));
  EXPECT_FALSE(test::eventOf(plan, *qkv[0]).hasDim("sm_margin"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(test::eventOf(plan, *rs[i]).message_bytes, 2048);
    EXPECT_EQ(rs[i]->overlap_ops, i < 3 ? 1 : 0);
    EXPECT_EQ(rs[i], proj[i] + 1);
  }
  EXPECT_EQ(test::countOps(st.forward, "qkv_input_allgather"), 0);
  EXPECT_EQ(test::countOps(st.forward, "fc2_reduce_scatter"), 4 * 2);  // 4 per block
  // Backward: proj's dgrad beside its output gradient's ring; QKV's re-gather (64 x 64 x 2 =
  // 8192 bytes) beside its dgrad, its input gradient's reduce-scatter beside its wgrad.
  EXPECT_EQ(opsNamed(st.backward, "attn_proj_dgrad", 0).size(), 2u);
  EXPECT_EQ(opsNamed(st.backward, "attn_proj_grad_ring_exchange", 0).size(), 1u);
  const OpInstance& regather = test::findOp(st.backward, "qkv_input_regather", 0);
  EXPECT_EQ(regather.overlap_ops, 1);
  EXPECT_EQ(test::eventOf(plan, regather).message_bytes, 8192);
  EXPECT_EQ((&regather + 1)->name, "qkv_dgrad");
  const OpInstance& scatter = test::findOp(st.backward, "qkv_input_grad_reduce_scatter", 0);
  EXPECT_EQ(scatter.overlap_ops, 1);
  EXPECT_EQ((&scatter + 1)->name, "qkv_wgrad");
}

TEST(TpCommOverlap, ChunksKeepTheFlopsAndParameters) {
  // Chunking splits the GEMMs' rows: the model's FLOPs and parameters are those without overlap.
  Strategy plain = test::strategy("2M1P1D", 2, 2);
  plain.sequence_parallel = true;
  const ModelConfig model = tinyModel();
  const IterationPlan a = buildIterationPlan(model, test::cluster(2), plain);
  const IterationPlan b = buildIterationPlan(model, test::cluster(2), overlapped("2M1P1D", 2, 2));
  auto flops = [](const IterationPlan& p) {
    double total = 0;
    for (const UniqueEvent& u : p.events.events()) total += u.event.flops * u.count;
    return total;
  };
  EXPECT_DOUBLE_EQ(flops(a), flops(b));
  EXPECT_EQ(a.stages[0].parameters, b.stages[0].parameters);
}

// One block's forward and backward op lists at M = 2 under the overlap.
struct BlockOps {
  EventTable table;
  OpList forward, backward;
};
BlockOps blockOps() {
  BlockOps out;
  const ModelConfig model = tinyModel();
  LayerShape shape = layerShape(model, overlapped("2M1P1D", 2, 2), Placement{2, 1, 2});
  LayerOpBuilder builder(shape, out.table);
  builder.blockForward(model.blocks[0], 0, out.forward);
  builder.blockBackward(model.blocks[0], 0, out.backward);
  return out;
}

// The task time of `ops` with every compute op `g` us (GEMM chunks `gemm` us), a ring step `c`,
// a reduce-scatter `r` and an all-gather `a`, and compute beside a transfer slowed by `f`.
double taskUs(const BlockOps& b, const OpList& ops, double gemm, double g, double c, double r,
              double a, double f = 1) {
  auto cost = [&](const OpInstance& op) {
    const Event& e = b.table[op.event].event;
    switch (e.kind) {
      case EventKind::kP2P:
        return std::pair{0.0, c};
      case EventKind::kReduceScatter:
        return std::pair{0.0, r};
      case EventKind::kAllGather:
        return std::pair{0.0, a};
      default:
        return std::pair{0.0, e.op == "gemm" ? gemm : g};
    }
  };
  return opOffsets(
      ops, [](const OpInstance&) { return true; }, cost, [](size_t, double) {},
      [&](const OpInstance& op) { return op.stream == Stream::kTpComm ? f : 1.0; });
}

int computeOps(const BlockOps& b, const OpList& ops, bool gemm) {
  int n = 0;
  for (const OpInstance& op : ops) {
    const Event& e = b.table[op.event].event;
    n += e.kind == EventKind::kCompute && (e.op == "gemm") == gemm;
  }
  return n;
}

TEST(TpCommOverlap, ExposedTimeOfEachPatternByHand) {
  const BlockOps b = blockOps();
  // Forward, communication-bound: GEMM chunks and other compute 1 us, a ring step 5, a
  // reduce-scatter chunk 3. QKV and FC1 rings: max(1, 5) + 1 = 6 for 2 chunks (4 more than the
  // chunks alone); proj and FC2: 1 + 3 max(1, 3) + 3 = 13 for 4 chunks (9 more).
  const int n = computeOps(b, b.forward, true) + computeOps(b, b.forward, false);
  EXPECT_DOUBLE_EQ(taskUs(b, b.forward, 1, 1, 5, 3, 0), n + 2 * 4 + 2 * 9);
  // Compute-bound, GEMM chunks 4 us, ring step 2, reduce-scatter 2, slowdown f = 1.5: a chunk
  // beside a transfer that ends 2 us in runs 4 + 2 (f - 1) / f = 4 + 2/3. Ring: 4 + 2/3 + 4; RS:
  // 4 + 3 (4 + 2/3) + 2 (the last one alone). Without slowdown: 8 and 4 + 12 + 2.
  const int other = computeOps(b, b.forward, false);
  EXPECT_NEAR(taskUs(b, b.forward, 4, 1, 2, 2, 0, 1.5),
              other + 2 * (8 + 2.0 / 3) + 2 * (6 + 3 * (4 + 2.0 / 3)), 1e-9);
  EXPECT_DOUBLE_EQ(taskUs(b, b.forward, 4, 1, 2, 2, 0), other + 2 * 8 + 2 * 18);
  // Backward, everything 1 us, ring step 5, all-gather 7, reduce-scatter 3: proj and FC2 dgrad
  // rings add 4 each; QKV and FC1's re-gather beside the dgrad adds 7 - 1, the reduce-scatter
  // beside the wgrad 3 - 1.
  const int bn = computeOps(b, b.backward, true) + computeOps(b, b.backward, false);
  EXPECT_DOUBLE_EQ(taskUs(b, b.backward, 1, 1, 5, 3, 7), bn + 2 * 4 + 2 * (6 + 2));
}

TEST(TpCommOverlap, SimulateReportsTheExposedPart) {
  // Every op 1 us, every TP transfer 5 us: the exposed TP time is each transfer less the compute
  // beside it (exposedStreamTime's rule), the total the sum of all of them.
  const ModelConfig model = tinyModel();
  IterationPlan plan = buildIterationPlan(model, test::cluster(2), overlapped("2M1P1D", 2, 2));
  std::vector<EventCost> costs;
  for (const UniqueEvent& u : plan.events.events()) {
    costs.push_back(EventCost{isCommunication(u.event.kind) ? 5.0 : 1.0});
  }
  double total = 0, hidden = 0;
  for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
    for (const OpInstance& op : *ops) {
      if (op.stream != Stream::kTpComm) continue;
      total += 5;
      hidden += op.overlap_ops;  // each hides the one 1-us op beside it
    }
  }
  ASSERT_GT(hidden, 0);
  const Simulation sim = simulate(std::move(plan), std::move(costs));
  EXPECT_DOUBLE_EQ(sim.summary.mean_device.tp_comm_us, total);  // m = 1
  EXPECT_DOUBLE_EQ(sim.summary.mean_device.exposed_tp_comm_us, total - hidden);
}

TEST(TpCommOverlap, UserbuffersInTheMemoryModel) {
  // 12 buffers of [s b / C, h] = 64 x 64 in fp16: 12 x 64 x 64 x 2 = 98,304 bytes, outside the
  // allocator; the SP gathers' transient (2 x 64 x 64 x 2) moves into them.
  const ModelConfig model = tinyModel();
  Strategy plain = test::strategy("2M1P1D", 2, 2);
  plain.sequence_parallel = true;
  const Strategy over = overlapped("2M1P1D", 2, 2);
  const MemoryEstimate a = estimateMemory(buildIterationPlan(model, test::cluster(2), plain));
  const MemoryEstimate b = estimateMemory(buildIterationPlan(model, test::cluster(2), over));
  EXPECT_EQ(b.stages[0].userbuffer_bytes, 98304);
  EXPECT_EQ(a.stages[0].userbuffer_bytes, 0);
  EXPECT_EQ(b.stages[0].overhead_bytes - a.stages[0].overhead_bytes, 98304);
  EXPECT_EQ(a.stages[0].tp_cp_buffer_bytes - b.stages[0].tp_cp_buffer_bytes, 2 * 64 * 64 * 2);
}

// --overlap-param-gather on the timing engine: one device, v = 1, m = 2 (1F1B), F 10, B 20, the
// chunk's gather in three buckets of 3, 5 and 1 us needed at forward offsets 0, 4 and 8.
TimingInput gatherInput(double slowdown) {
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = 2;
  StageCost c;
  c.forward_us = 10;
  c.backward_us = 20;
  c.grad_allreduce_us = 5;
  c.optimizer_us = 2;
  c.param_gathers = {{0, 3, slowdown}, {4, 5, slowdown}, {8, 1, slowdown}};
  in.stages = {c};
  in.pipelines = {PipelineCost{}};
  return in;
}

TEST(ParamGatherOverlap, HandTracedTimeline) {
  // Buckets back to back on the DP stream from the first forward's start: [0,3] [3,8] [8,9].
  // The forward: t0 = 3 (bucket 0); offset 4 at max(3 + 4, 8) = 8; offset 8 at max(8 + 4, 9) = 12;
  // ends 12 + 2 = 14 (waited 4). Then B0 [14,34], F1 [34,44], B1 [44,64], the gradient sync
  // [64,69], the optimizer [69,71]: no gather after it. With the gather after the step instead:
  // pipeline [0,60], sync [60,65], optimizer [65,67], gather of 3 + 5 + 1 [67,76].
  const IterationTimeline t = computeTimeline(gatherInput(1));
  const StageTimeline& s = t.pipelines[0].stages[0];
  EXPECT_DOUBLE_EQ(s.tasks[0].run.start_us, 0);
  EXPECT_DOUBLE_EQ(s.tasks[0].run.end_us, 14);
  EXPECT_DOUBLE_EQ(s.tasks[1].run.end_us, 34);
  EXPECT_DOUBLE_EQ(s.tasks[2].run.duration(), 10);  // only the chunk's first forward waits
  EXPECT_DOUBLE_EQ(s.param_gather_wait_us, 4);
  ASSERT_EQ(s.param_gathers.size(), 3u);
  EXPECT_DOUBLE_EQ(s.param_gathers[1].start_us, 3);
  EXPECT_DOUBLE_EQ(s.param_gathers[2].end_us, 9);
  EXPECT_DOUBLE_EQ(s.param_allgather.duration(), 0);
  EXPECT_DOUBLE_EQ(t.iteration_us, 71);

  TimingInput exposed = gatherInput(1);
  exposed.stages[0].param_gathers.clear();
  exposed.stages[0].param_allgather_us = 9;
  EXPECT_DOUBLE_EQ(computeTimeline(exposed).iteration_us, 76);
}

TEST(ParamGatherOverlap, ComputeBesideTheBucketsSlows) {
  // Factor 2: from t0 = 3 the 4 us to offset 4 run at half speed while [3,8] and then [8,9] are in
  // flight (2.5 done by 8, 3 by 9), ending at 10; the next 4 us run alone to 14; then 2: 16, of
  // which 2 is slowdown (14 without it) and 4 the wait.
  const IterationTimeline t = computeTimeline(gatherInput(2));
  const StageTimeline& s = t.pipelines[0].stages[0];
  EXPECT_DOUBLE_EQ(s.tasks[0].run.end_us, 16);
  EXPECT_DOUBLE_EQ(s.param_gather_wait_us, 4);
  EXPECT_DOUBLE_EQ(s.overlapSlowdownUs(0), 2);
}

TEST(ParamGatherOverlap, EveryStageWaitsForItsFirstBucket) {
  // P = 2, v = 1, m = 1 (GPipe), F 10, B 20, one bucket of 3 needed at once, sends of 1: stage 0's
  // forward [3,13] (dispatched at 0), its send to 14; stage 1 dispatches at its forward's start:
  // [14,17] gathered, forward [17,27].
  TimingInput in;
  in.schedule = Schedule::kGpipe;
  in.micro_batches = 1;
  StageCost c;
  c.forward_us = 10;
  c.backward_us = 20;
  c.param_gathers = {{0, 3, 1}};
  in.stages = {c, c};
  in.pipelines = {PipelineCost{{1}, {1}, {}}};
  const IterationTimeline t = computeTimeline(in);
  EXPECT_DOUBLE_EQ(t.pipelines[0].stages[0].tasks[0].run.end_us, 13);
  EXPECT_DOUBLE_EQ(t.pipelines[0].stages[1].tasks[0].run.start_us, 14);
  EXPECT_DOUBLE_EQ(t.pipelines[0].stages[1].tasks[0].run.end_us, 27);
  EXPECT_DOUBLE_EQ(t.pipelines[0].stages[1].param_gather_wait_us, 3);
}

TEST(ParamGatherOverlap, PlanGathersTheGradBucketsInForwardOrder) {
  // 1M1P2D, ZeRO-1, DP overlap with tiny buckets (one per layer): one gather per grad bucket, in
  // forward order, the first needed at once, the bytes those of the buckets; none after the step.
  Strategy s = test::strategy("1M1P2D", 1, 2);
  s.zero_stage = 1;
  s.dp_overlap = true;
  s.dp_bucket_bytes = 1;
  s.overlap_param_gather = true;
  const IterationPlan plan = buildIterationPlan(tinyModel(), test::cluster(2), s);
  const StagePlan& st = plan.stages[0];
  ASSERT_EQ(st.param_buckets.size(), st.dp_buckets.size());
  EXPECT_EQ(st.dp_allgather, -1);
  EXPECT_EQ(st.param_buckets.front().needed_before_op, 0);
  int64_t bytes = 0;
  for (size_t i = 0; i < st.param_buckets.size(); ++i) {
    const ParamGatherBucket& p = st.param_buckets[i];
    EXPECT_EQ(p.bytes, st.dp_buckets[st.dp_buckets.size() - 1 - i].bytes);
    if (i > 0) {
      EXPECT_GT(p.needed_before_op, st.param_buckets[i - 1].needed_before_op);
    }
    EXPECT_EQ(plan.events[p.event].event.kind, EventKind::kAllGather);
    bytes += p.bytes;
  }
  EXPECT_EQ(bytes, st.parameters * 2);  // fp16
}

TEST(OverlapFlags, MegatronsRefusalsInOneLine) {
  const ModelConfig model = tinyModel();
  const ClusterConfig cluster = test::cluster(8);
  Strategy s = test::strategy("2M1P1D", 2, 2);
  s.tp_comm_overlap = true;
  EXPECT_TRUE(test::containsText(
      test::inputErrorOf([&] { validateStrategy(model, cluster, s); }),
      "--tp-comm-overlap: Tensor parallel communication/GEMM overlap can happen only when "
      "sequence parallelism is enabled"));
  s.sequence_parallel = true;
  s.micro_batch = 1;  // 32 tokens: M x 4 = 8 chunks divide them
  EXPECT_FALSE(strategyViolation(model, cluster, s));
  Strategy z = test::strategy("1M1P2D", 1, 2);
  z.overlap_param_gather = true;
  z.dp_overlap = true;
  EXPECT_TRUE(test::containsText(test::inputErrorOf([&] { validateStrategy(model, cluster, z); }),
                                 "--overlap-param-gather: only supported with distributed "
                                 "optimizer"));
  z.zero_stage = 1;
  z.dp_overlap = false;
  EXPECT_TRUE(test::containsText(test::inputErrorOf([&] { validateStrategy(model, cluster, z); }),
                                 "Must use --overlap-param-gather with --overlap-grad-reduce"));
  z.dp_overlap = true;
  EXPECT_FALSE(strategyViolation(model, cluster, z));
  // TP across nodes: userbuffers need one NVLink domain.
  Strategy x = overlapped("4M1P1D", 2, 2);
  EXPECT_TRUE(test::containsText(
      test::inputErrorOf([&] { validateStrategy(model, test::cluster(2), x); }),
      "userbuffers need the TP group inside one node"));
}

}  // namespace
}  // namespace evsim

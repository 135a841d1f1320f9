// Recomputation, sequence parallelism and ZeRO in the modeler: Korthikanti's activation formulas
// and the ZeRO model-state bytes by hand, the volume of SP's collectives against the all-reduce's,
// and hand timelines of the ZeRO gradient synchronisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "events/comm_factors.h"
#include "plan/iteration_plan.h"
#include "modeler/cost_model.h"
#include "modeler/device_events.h"
#include "modeler/memory_model.h"
#include "modeler/simulation.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// h = 256, a = 8, f = 4h = 1024, s = 64, V = 1100, 2 blocks, fp16 (e = 2); one node of 8 GPUs.
ModelConfig model() { return test::model(256, 8, 1024, 64, 1100, 2, "fp16"); }
ClusterConfig cluster() { return test::cluster(8, 1, test::kSlowLinks); }

Strategy strategy(int tp, int dp, int64_t global_batch, Recompute rc, bool sp, int zero) {
  Strategy s;
  s.tp = tp;
  s.dp = dp;
  s.micro_batch = 2;
  s.global_batch = global_batch;
  s.recompute = rc;
  s.sequence_parallel = sp;
  s.zero_stage = zero;
  return s;
}

// --- memory
// ---------------------------------------------------------------------------------------

TEST(TechniquesMemory, KorthikantiTable2PerBlock) {
  const ModelConfig m = model();
  const TransformerBlock& block = m.blocks[0];
  // s*b*h = 64 * 2 * 256 = 32768; at t = 2: 5*a*s/(h*t) = 5*8*64/512 = 5, 5*a*s/h = 10.
  const int64_t sbh = 32768;
  // none: sbh (10 + 24/t + 5as/(ht)) = 32768 * 27
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2), sbh * 27);
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2, Recompute::kNone, false), 884736);
  // selective: sbh (10 + 24/t) = 32768 * 22
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2, Recompute::kSelective, false), 720896);
  // SP, no recomputation: sbh/t (34 + 5as/h) = 16384 * 44
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2, Recompute::kNone, true), 720896);
  // SP + selective: sbh * 34/t = 32768 * 17
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2, Recompute::kSelective, true), 557056);
  // full: 2 sbh (the block input); with SP / t.
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2, Recompute::kFull, false), 65536);
  EXPECT_EQ(blockActivationBytes(m, block, 2, 2, Recompute::kFull, true), 32768);
  // t = 1, selective: sbh * 34.
  EXPECT_EQ(blockActivationBytes(m, block, 2, 1, Recompute::kSelective, false), 1114112);
}

TEST(TechniquesMemory, ZeroModelStateBytesPerParameter) {
  // Mixed precision: none 18; ZeRO-1 6 + 12/D; ZeRO-2 2 + (2 + 12)/D (DeepSpeed keeps the
  // gradient partition in the model's 16 bits); ZeRO-3 18/D. D = 4:
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp16, 0, 4), 18);
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kBf16, 1, 4), 9);
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp16, 2, 4), 5.5);
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp16, 3, 4), 4.5);
  // Megatron's distributed optimizer at D = 8: 6 + 1.5.
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kBf16, 1, 8), 7.5);
  // fp32 from 16 = 4 weight + 4 grad + 8 moments: 8 + 8/D, 4 + 12/D, 16/D.
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp32, 1, 4), 10);
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp32, 2, 4), 7);
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp32, 3, 4), 4);
}

TEST(TechniquesMemory, StageEstimateUsesZeroAndSequenceParallel) {
  // 2M1P4D, b = 2, B = 8: one micro-batch per pipeline, one in flight.
  IterationPlan base =
      buildIterationPlan(model(), cluster(), strategy(2, 4, 8, Recompute::kNone, false, 0));
  IterationPlan sp1 =
      buildIterationPlan(model(), cluster(), strategy(2, 4, 8, Recompute::kNone, true, 1));
  MemoryEstimate b = estimateMemory(base);
  MemoryEstimate z = estimateMemory(sp1);
  const int64_t params = base.stages[0].parameters;
  ASSERT_EQ(sp1.stages[0].parameters, params);
  EXPECT_EQ(b.stages[0].model_state_bytes, params * 18);
  EXPECT_EQ(z.stages[0].model_state_bytes, params * 9);  // 6 + 12/4
  ASSERT_EQ(z.stages[0].in_flight, 1);
  // Per micro-batch with SP at t = 2 (sb = 128, sbh = 32768, V' = the padded vocabulary):
  //   blocks 2 * 720896; embedding ids 8 sb, output e sbh/t and mask sbh/t;
  //   head: final layernorm input e sbh/t, LM head input e sbh/t (kept as the shard, re-gathered
  //   for the weight gradient), fp32 logits 4 sb V'/t.
  const int64_t v = sp1.padded_vocab;
  const int64_t expected =
      2 * 720896 + (8 * 128 + 2 * 16384 + 16384) + (2 * 16384 + 2 * 16384 + 4 * 128 * v / 2);
  EXPECT_EQ(z.stages[0].activation_bytes_per_micro_batch, expected);
}

// --- communication volume ---------------------------------------------------------------------

TEST(TechniquesVolume, ReduceScatterPlusAllGatherEqualsOneAllReduce) {
  const ClusterConfig c = cluster();
  const CostModel costs(c, nullptr, /*analytic_fallback=*/true);
  for (int n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    const Placement group{n, 1, n};
    // An SP full buffer s*b*h*e large enough that NCCL's ring runs Simple for all three.
    const int64_t bytes = int64_t{128} * 256 * 2 * 1024;
    Event ar = makeCommunication(EventKind::kAllReduce, bytes, group, DType::kFp16);
    Event rs = makeCommunication(EventKind::kReduceScatter, bytes, group, DType::kFp16);
    Event ag = makeCommunication(EventKind::kAllGather, bytes, group, DType::kFp16);
    // busbw terms: (n-1)/n + (n-1)/n = 2(n-1)/n.
    EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kReduceScatter, n) +
                         busBandwidthFactor(EventKind::kAllGather, n),
                     busBandwidthFactor(EventKind::kAllReduce, n));
    EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllReduce, n), 2.0 * (n - 1) / n);
    // Analytic: (n-1) + (n-1) ring steps and the same bytes on the link; the two collectives pay
    // NCCL's ring base latency (8.4 us, Simple) twice where the all-reduce pays it once.
    EXPECT_NEAR(costs.estimateUs(rs) + costs.estimateUs(ag), costs.estimateUs(ar) + 8.4, 1e-9);
    // Link 100 GB/s = 1e5 B/us, steps 2 us: AR = 8.4 + 2(n-1)*2 + 2(n-1)/n * bytes / 1e5.
    EXPECT_NEAR(costs.estimateUs(ar), 8.4 + 4.0 * (n - 1) + 2.0 * (n - 1) / n * bytes / 1e5, 1e-9);
  }
}

// --- timing -----------------------------------------------------------------------------------

// Every compute event 1 us, every communication 2 us.
std::vector<EventCost> onesAndTwos(const IterationPlan& p) {
  std::vector<EventCost> out;
  for (const UniqueEvent& u : p.events.events()) {
    out.push_back(
        EventCost{u.event.kind == EventKind::kCompute ? 1.0 : 2.0, Provenance::kMeasured});
  }
  return out;
}

TEST(TechniquesTiming, ZeroOneReduceScattersStepsThenGathers) {
  // 1M1P2D, b = 2, B = 8: m = 2 micro-batches; at t = 1 every task op is compute (1 us).
  IterationPlan zero0 =
      buildIterationPlan(model(), cluster(), strategy(1, 2, 8, Recompute::kNone, false, 0));
  IterationPlan zero1 =
      buildIterationPlan(model(), cluster(), strategy(1, 2, 8, Recompute::kNone, false, 1));
  const double F = static_cast<double>(zero1.stages[0].forward.size());
  const double B = static_cast<double>(zero1.stages[0].backward.size());
  Simulation s0 = simulate(zero0, onesAndTwos(zero0));
  Simulation s1 = simulate(zero1, onesAndTwos(zero1));
  // ZeRO 0: m (F + B) + all-reduce 2 + Adam 1; ZeRO 1: + reduce-scatter 2 + Adam 1 + all-gather 2.
  EXPECT_DOUBLE_EQ(s0.summary.iteration_us, 2 * (F + B) + 3);
  EXPECT_DOUBLE_EQ(s1.summary.iteration_us, 2 * (F + B) + 5);
  const StageTimeline& st = s1.timeline.pipelines[0].stages[0];
  ASSERT_EQ(st.grad_sync.size(), 1u);
  EXPECT_DOUBLE_EQ(st.grad_sync[0].start_us, 2 * (F + B));
  EXPECT_DOUBLE_EQ(st.optimizer.start_us, 2 * (F + B) + 2);
  EXPECT_DOUBLE_EQ(st.param_allgather.start_us, 2 * (F + B) + 3);
  EXPECT_DOUBLE_EQ(st.param_allgather.duration(), 2);
  EXPECT_DOUBLE_EQ(s1.summary.max_device.dp_comm_us, 4);
  EXPECT_DOUBLE_EQ(s1.summary.max_device.exposed_dp_comm_us, 4);
  // The trace shows reduce-scatter, Adam and all-gather in that order on their streams.
  std::vector<std::string> sync;
  forEachDeviceEvent(s1, 0, [&](const DeviceEvent& e) {
    if (e.phase == Phase::kGradSync || e.phase == Phase::kOptimizer) sync.emplace_back(e.name);
  });
  EXPECT_EQ(sync,
            (std::vector<std::string>{"grad_reduce_scatter", "adam_step", "param_allgather"}));
}

TEST(TechniquesTiming, ZeroThreeCommunicatesInsideTheTasks) {
  IterationPlan p =
      buildIterationPlan(model(), cluster(), strategy(1, 2, 8, Recompute::kNone, false, 3));
  IterationPlan base =
      buildIterationPlan(model(), cluster(), strategy(1, 2, 8, Recompute::kNone, false, 0));
  const double F = static_cast<double>(base.stages[0].forward.size());
  const double B = static_cast<double>(base.stages[0].backward.size());
  // 4 parts (embedding, 2 blocks, head): forward + 4 gathers, backward + 4 gathers + 4 scatters,
  // 2 us each; no gradient sync after the pipeline; Adam 1 us. Prefetched
  // (plan/sharded_prefetch.h): each transfer runs beside the part before or after it, which
  // outlasts it (a forward part has >= 2 ops of 1 us; a backward part >= 2, a block's >= 4, beside
  // which a scatter and a gather run one after the other), so only the forward's first gather and
  // the backward's first gather and last scatter hold the device: forward F + 2, backward B + 4.
  auto ops_of = [](const OpList& ops, int layer) {
    return std::count_if(ops.begin(), ops.end(),
                         [&](const OpInstance& op) { return op.layer == layer; });
  };
  const StagePlan& b0 = base.stages[0];
  for (int layer : {kEmbeddingLayer, 0, 1, kHeadLayer}) {
    ASSERT_GE(ops_of(b0.forward, layer), 2) << layer;
    ASSERT_GE(ops_of(b0.backward, layer), layer >= 0 ? 4 : 2) << layer;
  }
  Simulation sim = simulate(p, onesAndTwos(p));
  EXPECT_DOUBLE_EQ(sim.summary.iteration_us, 2 * ((F + 2) + (B + 4)) + 1);
  EXPECT_TRUE(sim.timeline.pipelines[0].stages[0].grad_sync.empty());
  EXPECT_DOUBLE_EQ(sim.summary.max_device.dp_comm_us, 2 * 24);
  EXPECT_DOUBLE_EQ(sim.summary.max_device.exposed_dp_comm_us, 2 * 6);
  EXPECT_DOUBLE_EQ(sim.summary.max_device.compute_us, 2 * (F + B) + 1);
}

TEST(TechniquesTiming, ZeroThreeTransfersThatOutlastTheirLayerTogetherAreExposed) {
  // As above with 3 us transfers: a block's backward (>= 4 ops of 1 us) runs beside the previous
  // part's scatter and the next part's gather, one after the other on the DP stream: 6 us beside
  // >= 4, although each alone is shorter than the block. At P = 1 nothing else can keep the device
  // waiting, so every microsecond of the iteration is compute or exposed DP communication: what the
  // pair outlasts its layer by counts as exposed, not as idle.
  IterationPlan p =
      buildIterationPlan(model(), cluster(), strategy(1, 2, 8, Recompute::kNone, false, 3));
  std::vector<EventCost> costs;
  for (const UniqueEvent& u : p.events.events()) {
    costs.push_back(
        EventCost{u.event.kind == EventKind::kCompute ? 1.0 : 3.0, Provenance::kMeasured});
  }
  Simulation sim = simulate(p, costs);
  const DeviceMetrics& d = sim.summary.max_device;
  EXPECT_DOUBLE_EQ(d.idle_us, 0);
  EXPECT_DOUBLE_EQ(sim.summary.iteration_us, d.compute_us + d.exposed_dp_comm_us);
  // The exposed part of the transfers beside layers is more than each transfer's own excess.
  EXPECT_GT(d.exposed_dp_comm_us, 2 * (3 + 3 + 3));  // first gathers and last scatter alone
}

TEST(TechniquesTiming, RecomputedOpsShowAsRecomputePhase) {
  IterationPlan p =
      buildIterationPlan(model(), cluster(), strategy(2, 1, 4, Recompute::kFull, false, 0));
  IterationPlan base =
      buildIterationPlan(model(), cluster(), strategy(2, 1, 4, Recompute::kNone, false, 0));
  int block_forward_ops = 0;
  for (const OpInstance& op : base.stages[0].forward) block_forward_ops += op.layer >= 0;
  Simulation sim = simulate(p, onesAndTwos(p));
  int recomputed = 0, backward = 0;
  forEachDeviceEvent(sim, 0, [&](const DeviceEvent& e) {
    recomputed += e.phase == Phase::kRecompute;
    backward += e.phase == Phase::kBackward;
  });
  // m = 2 micro-batches, each re-running every block's forward ops once.
  EXPECT_EQ(recomputed, 2 * block_forward_ops);
  EXPECT_EQ(backward, 2 * static_cast<int>(base.stages[0].backward.size()));
  EXPECT_EQ(phaseName(Phase::kRecompute), "recompute");
  // Model FLOPs (and MFU) exclude the recomputed work: same as without recomputation.
  Simulation plain = simulate(base, onesAndTwos(base));
  EXPECT_NEAR(sim.summary.model_flops, plain.summary.model_flops, 1e-6 * plain.summary.model_flops);
  EXPECT_GT(sim.summary.iteration_us, plain.summary.iteration_us);
}

}  // namespace
}  // namespace evsim

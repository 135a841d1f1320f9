// simulate() on real iteration plans (buildIterationPlan of a tiny GPT) with costs chosen per event
// so that every task's length is a count of ops: iteration time, bubbles, throughput, MFU,
// provenance shares, the data-parallel all-reduce, and DP replicas sharing one timeline.
//
// Op counts used below (ops/layer_ops.h, tensor parallel 1 so no TP all-reduce ops):
//   block forward  15 ops: layernorm qkv_gemm attn_scores scale_mask_softmax attn_dropout
//                  attn_values attn_proj_gemm dropout residual_add | mlp_layernorm fc1_gemm gelu
//                  fc2_gemm mlp_dropout mlp_residual_add
//   block backward 21 ops: mlp 8 (mlp_dropout_bwd fc2_dgrad fc2_wgrad gelu_bwd fc1_dgrad fc1_wgrad
//                  mlp_layernorm_bwd mlp_residual_grad_add) + attention 13 (dropout_bwd
//                  proj_dgrad proj_wgrad values_dgrad_p values_dgrad_v attn_dropout_bwd softmax_bwd
//                  scores_dgrad_q scores_dgrad_k qkv_dgrad qkv_wgrad layernorm_bwd
//                  residual_grad_add)
//   embedding forward 3 (word_embedding position_add embedding_dropout), backward 2
//   head forward 3 (final_layernorm lm_head_gemm cross_entropy), backward 4 (cross_entropy_bwd
//                  lm_head_dgrad lm_head_wgrad final_layernorm_bwd)
//   optimizer 1 (adam_step) per stage.
#include "modeler/simulation.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/device_events.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

Strategy strategy(int tp, int pp, int dp, int64_t global_batch,
                  Schedule schedule = Schedule::kGpipe) {
  return Strategy::of(tp, pp, dp, 1, global_batch, schedule);
}

// h = 64, a = 4, f = 256, s = 32, vocab 512 (already a multiple of 128): with b = 1 the shapes keep
// embedding/head events apart from the block-only ones (T*h = 2048 elements vs the attention
// dropout's b*a*s*s = 4096; lm_head GEMMs have 512 where block GEMMs have 64/192/256). One node
// of 8 GPUs with a 100 TFLOP/s fp16 peak.
IterationPlan plan(const Strategy& s) {
  return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                            test::cluster(8, 1, test::kSlowLinks), s);
}

std::vector<EventCost> costs(const IterationPlan& p,
                             const std::function<EventCost(int index, const UniqueEvent&)>& f) {
  std::vector<EventCost> out;
  for (int e = 0; e < p.events.size(); ++e) out.push_back(f(e, p.events[e]));
  return out;
}

// Every compute event 1 us, every communication `comm` us (measured).
std::vector<EventCost> computeOnes(const IterationPlan& p, double comm = 0) {
  return costs(p, [&](int, const UniqueEvent& u) {
    return EventCost{u.event.kind == EventKind::kCompute ? 1.0 : comm, Provenance::kMeasured};
  });
}

// 1 us for events that only transformer-block ops use, 0 for the rest (events the embedding, head
// or optimizer also use, and communication): every block then costs the same and the first and
// last stages carry nothing extra.
std::vector<EventCost> blockOnlyOnes(const IterationPlan& p) {
  std::set<int> in_block, outside;
  for (const StagePlan& s : p.stages) {
    for (const OpList* ops : {&s.forward, &s.backward, &s.optimizer}) {
      for (const OpInstance& op : *ops) (op.layer >= 0 ? in_block : outside).insert(op.event);
    }
  }
  return costs(p, [&](int e, const UniqueEvent&) {
    return EventCost{in_block.count(e) && !outside.count(e) ? 1.0 : 0.0, Provenance::kMeasured};
  });
}

double opListCost(const OpList& ops, const std::vector<EventCost>& c) {
  double t = 0;
  for (const OpInstance& op : ops) t += c[op.event].time_us;
  return t;
}

// --- balanced pipeline: closed forms
// ----------------------------------------------------------------

// 4 blocks on P = 4 stages: one block per stage (each stage needs at least one). With block-only
// events at 1 us: the 15 forward ops of a block minus the 6 that share an event with the embedding
// or head (layernorm, mlp_layernorm: layernorm_fwd(T, h) = final_layernorm; dropout, mlp_dropout:
// dropout_fwd(T*h) = embedding_dropout; residual_add, mlp_residual_add: add(T*h) = position_add)
// leave f = 9; the 21 backward ops minus 6 shared (mlp_dropout_bwd, dropout_bwd, mlp_layernorm_bwd,
// layernorm_bwd, mlp_residual_grad_add, residual_grad_add) leave b = 15. Embedding, head, adam and
// sends cost 0. With m = 4: iteration (m + P - 1)(f + b) = 7 * 24 = 168 us for both schedules,
// bubble (P - 1)/(m + P - 1) = 3/7, each device busy m (f + b) = 96 us.
TEST(SimulationTest, BalancedPipelineClosedForm) {
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple}) {
    SCOPED_TRACE(scheduleName(schedule));
    IterationPlan p = plan(strategy(1, 4, 1, 4, schedule));
    ASSERT_EQ(p.micro_batches, 4);
    std::vector<EventCost> c = blockOnlyOnes(p);
    for (const StagePlan& s : p.stages) {
      ASSERT_EQ(s.num_layers, 1);
      EXPECT_DOUBLE_EQ(opListCost(s.forward, c), 9);
      EXPECT_DOUBLE_EQ(opListCost(s.backward, c), 15);
    }
    Simulation sim = simulate(std::move(p), std::move(c));
    const SimulationSummary& sum = sim.summary;
    EXPECT_DOUBLE_EQ(sum.iteration_us, 168);
    EXPECT_DOUBLE_EQ(sum.bubble_fraction, 3.0 / 7);
    ASSERT_EQ(sum.stages.size(), 4u);
    for (const StageSummary& st : sum.stages) {
      EXPECT_DOUBLE_EQ(st.device.compute_us, 96);
      EXPECT_DOUBLE_EQ(st.device.idle_us, 168 - 96);
      EXPECT_DOUBLE_EQ(st.device.utilization, 96.0 / 168);
      EXPECT_DOUBLE_EQ(st.device.bubble_fraction, 3.0 / 7);
      EXPECT_DOUBLE_EQ(st.device.pp_comm_us, 0);
      EXPECT_DOUBLE_EQ(st.device.dp_comm_us, 0);
    }
    EXPECT_DOUBLE_EQ(sum.min_device.bubble_fraction, 3.0 / 7);
    EXPECT_DOUBLE_EQ(sum.max_device.bubble_fraction, 3.0 / 7);
    // Throughput: B = 4 samples per 168 us; 32 tokens per sample.
    EXPECT_DOUBLE_EQ(sum.samples_per_s, 4 / 168e-6);
    EXPECT_DOUBLE_EQ(sum.tokens_per_s, 4 * 32 / 168e-6);
  }
}

// --- one stage: every op counted
// ----------------------------------------------------------------------

// P = 1, m = 2, all compute 1 us: forward 3 + 4*15 + 3 = 66 ops, backward 4 + 4*21 + 2 = 90 ops,
// adam 1: iteration 2 * (66 + 90) + 1 = 313 us. compute_us counts all of it; no idle, no bubble.
TEST(SimulationTest, SingleStageCountsEveryOp) {
  IterationPlan p = plan(strategy(1, 1, 1, 2));
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].forward.size(), 66u);
  EXPECT_EQ(p.stages[0].backward.size(), 90u);
  std::vector<EventCost> c = computeOnes(p);
  Simulation sim = simulate(std::move(p), std::move(c));
  EXPECT_DOUBLE_EQ(sim.summary.iteration_us, 313);
  EXPECT_DOUBLE_EQ(sim.summary.mean_device.compute_us, 313);
  EXPECT_DOUBLE_EQ(sim.summary.mean_device.idle_us, 0);
  EXPECT_DOUBLE_EQ(sim.summary.mean_device.utilization, 1);
  EXPECT_DOUBLE_EQ(sim.summary.bubble_fraction, 0);
  // Throughput B / iteration: 2 samples per 313 us.
  EXPECT_DOUBLE_EQ(sim.summary.samples_per_s, 2 / 313e-6);
  // Op offsets within a task: op i starts at i us.
  ASSERT_EQ(sim.offsets.size(), 1u);
  EXPECT_DOUBLE_EQ(sim.offsets[0].forward_start_us[0], 0);
  EXPECT_DOUBLE_EQ(sim.offsets[0].forward_start_us[65], 65);
  EXPECT_DOUBLE_EQ(sim.offsets[0].backward_start_us[89], 89);
}

// MFU = model FLOPs / (iteration * N * peak). model FLOPs = sum over the GEMM events (this model
// has no fused attention) of flops x count (the plan's counts): norms, softmax and Adam count
// per-element operations that are not model FLOPs; peak 100 TFLOP/s fp16 = 1e14 FLOP/s. Two DP
// replicas with the same m do exactly twice the work of one.
TEST(SimulationTest, ModelFlopsAndMfu) {
  IterationPlan p1 = plan(strategy(1, 2, 1, 4));
  IterationPlan p2 = plan(strategy(1, 2, 2, 8));
  double flops1 = 0;
  for (const UniqueEvent& u : p1.events.events()) {
    if (isGemmOp(u.event.op)) flops1 += u.event.flops * u.count;
  }
  ASSERT_GT(flops1, 0);
  Simulation s1 = simulate(p1, computeOnes(p1));
  Simulation s2 = simulate(p2, computeOnes(p2));
  EXPECT_DOUBLE_EQ(s1.summary.model_flops, flops1);
  EXPECT_DOUBLE_EQ(s2.summary.model_flops, 2 * flops1);
  const double seconds1 = s1.summary.iteration_us * 1e-6;
  EXPECT_DOUBLE_EQ(s1.summary.flops_per_gpu_per_s, flops1 / seconds1 / 2);  // N = 2
  EXPECT_DOUBLE_EQ(s1.summary.mfu, flops1 / (seconds1 * 2 * 1e14));
  const double seconds2 = s2.summary.iteration_us * 1e-6;
  EXPECT_DOUBLE_EQ(s2.summary.mfu, 2 * flops1 / (seconds2 * 4 * 1e14));  // N = 4
  EXPECT_DOUBLE_EQ(s1.summary.samples_per_s, 4 / seconds1);
  EXPECT_DOUBLE_EQ(s2.summary.samples_per_s, 8 / seconds2);
}

// Provenance shares weigh each event by time x count. Give event k the time w_k / count_k, so it
// contributes w_k us in all: w = 2 (estimated), 1 (derived), 1 (measured) for the first three
// events, 0 for the rest -> shares 2/4, 1/4, 1/4.
TEST(SimulationTest, ProvenanceSharesWeighTimeByCount) {
  IterationPlan p = plan(strategy(1, 2, 1, 4));
  ASSERT_GE(p.events.size(), 3);
  std::vector<EventCost> c = costs(p, [](int e, const UniqueEvent& u) {
    EXPECT_GT(u.count, 0);
    const double n = static_cast<double>(u.count);
    if (e == 0) return EventCost{2 / n, Provenance::kEstimated};
    if (e == 1) return EventCost{1 / n, Provenance::kDerived};
    if (e == 2) return EventCost{1 / n, Provenance::kMeasured};
    return EventCost{0, Provenance::kMeasured};
  });
  Simulation sim = simulate(std::move(p), std::move(c));
  const auto& share = sim.summary.provenance_share;
  EXPECT_NEAR(share[static_cast<int>(Provenance::kEstimated)], 0.5, 1e-12);
  EXPECT_NEAR(share[static_cast<int>(Provenance::kDerived)], 0.25, 1e-12);
  EXPECT_NEAR(share[static_cast<int>(Provenance::kMeasured)], 0.25, 1e-12);
}

// --- data parallelism
// -------------------------------------------------------------------------------

// 1M2P1D (B = 4) vs 1M2P2D (B = 8): both m = 4, same op lists. Compute 1 us, sends 0, and every
// gradient all-reduce 7 us. Each stage's all-reduce starts when the stage's pipeline ends and the
// optimizer follows it, so every optimizer moves by exactly 7 and so does the iteration.
TEST(SimulationTest, DataParallelAddsExactlyTheAllReduce) {
  IterationPlan p1 = plan(strategy(1, 2, 1, 4));
  IterationPlan p2 = plan(strategy(1, 2, 2, 8));
  ASSERT_EQ(p1.micro_batches, 4);
  ASSERT_EQ(p2.micro_batches, 4);
  std::set<int> allreduces;
  for (const StagePlan& s : p2.stages) {
    ASSERT_GE(s.dp_allreduce, 0);
    allreduces.insert(s.dp_allreduce);
  }
  for (const StagePlan& s : p1.stages) EXPECT_EQ(s.dp_allreduce, -1);
  std::vector<EventCost> c2 = costs(p2, [&](int e, const UniqueEvent& u) {
    if (allreduces.count(e)) return EventCost{7, Provenance::kMeasured};
    return EventCost{u.event.kind == EventKind::kCompute ? 1.0 : 0.0, Provenance::kMeasured};
  });
  Simulation s1 = simulate(p1, computeOnes(p1));
  Simulation s2 = simulate(p2, std::move(c2));

  EXPECT_DOUBLE_EQ(s2.summary.iteration_us - s1.summary.iteration_us, 7);
  ASSERT_EQ(s2.timeline.pipelines.size(), 1u);  // one node: every replica's transfers look alike
  for (size_t s = 0; s < 2; ++s) {
    const StageTimeline& a = s1.timeline.pipelines[0].stages[s];
    const StageTimeline& b = s2.timeline.pipelines[0].stages[s];
    EXPECT_DOUBLE_EQ(a.pipeline_end_us, b.pipeline_end_us);
    ASSERT_EQ(b.grad_sync.size(), 1u);
    EXPECT_DOUBLE_EQ(b.grad_sync[0].start_us, b.pipeline_end_us);
    EXPECT_DOUBLE_EQ(b.grad_sync[0].duration(), 7);
    EXPECT_DOUBLE_EQ(b.optimizer.start_us, a.optimizer.start_us + 7);
    EXPECT_DOUBLE_EQ(b.optimizer.duration(), 1);  // adam_step
    // Without overlap the whole all-reduce is exposed.
    DeviceMetrics d = deviceMetrics(s2, 0, static_cast<int>(s));
    EXPECT_DOUBLE_EQ(d.dp_comm_us, 7);
    EXPECT_DOUBLE_EQ(d.exposed_dp_comm_us, 7);
  }
  EXPECT_DOUBLE_EQ(s2.summary.mean_device.dp_comm_us, 7);
  EXPECT_DOUBLE_EQ(s1.summary.mean_device.dp_comm_us, 0);
}

// DP replicas of one pipeline class expand to identical event streams (rank = tp + M (dp + D pp)).
TEST(SimulationTest, DataParallelReplicasShareTheirTimeline) {
  IterationPlan p = plan(strategy(1, 2, 2, 8));
  ASSERT_EQ(p.pipelines.size(), 1u);
  EXPECT_EQ(p.pipelines[0].replicas, (std::vector<int>{0, 1}));
  Simulation sim = simulate(p, computeOnes(p, 0.5));
  const RankLayout layout = sim.plan.layout();
  for (int pp = 0; pp < 2; ++pp) {
    std::vector<DeviceEvent> a, b;
    forEachDeviceEvent(sim, layout.rank(0, 0, pp), [&](const DeviceEvent& e) { a.push_back(e); });
    forEachDeviceEvent(sim, layout.rank(0, 1, pp), [&](const DeviceEvent& e) { b.push_back(e); });
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].event, b[i].event);
      EXPECT_EQ(a[i].stream, b[i].stream);
      EXPECT_EQ(a[i].micro_batch, b[i].micro_batch);
      EXPECT_DOUBLE_EQ(a[i].start_us, b[i].start_us);
      EXPECT_DOUBLE_EQ(a[i].duration_us, b[i].duration_us);
    }
  }
}

// With --dp-overlap and a 1-byte bucket cap every layer closes a bucket, and a bucket is ready when
// the backward op that completes it ends: with 1 us per op that is (op index + 1) us after the
// start of the last backward.
TEST(SimulationTest, BucketReadyOffsetsAreOpEnds) {
  Strategy s = strategy(1, 2, 2, 8);
  s.dp_overlap = true;
  s.dp_bucket_bytes = 1;
  IterationPlan p = plan(s);
  Simulation sim = simulate(p, computeOnes(p));
  for (size_t st = 0; st < sim.plan.stages.size(); ++st) {
    const StagePlan& stage = sim.plan.stages[st];
    ASSERT_FALSE(stage.dp_buckets.empty());
    ASSERT_EQ(sim.input.stages[st].buckets.size(), stage.dp_buckets.size());
    for (size_t i = 0; i < stage.dp_buckets.size(); ++i) {
      EXPECT_DOUBLE_EQ(sim.input.stages[st].buckets[i].ready_offset_us,
                       stage.dp_buckets[i].ready_after_op + 1.0);
    }
    // The last bucket closes with the last backward op.
    EXPECT_EQ(stage.dp_buckets.back().ready_after_op, static_cast<int>(stage.backward.size()) - 1);
  }
}

}  // namespace
}  // namespace evsim

// Plan reuse (plan/plan_core.h): candidates that differ only in ZeRO stage 0/1/2, DP overlap or
// the non-interleaved schedule share one plan core through the PlanCache. A plan finished from a
// reused core must be the plan built alone: the same events in the same order with the same
// counts, the same op lists, gradient syncs and pipeline classes, the same simulated iteration
// time. The reuse itself is counted (cores built by hand below), and the finished parts are
// checked against numbers worked out by hand on tiny-moe with expert and context parallelism.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "plan/core_bin.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "plan/plan_core.h"
#include "modeler/cost_model.h"
#include "modeler/simulation.h"
#include "modeler/simulation_in_place.h"
#include "support/test_support.h"

namespace evsim {
namespace {

void expectSameOps(const OpList& a, const OpList& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(what + " op " + std::to_string(i));
    EXPECT_EQ(a[i].event, b[i].event);
    EXPECT_EQ(a[i].stream, b[i].stream);
    EXPECT_EQ(a[i].layer, b[i].layer);
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].recompute, b[i].recompute);
    EXPECT_EQ(a[i].weight_grad, b[i].weight_grad);
    EXPECT_EQ(a[i].weights, b[i].weights);
    EXPECT_EQ(a[i].saved_bytes, b[i].saved_bytes);
    EXPECT_EQ(a[i].overlap_ops, b[i].overlap_ops);
    EXPECT_EQ(a[i].expert, b[i].expert);
  }
}

// Everything a plan holds, field by field.
void expectSamePlan(const IterationPlan& a, const IterationPlan& b) {
  ASSERT_EQ(a.events.size(), b.events.size());
  for (int e = 0; e < a.events.size(); ++e) {
    EXPECT_EQ(a.events[e].signature, b.events[e].signature) << "event " << e;
    EXPECT_EQ(a.events[e].count, b.events[e].count) << a.events[e].signature;
  }
  EXPECT_EQ(a.op_executions, b.op_executions);
  EXPECT_EQ(a.micro_batches, b.micro_batches);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t k = 0; k < a.stages.size(); ++k) {
    const StagePlan &x = a.stages[k], &y = b.stages[k];
    const std::string chunk = "chunk " + std::to_string(k);
    SCOPED_TRACE(chunk);
    EXPECT_EQ(x.first_layer, y.first_layer);
    EXPECT_EQ(x.num_layers, y.num_layers);
    EXPECT_EQ(x.parameters, y.parameters);
    EXPECT_EQ(x.expert_parameters, y.expert_parameters);
    EXPECT_EQ(x.activation_bytes_out, y.activation_bytes_out);
    expectSameOps(x.forward, y.forward, chunk + " forward");
    expectSameOps(x.backward, y.backward, chunk + " backward");
    expectSameOps(x.optimizer, y.optimizer, chunk + " optimizer");
    EXPECT_EQ(x.dp_allreduce, y.dp_allreduce);
    EXPECT_EQ(x.dp_reduce_scatter, y.dp_reduce_scatter);
    EXPECT_EQ(x.dp_allgather, y.dp_allgather);
    EXPECT_EQ(x.expert_grad_sync, y.expert_grad_sync);
    EXPECT_EQ(x.expert_allgather, y.expert_allgather);
    ASSERT_EQ(x.dp_buckets.size(), y.dp_buckets.size());
    for (size_t i = 0; i < x.dp_buckets.size(); ++i) {
      EXPECT_EQ(x.dp_buckets[i].event, y.dp_buckets[i].event);
      EXPECT_EQ(x.dp_buckets[i].ready_after_op, y.dp_buckets[i].ready_after_op);
      EXPECT_EQ(x.dp_buckets[i].bytes, y.dp_buckets[i].bytes);
      EXPECT_EQ(x.dp_buckets[i].expert, y.dp_buckets[i].expert);
    }
  }
  ASSERT_EQ(a.pipelines.size(), b.pipelines.size());
  for (size_t c = 0; c < a.pipelines.size(); ++c) {
    EXPECT_EQ(a.pipelines[c].replicas, b.pipelines[c].replicas);
    EXPECT_EQ(a.pipelines[c].forward_p2p, b.pipelines[c].forward_p2p);
    EXPECT_EQ(a.pipelines[c].backward_p2p, b.pipelines[c].backward_p2p);
  }
}

int64_t countOf(const IterationPlan& plan, int event) { return plan.events[event].count; }

// Events are numbered in order of first use, walking chunk by chunk: its forward and backward op
// lists (their activation offload copies last: they are added to the finished lists), its
// optimizer step, its dense gradient sync (buckets or one collective) and parameter
// all-gather, its experts' sync and all-gather; then each pipeline class's transfers in boundary
// order. (The order a single pass over the chunks interns them in; profiles and event files list
// events in it.)
void expectFirstUseOrder(const IterationPlan& plan) {
  std::vector<bool> seen(static_cast<size_t>(plan.events.size()), false);
  int next = 0;
  auto use = [&](int e) {
    if (e < 0 || seen[e]) return;
    EXPECT_EQ(e, next) << plan.events[e].signature;
    seen[e] = true;
    ++next;
  };
  for (const StagePlan& s : plan.stages) {
    for (bool copies : {false, true}) {
      for (const OpList* ops : {&s.forward, &s.backward}) {
        for (const OpInstance& op : *ops) {
          if ((op.stream == Stream::kHost) == copies) use(op.event);
        }
      }
    }
    for (const OpInstance& op : s.optimizer) use(op.event);
    for (const GradBucket& b : s.dp_buckets) {
      if (!b.expert) use(b.event);
    }
    use(s.dp_allreduce);
    use(s.dp_reduce_scatter);
    use(s.dp_allgather);
    for (const GradBucket& b : s.dp_buckets) {
      if (b.expert) use(b.event);
    }
    use(s.expert_grad_sync);
    use(s.expert_allgather);
  }
  for (const PipelineClass& pipeline : plan.pipelines) {
    for (int e : pipeline.forward_p2p) use(e);
  }
  EXPECT_EQ(next, plan.events.size());
}

struct Variant {
  Schedule schedule;
  int zero;
  bool overlap;
  Offload offload = Offload::kNone;
};

std::string describe(const Variant& v) {
  return std::string(scheduleName(v.schedule)) + " zero" + std::to_string(v.zero) +
         (v.overlap ? " overlap" : "") + " offload=" + std::string(offloadName(v.offload));
}

// tiny-moe (fp32, h 64, 4 blocks of 8 SwiGLU experts, top-2) on 8 GPUs of one node: M 1, C 2,
// P 2, D 2, E 2 (ZeRO-3 too: experts sharded over D/E); b 1, B 8 (m = 4). Two blocks per
// pipeline stage (one per chunk interleaved).
class PlanReuse : public ::testing::Test {
 protected:
  PlanReuse() : model_(loadModelConfig(test::configPath("models", "tiny-moe"))) {}

  Strategy strategyOf(const Variant& v) const {
    Strategy s = test::strategy("1M2P2D", 1, 8);
    s.cp = 2;
    s.ep = 2;
    s.schedule = v.schedule;
    s.zero_stage = v.zero;
    s.dp_overlap = v.overlap;
    s.offload = v.offload;
    if (v.schedule == Schedule::kInterleaved) {
      s.virtual_stages = 2;
      s.stage_layers = {1, 1, 1, 1};
    } else {
      s.stage_layers = {2, 2};
    }
    return s;
  }

  double iterationUs(IterationPlan plan) const {
    std::vector<EventCost> costs = costs_.costAll(plan.events);
    return simulate(std::move(plan), std::move(costs)).summary.iteration_us;
  }

  // One node of 8 GPUs with a host side, for the offload variants.
  static ClusterConfig withHost() {
    std::string yaml = test::clusterYaml(8);
    yaml.insert(yaml.find("network:"),
                "  host_link: {name: PCIe, bandwidth_gb_s: 25, latency_us: 10}\n"
                "  host_memory: {gib: 512, bandwidth_gb_s: 200}\n");
    return parseClusterConfig(yaml, "test-cluster-with-host");
  }

  ModelConfig model_;
  ClusterConfig cluster_ = withHost();
  CostModel costs_{cluster_, nullptr, /*analytic_fallback=*/true};
};

TEST_F(PlanReuse, EveryVariantEqualsThePlanBuiltAlone) {
  std::vector<Variant> variants;
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple, Schedule::kZbh1, Schedule::kZbh2,
                            Schedule::kInterleaved}) {
    for (int zero = 0; zero <= 3; ++zero) {
      for (bool overlap : {false, true}) {
        for (Offload offload :
             {Offload::kNone, Offload::kOptimizer, Offload::kActivations, Offload::kBoth}) {
          // ZeRO-3 reduce-scatters inside the backward: no buckets to overlap. A split backward
          // with activation offload is not modelled.
          const bool split = schedule == Schedule::kZbh1 || schedule == Schedule::kZbh2;
          if (zero == 3 && overlap) continue;
          if (split && offloadsActivations(offload)) continue;
          variants.push_back(Variant{schedule, zero, overlap, offload});
        }
      }
    }
  }
  PlanCache cache;
  for (const Variant& v : variants) {
    SCOPED_TRACE(describe(v));
    const Strategy s = strategyOf(v);
    IterationPlan reused = buildIterationPlan(model_, cluster_, s, &cache);
    IterationPlan alone = buildIterationPlan(model_, cluster_, s);
    expectSamePlan(reused, alone);
    expectFirstUseOrder(reused);
    const double reused_us = iterationUs(std::move(reused));
    EXPECT_EQ(reused_us, iterationUs(std::move(alone)));
    EXPECT_GT(reused_us, 0);
  }
  // 7 (ZeRO, overlap) x 4 offloads for gpipe, dapple and interleaved, x 2 (no activation
  // offload) for zbh1 and zbh2: 112 plans. Sixteen cores: {gpipe, dapple, zbh1, zbh2} x {ZeRO 0-1
  // with E 2, ZeRO 2 without overlap, ZeRO 2 with overlap (its bucket reductions are in the op
  // lists, plan/zero2_buckets.h), ZeRO 3 with E 1} x {activations kept, offloaded} and
  // interleaved x the same eight (optimizer offload only changes the finished part); the other 96
  // plans reused one.
  ASSERT_EQ(variants.size(), 112u);
  EXPECT_EQ(cache.coreMisses(), 16);
  EXPECT_EQ(cache.coreHits(), 96);
}

// rebuildIterationPlan (plan_core.h) into one plan, variant after variant (chunks 4 -> 2 -> 4,
// ZeRO, overlap and offload changing what each stage's buckets and optimizer hold): each time the
// plan built alone, and simulateWithinInPlace on the one kept Simulation its iteration time.
TEST_F(PlanReuse, ARebuiltPlanEqualsThePlanBuiltAlone) {
  PlanCache cache;
  Simulation sim;
  sim.plan.model = model_;
  sim.plan.cluster = cluster_;
  int rebuilt = 0;
  for (Offload offload : {Offload::kNone, Offload::kBoth}) {
    for (int zero = 0; zero <= 3; ++zero) {
      for (Schedule schedule : {Schedule::kInterleaved, Schedule::kDapple, Schedule::kZbh1}) {
        for (bool overlap : {true, false}) {
          if (zero == 3 && overlap) continue;
          if (schedule == Schedule::kZbh1 && offloadsActivations(offload)) continue;
          const Variant v{schedule, zero, overlap, offload};
          SCOPED_TRACE(describe(v));
          const Strategy s = strategyOf(v);
          rebuildIterationPlan(s, cache, sim.plan);
          const IterationPlan alone = buildIterationPlan(model_, cluster_, s);
          expectSamePlan(sim.plan, alone);
          for (size_t k = 0; k < alone.stages.size(); ++k) {
            EXPECT_EQ(sim.plan.stages[k].param_buckets.size(),
                      alone.stages[k].param_buckets.size());
            EXPECT_EQ(sim.plan.stages[k].micro_batch_buckets.size(),
                      alone.stages[k].micro_batch_buckets.size());
          }
          sim.costs = costs_.costAll(sim.plan.events);
          double unshared_us = 0;
          ASSERT_TRUE(
              simulateWithinInPlace(sim, std::numeric_limits<double>::infinity(), unshared_us));
          EXPECT_EQ(sim.summary.iteration_us, iterationUs(alone));
          ++rebuilt;
        }
      }
    }
  }
  // (3 schedules x 2 overlaps) x 3 ZeRO stages + 3 ZeRO-3, then the same without zbh1.
  EXPECT_EQ(rebuilt, 21 + 14);
}

// A kept Simulation gives a hand-traced timeline after timing a plan of more chunks in it. Eight
// blocks on DAPPLE P = 4 (two a stage), m = 8, D = 1 (no gradient sync): every event costs nothing
// but the blocks' softmax forward, 3 us, and backward, 5 us (once per block and pass, no
// recomputation), so every stage has F = 2 x 3 = 6 us and B = 2 x 5 = 10 us and no transfer takes
// time: the iteration is (m + P - 1)(F + B) = 11 x 16 = 176 us.
TEST(PlanRebuild, AKeptSimulationTimesADapplePipelineByHand) {
  const ModelConfig model = test::model(256, 4, 1024, 128, 1000, 8, "bf16");
  const ClusterConfig cluster = test::cluster(8);
  const CostModel costs{cluster, nullptr, /*analytic_fallback=*/true};
  auto hand_costs = [](const IterationPlan& plan) {
    std::vector<EventCost> c(static_cast<size_t>(plan.events.size()));
    for (int e = 0; e < plan.events.size(); ++e) {
      const std::string& op = plan.events[e].event.op;
      c[static_cast<size_t>(e)].time_us = op == "softmax_fwd" ? 3 : op == "softmax_bwd" ? 5 : 0;
    }
    return c;
  };
  Strategy dapple = test::strategy("1M4P1D", 1, 8);
  dapple.schedule = Schedule::kDapple;
  dapple.stage_layers = {2, 2, 2, 2};
  // First an interleaved plan of P = 2 x v = 4 = 8 chunks of one block on D = 4, with its analytic
  // costs, in the same storage: twice the chunks (the rebuild shrinks the stage list), gradient
  // syncs, other events.
  Strategy other = test::strategy("1M2P4D", 1, 8);
  other.schedule = Schedule::kInterleaved;
  other.virtual_stages = 4;

  PlanCache cache;
  Simulation sim;
  sim.plan.model = model;
  sim.plan.cluster = cluster;
  double unshared_us = 0;
  rebuildIterationPlan(other, cache, sim.plan);
  sim.costs = costs.costAll(sim.plan.events);
  ASSERT_TRUE(simulateWithinInPlace(sim, std::numeric_limits<double>::infinity(), unshared_us));
  ASSERT_EQ(sim.plan.stages.size(), 8u);

  rebuildIterationPlan(dapple, cache, sim.plan);
  ASSERT_EQ(sim.plan.stages.size(), 4u);
  ASSERT_EQ(sim.plan.micro_batches, 8);
  // The hand trace's premise: each stage's forward runs softmax_fwd twice and its backward
  // softmax_bwd twice (and no softmax_fwd: nothing recomputed).
  auto uses = [&](const OpList& ops, const std::string& op) {
    int n = 0;
    for (const OpInstance& o : ops) n += sim.plan.events[o.event].event.op == op ? 1 : 0;
    return n;
  };
  for (const StagePlan& stage : sim.plan.stages) {
    EXPECT_EQ(uses(stage.forward, "softmax_fwd"), 2);
    EXPECT_EQ(uses(stage.backward, "softmax_bwd"), 2);
    EXPECT_EQ(uses(stage.backward, "softmax_fwd"), 0);
  }
  sim.costs = hand_costs(sim.plan);
  ASSERT_TRUE(simulateWithinInPlace(sim, std::numeric_limits<double>::infinity(), unshared_us));
  EXPECT_DOUBLE_EQ(sim.summary.iteration_us, (8 + 4 - 1) * (6 + 10));
  EXPECT_DOUBLE_EQ(unshared_us, 176);
  // The same from a plan and Simulation of their own.
  IterationPlan fresh = buildIterationPlan(model, cluster, dapple);
  std::vector<EventCost> fresh_costs = hand_costs(fresh);
  const Simulation alone = simulate(std::move(fresh), std::move(fresh_costs));
  EXPECT_EQ(alone.summary.iteration_us, sim.summary.iteration_us);
  EXPECT_EQ(alone.summary.bubble_fraction, sim.summary.bubble_fraction);
  EXPECT_EQ(alone.summary.model_flops, sim.summary.model_flops);
  // Under the limit of 160 us it stops after the first pass, with that pass's 176 us.
  EXPECT_FALSE(simulateWithinInPlace(sim, 160, unshared_us));
  EXPECT_DOUBLE_EQ(unshared_us, 176);
}

// The finished parts of tiny-moe's GPipe ZeRO-1 plan (PlanReuse's strategy), worked out by hand.
void expectGpipeZero1PartsByHand(const IterationPlan& plan) {
  // Per block on one rank (M 1, E 2 so 4 of the 8 experts): QKV 64 x (64 + 2 x 2 x 16) = 8192,
  // output projection 64 x 64 = 4096, router 8 x 64 = 512, two RMSNorm gains 128: dense 12928;
  // experts 4 x 3 x 64 x 128 = 98304. Embedding 512 x 64 = 32768; head: final norm 64 + untied
  // output 512 x 64 = 32832.
  constexpr int64_t kDense0 = 2 * 12928 + 32768, kDense1 = 2 * 12928 + 32832;
  constexpr int64_t kExpert = 2 * 98304;
  ASSERT_EQ(plan.stages.size(), 2u);
  // ZeRO 1: dense parameters shard over D x C = 4 ranks, experts' over D x C / E = 2.
  const StagePlan &s0 = plan.stages[0], &s1 = plan.stages[1];
  EXPECT_EQ(plan.events[s0.optimizer[0].event].signature,
            "adam params=" + std::to_string(kDense0 / 4 + kExpert / 2) + " dtype=fp32");
  EXPECT_EQ(plan.events[s1.optimizer[0].event].signature,
            "adam params=" + std::to_string(kDense1 / 4 + kExpert / 2) + " dtype=fp32");
  // Full-buffer fp32 reduce-scatters and all-gathers: 4 bytes per parameter, groups of 4 and 2
  // in one node; once per device of the stage (M C D = 4).
  ASSERT_GE(s0.dp_reduce_scatter, 0);
  EXPECT_EQ(
      plan.events[s0.dp_reduce_scatter].signature,
      "reduce_scatter bytes=" + std::to_string(4 * kDense0) + " group=4 nodes=1 rpn=4 dtype=fp32");
  EXPECT_EQ(plan.events[s0.dp_allgather].signature,
            "allgather bytes=" + std::to_string(4 * kDense0) + " group=4 nodes=1 rpn=4 dtype=fp32");
  EXPECT_EQ(
      plan.events[s0.expert_grad_sync].signature,
      "reduce_scatter bytes=" + std::to_string(4 * kExpert) + " group=2 nodes=1 rpn=2 dtype=fp32");
  EXPECT_EQ(countOf(plan, s0.dp_reduce_scatter), 4);
  EXPECT_EQ(countOf(plan, s1.dp_allgather), 4);
  EXPECT_EQ(s0.dp_allreduce, -1);
  // The activation between the stages: b s / C tokens x h x 4 B = 32 x 64 x 4 = 8192 B. Sent
  // forward and its gradient backward on the one boundary, each counted at the send and the
  // receive, m = 4 times, by the M C D = 4 rank pairs: 2 x 2 x 4 x 4 = 64. The forward CP ring
  // step exchanges K and V of 32 tokens x 2 groups x 16 x 4 B each (8192 B, one per block at
  // C = 2) with a neighbour in the node: the same event, run m = 4 times on the M C D = 4 devices
  // of its stage: 4 blocks x 4 x 4 = 64 more. The backward ring sends 8192 B beside each of its
  // 2 steps too (Transformer Engine: K and V beside step 0, dK and dV beside the last): 2 x 4
  // blocks x 4 x 4 = 128 more.
  ASSERT_EQ(plan.pipelines.size(), 1u);
  const int p2p = plan.pipelines[0].forward_p2p.at(0);
  EXPECT_EQ(plan.events[p2p].signature, "p2p bytes=8192 group=2 nodes=1 rpn=2 dtype=fp32");
  EXPECT_EQ(
      test::countOps(s0.forward, "cp_kv_exchange") + test::countOps(s1.forward, "cp_kv_exchange"),
      4);
  EXPECT_EQ(test::findOp(s1.forward, "cp_kv_exchange").event, p2p);
  EXPECT_EQ(countOf(plan, p2p), 64 + 64 + 128);
  // The events are interned chunk by chunk, each chunk's optimizer and gradient events after its
  // op lists' new ones: the same order as a plan built alone. Chunk 1's LM head brings new events
  // after chunk 0's optimizer step and gradient collectives.
  EXPECT_GT(s0.optimizer[0].event, s0.backward.back().event);
  EXPECT_GT(s0.expert_allgather, s0.dp_allgather);
  EXPECT_GT(test::findOp(s1.forward, "lm_head_gemm").event, s0.expert_allgather);
}

TEST_F(PlanReuse, FinishedPartsOfAReusedCoreByHand) {
  PlanCache cache;
  buildIterationPlan(model_, cluster_, strategyOf({Schedule::kDapple, 0, false}), &cache);
  const IterationPlan plan =
      buildIterationPlan(model_, cluster_, strategyOf({Schedule::kGpipe, 1, false}), &cache);
  ASSERT_EQ(cache.coreHits(), 1);
  expectGpipeZero1PartsByHand(plan);
}

// A core built into the storage of a dissimilar one let go before (CoreBin, plan/core_bin.h) builds
// the plan a fresh core does. The core let go: Mixtral 8x7B's 32 blocks in 8 chunks (P 2 x v 4),
// experts over E 2 with ZeRO-3 (per-layer gathers and scatters in the op lists), CP 2, activation
// and optimizer offload (host copies). Then tiny-moe's 2-chunk GPipe ZeRO-1 plan without offload
// into it: checked against the hand-worked parts above and field by field against the same plan
// built while the bin is empty. (Under AddressSanitizer the bin keeps nothing: the same plans,
// built fresh.)
TEST_F(PlanReuse, ARecycledCoreOfADissimilarPlanBuildsThePlanOfAFreshOne) {
  CoreBin& bin = CoreBin::instance();
  while (bin.kept() > 0) bin.take();  // other tests' cores
  const size_t kept = std::min<size_t>(1, CoreBin::kCapacity);
  {
    const ModelConfig mixtral = loadModelConfig(test::configPath("models", "mixtral-8x7b"));
    Strategy big = test::strategy("1M2P2D", 1, 8);
    big.cp = 2;
    big.ep = 2;
    big.zero_stage = 3;
    big.schedule = Schedule::kInterleaved;
    big.virtual_stages = 4;
    big.offload = Offload::kBoth;
    const IterationPlan dissimilar = buildIterationPlan(mixtral, cluster_, big);
    ASSERT_EQ(dissimilar.stages.size(), 8u);
    // The premise: its op lists hold what the small plan's do not (ZeRO-3's gathers, host copies).
    const StagePlan& first = dissimilar.stages[0];
    ASSERT_GT(test::countOps(first.forward, "zero3_param_allgather"), 0);
    ASSERT_TRUE(std::any_of(first.forward.begin(), first.forward.end(),
                            [](const OpInstance& op) { return op.stream == Stream::kHost; }));
  }
  ASSERT_EQ(bin.kept(), kept);  // the dissimilar plan's core, let go
  const Strategy small = strategyOf({Schedule::kGpipe, 1, false});
  PlanCache cache;  // holds the core it builds: out of the bin while the plan below is built
  const IterationPlan recycled = buildIterationPlan(model_, cluster_, small, &cache);
  EXPECT_EQ(bin.kept(), 0u);  // taken back out for it
  expectGpipeZero1PartsByHand(recycled);
  const IterationPlan fresh = buildIterationPlan(model_, cluster_, small);
  expectSamePlan(recycled, fresh);
  expectFirstUseOrder(recycled);
  for (size_t k = 0; k < fresh.stages.size(); ++k) {
    EXPECT_EQ(recycled.stages[k].param_buckets.size(), fresh.stages[k].param_buckets.size());
    EXPECT_EQ(recycled.stages[k].micro_batch_buckets.size(),
              fresh.stages[k].micro_batch_buckets.size());
  }
  EXPECT_EQ(iterationUs(recycled), iterationUs(fresh));
}

TEST_F(PlanReuse, OverlapBucketsOfAReusedCoreByHand) {
  // ZeRO 0 with overlap after a core built for ZeRO 1 without: every chunk's dense gradients
  // (under DDP's 25 MiB bucket, so one bucket) and the experts' as one last bucket, all-reduces.
  constexpr int64_t kDense1 = 2 * 12928 + 32832, kExpert = 2 * 98304;
  PlanCache cache;
  buildIterationPlan(model_, cluster_, strategyOf({Schedule::kZbh1, 1, false}), &cache);
  const IterationPlan plan =
      buildIterationPlan(model_, cluster_, strategyOf({Schedule::kZbh2, 0, true}), &cache);
  ASSERT_EQ(cache.coreHits(), 1);
  const StagePlan& s1 = plan.stages[1];
  ASSERT_EQ(s1.dp_buckets.size(), 2u);
  EXPECT_EQ(s1.dp_buckets[0].bytes, 4 * kDense1);
  EXPECT_FALSE(s1.dp_buckets[0].expert);
  EXPECT_EQ(plan.events[s1.dp_buckets[0].event].signature,
            "allreduce bytes=" + std::to_string(4 * kDense1) + " group=4 nodes=1 rpn=4 dtype=fp32");
  EXPECT_EQ(s1.dp_buckets[1].bytes, 4 * kExpert);
  EXPECT_TRUE(s1.dp_buckets[1].expert);
  // Both close after the last backward op (the embedding-less chunk's last block's last op).
  EXPECT_EQ(s1.dp_buckets[0].ready_after_op, static_cast<int>(s1.backward.size()) - 1);
  EXPECT_EQ(s1.dp_allgather, -1);
  EXPECT_EQ(s1.dp_allreduce, -1);
}

TEST(PlanCoreKey, ResetsOnlyWhatFinishingReads) {
  // 2M4P4D (D x C = 4 ranks: ZeRO acts), b 2, B 64.
  const Strategy base = test::strategy("2M4P4D", 2, 64);
  auto with = [&](auto change) {
    Strategy s = base;
    change(s);
    return planCoreKey(s);
  };
  const PlanCache::CoreKey key = planCoreKey(base);
  // Shared: ZeRO 0/1, overlap and bucket size, global batch, the non-interleaved schedules.
  EXPECT_EQ(with([](Strategy& s) { s.zero_stage = 1; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.dp_overlap = true; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.dp_bucket_bytes = 1 << 20; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.global_batch = 128; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.schedule = Schedule::kZbh2; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.schedule = Schedule::kGpipe; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.offload = Offload::kOptimizer; }), key);
  // AdamW's kernels and the gradient reduction's wire type are finishPlan's alone.
  EXPECT_EQ(with([](Strategy& s) { s.optimizer_impl = OptimizerImpl::kForeach; }), key);
  EXPECT_EQ(with([](Strategy& s) { s.grad_reduce_in_bf16 = true; }), key);
  // Activation offload adds copies to the op lists: a core of its own, shared with "both".
  const PlanCache::CoreKey activations =
      with([](Strategy& s) { s.offload = Offload::kActivations; });
  EXPECT_NE(activations, key);
  EXPECT_EQ(with([](Strategy& s) { s.offload = Offload::kBoth; }), activations);
  // Apart: ZeRO-3, the interleaved schedule (and its v), shapes, techniques, splits.
  EXPECT_NE(with([](Strategy& s) { s.zero_stage = 3; }), key);
  // ZeRO-2's bucket reductions are in the op lists (plan/zero2_buckets.h): a core of its own,
  // apart again by overlap (their overlap_ops), bucket size and wire type; not by the batch.
  const PlanCache::CoreKey zero2 = with([](Strategy& s) { s.zero_stage = 2; });
  EXPECT_NE(zero2, key);
  EXPECT_NE(with([](Strategy& s) { s.zero_stage = 2, s.dp_overlap = true; }), zero2);
  EXPECT_NE(with([](Strategy& s) { s.zero_stage = 2, s.dp_bucket_bytes = 1 << 20; }), zero2);
  EXPECT_NE(with([](Strategy& s) { s.zero_stage = 2, s.grad_reduce_in_bf16 = true; }), zero2);
  EXPECT_EQ(with([](Strategy& s) { s.zero_stage = 2, s.global_batch = 128; }), zero2);
  const PlanCache::CoreKey v2 = with([](Strategy& s) {
    s.schedule = Schedule::kInterleaved;
    s.virtual_stages = 2;
  });
  EXPECT_NE(v2, key);
  EXPECT_NE(with([](Strategy& s) {
              s.schedule = Schedule::kInterleaved;
              s.virtual_stages = 3;
            }),
            v2);
  EXPECT_NE(with([](Strategy& s) { s.micro_batch = 4; }), key);
  EXPECT_NE(with([](Strategy& s) { s.dp = 2; }), key);
  EXPECT_NE(with([](Strategy& s) { s.cp = 2; }), key);
  EXPECT_NE(with([](Strategy& s) { s.ep = 2; }), key);
  EXPECT_NE(with([](Strategy& s) { s.recompute = Recompute::kSelective; }), key);
  EXPECT_NE(with([](Strategy& s) { s.sequence_parallel = true; }), key);
  EXPECT_NE(with([](Strategy& s) { s.stage_layers = {24, 24, 24, 24}; }), key);
  // With D x C = 1, ZeRO-3 does nothing: the same core as ZeRO 0.
  Strategy alone = test::strategy("2M4P1D", 2, 64);
  const PlanCache::CoreKey alone_key = planCoreKey(alone);
  alone.zero_stage = 3;
  EXPECT_EQ(planCoreKey(alone), alone_key);
}

// A core shared across AdamW's implementations (FSDP) and gradient reduction types (Megatron,
// bf16): each finished plan equals the plan built alone and simulates to the same time, and the
// finished parts do differ (so a core that had kept either would be caught): FSDP's step on a
// rank's shard is clip_grad_norm_'s two kernels then one fused pass or foreach's eight; Megatron's
// gradient all-reduce moves fp32 (4 bytes an element) or bf16 (2).
TEST(PlanCoreKey, OptimizerAndGradientTypeShareACore) {
  const ModelConfig model = test::model(256, 4, 1024, 128, 1000, 4, "bf16");
  const ClusterConfig cluster = test::cluster(8);
  const CostModel costs{cluster, nullptr, /*analytic_fallback=*/true};
  auto iterationUs = [&](IterationPlan plan) {
    std::vector<EventCost> c = costs.costAll(plan.events);
    return simulate(std::move(plan), std::move(c)).summary.iteration_us;
  };
  Strategy fsdp = test::strategy("1M2P4D", 1, 8);
  fsdp.framework = Framework::kFsdp;
  fsdp.zero_stage = 3;
  Strategy foreach_step = fsdp;
  foreach_step.optimizer_impl = OptimizerImpl::kForeach;
  Strategy megatron = test::strategy("1M2P4D", 1, 8);
  Strategy bf16_reduce = megatron;
  bf16_reduce.grad_reduce_in_bf16 = true;

  PlanCache cache;
  std::vector<IterationPlan> reused;
  for (const Strategy& s : {fsdp, foreach_step, megatron, bf16_reduce}) {
    SCOPED_TRACE(s.name() + s.techniques());
    reused.push_back(buildIterationPlan(model, cluster, s, &cache));
    IterationPlan alone = buildIterationPlan(model, cluster, s);
    expectSamePlan(reused.back(), alone);
    EXPECT_EQ(iterationUs(reused.back()), iterationUs(std::move(alone)));
  }
  EXPECT_EQ(cache.coreMisses(), 2);
  EXPECT_EQ(cache.coreHits(), 2);
  // The finished parts differ: stage 0's step, 2 + 1 kernels against 2 + 8.
  EXPECT_EQ(reused[0].stages[0].optimizer.size(), 3u);
  EXPECT_EQ(reused[1].stages[0].optimizer.size(), 10u);
  // Megatron's (no overlap): one all-reduce of the stage's parameters, 4 then 2 bytes each.
  for (int i : {2, 3}) {
    const StagePlan& stage = reused[static_cast<size_t>(i)].stages[0];
    ASSERT_GE(stage.dp_allreduce, 0);
    const std::string bytes =
        "allreduce bytes=" + std::to_string((i == 2 ? 4 : 2) * stage.parameters) + " ";
    EXPECT_EQ(reused[static_cast<size_t>(i)].events[stage.dp_allreduce].signature.rfind(bytes, 0),
              0u);
  }
}

TEST(PlanCacheCores, KeepsTheMostRecentlyUsed) {
  // Capacity 2: a, b, a (hit: a is now the most recent), c (evicts b), a (hit), b (miss).
  PlanCache cache(2);
  auto key = [](int tp) { return test::strategy(std::to_string(tp) + "M1P1D", 1, 1); };
  int built = 0;
  auto get = [&](int tp) {
    return cache.core(key(tp), [&] {
      ++built;
      return std::shared_ptr<const PlanCore>();
    });
  };
  get(1), get(2), get(1), get(3), get(1), get(2);
  EXPECT_EQ(built, 4);
  EXPECT_EQ(cache.coreHits(), 2);
  EXPECT_EQ(cache.coreMisses(), 4);
}

}  // namespace
}  // namespace evsim

// --grad-reduce-sync step without a timeline (issue 29), continued from
// pending_bucket_bound_test.cpp: sweeps of small plans over models and techniques the dense
// untied sweep there does not run (tied embeddings, multi-token prediction, recomputation,
// offload, context and sequence parallelism, MoE), each asserting on every plan that the
// search's closed form never passes simulate's peak; and the tied head's buckets by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "modeler/cost_model.h"
#include "modeler/memory_model.h"
#include "modeler/pending_reductions.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "support/pending_bucket_cases.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using namespace test_support;

// The bound's other assumptions (memory_model.cpp addLayerFacts, setLeastFirstBuckets): each later
// arrival at most the largest block or the head's rest; a plain head's output weight first; the
// embedding's gradient last and whole; none for a chunk whose experts no group reduces. Each sweep
// below runs a model or technique the dense untied sweep of pending_bucket_bound_test.cpp does not,
// over small plans (fp32 and bf16; P 1-4 with GPipe, 1F1B and interleaved v = 2; m 2 and 4; queue
// bound none or 1; DeepSpeed's buckets and 100,000, 30,000 and 10,000 elements), and asserts on
// every plan: the search's closed form is the plan's estimate, never above simulate's (the walk's
// pending buckets), and at least the estimate with nothing pending.

// A model file's text, to derive variants of it (tied, multi-token prediction) by its own keys.
std::string modelText(const std::string& name) {
  std::ifstream in(test::configPath("models", name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ModelConfig tiedTinyLlama() {
  std::string text = modelText("tiny-llama");
  const std::string untied = "untie_embeddings_and_output_weights: true";
  const size_t at = text.find(untied);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) {
    text.replace(at, untied.size(), "untie_embeddings_and_output_weights: false");
  }
  return parseModelConfig(text, "tied tiny-llama");
}

struct SweepShape {
  int tp, pp, dp;
  Schedule schedule = Schedule::kDapple;
  int v = 1;
  int ep = 1;
  int cp = 1;
  int etp = 0;  // expert TP (0: the model's TP)
};

struct SweepTally {
  int plans = 0;
  int bound_bites = 0;  // plans whose closed form counts a pending bucket (> the old rule)
  int equal = 0;        // plans whose closed form is simulate's peak
  int cast_peaks = 0;   // plans whose simulated peak is at a bucket's cast
  int lowered = 0;      // plans whose simulated peak is below the full-SP rule's
  std::vector<std::string> refused;  // why, per refused plan's shape (the first refusal)
};

void print(const char* what, const SweepTally& t) {
  std::cout << "[pending bucket bound] " << what << ": " << t.plans << " plans, " << t.bound_bites
            << " counting a pending bucket, " << t.equal << " equal to simulate's peak, "
            << t.cast_peaks << " simulated at a bucket's cast, " << t.lowered
            << " below the full SP term's\n";
  for (const std::string& why : t.refused) std::cout << "  refused: " << why << "\n";
  EXPECT_TRUE(t.refused.empty()) << "a swept shape is refused";
}

// Every valid plan of `shapes` x the sweep's knobs, with `tweak` applied, on `model`.
void sweepStepPlans(ModelConfig model, const std::vector<SweepShape>& shapes,
                    const std::function<void(Strategy&)>& tweak, SweepTally& tally) {
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  for (const DType dtype : {DType::kFp32, DType::kBf16}) {
    model.dtype = dtype;
    PlanCache cache;
    const ClosedFormTier tier{model, cluster, costs, kDefaultMemoryHeadroom, cache};
    for (const SweepShape& shape : shapes) {
      bool shape_refused = false;
      for (const int64_t m : {2, 4}) {
        for (const int queue : {0, 1}) {
          for (const int64_t bucket :
               {int64_t{0}, int64_t{100'000}, int64_t{30'000}, int64_t{10'000}}) {
            Strategy s = stepZero2(shape.tp, shape.pp, shape.dp, 1, m * shape.dp);
            s.schedule = shape.schedule;
            s.virtual_stages = shape.v;
            s.ep = shape.ep;
            s.cp = shape.cp;
            s.etp = shape.etp;
            s.grad_reduce_queue = queue;
            s.dp_bucket_bytes = 4 * bucket;
            tweak(s);
            if (const std::optional<std::string> why = strategyViolation(model, cluster, s)) {
              if (!shape_refused && dtype == DType::kFp32) tally.refused.push_back(*why);
              shape_refused = true;
              continue;
            }
            SCOPED_TRACE(::testing::Message()
                         << s.name() << " schedule " << static_cast<int>(s.schedule) << " ep "
                         << s.ep << " etp " << s.expertTp() << " cp " << s.cp << " m " << m
                         << " queue " << queue << " bucket " << bucket << " dtype "
                         << dtypeBytes(dtype));
            const StepPlanRun r = runStepPlan(model, cluster, costs, tier, s);
            const IterationPlan& plan = r.sim.plan;
            const MemoryEstimate& estimate = r.estimate;
            EXPECT_EQ(r.closed, estimate.peak_bytes);
            // The bound's own claim, tighter than the walk's: per device stage, at most the least
            // first bucket its chunks queue (its parts after one op together, as the walk opens
            // them), in the model dtype.
            for (int d = 0; d < plan.deviceStages(); ++d) {
              int64_t least = std::numeric_limits<int64_t>::max();
              for (int k : plan.deviceChunks(d)) {
                least = std::min(least, firstBucketElements(plan, static_cast<size_t>(k)) *
                                            dtypeBytes(model.dtype));
              }
              EXPECT_LE(estimate.stages[static_cast<size_t>(d)].pending_reduction_bytes, least)
                  << "device stage " << d;
            }
            // Per device stage: the least first bucket never above the walk's plateaus.
            for (size_t d = 0; d < r.walked.size() && d < estimate.stages.size(); ++d) {
              EXPECT_LE(estimate.stages[d].pending_reduction_bytes, r.walked[d].plateau_bytes)
                  << "stage " << d;
            }
            EXPECT_LE(r.closed, r.simulated);
            EXPECT_LE(r.before, estimate.peak_bytes);
            ++tally.plans;
            tally.bound_bites += estimate.peak_bytes > r.before;
            tally.equal += r.closed == r.simulated;
            tally.cast_peaks += r.simulated_at_cast;
            // Telling the cast apart lowers simulate's peak by at most the SP input gradient.
            EXPECT_LE(r.simulated, r.simulated_full_sp);
            EXPECT_LE(r.simulated_full_sp - r.simulated, sequenceParallelGradInputBytes(model, s));
            tally.lowered += r.simulated < r.simulated_full_sp;
          }
        }
      }
    }
  }
}

// Sweeps `shapes` (sweepStepPlans' checks on every plan) and expects at least 100 plans, at least
// one of which counts a pending bucket (so the bound was exercised, not only 0).
void expectSweepCountsABucket(const char* what, const ModelConfig& model,
                              const std::vector<SweepShape>& shapes,
                              const std::function<void(Strategy&)>& tweak) {
  SweepTally tally;
  ASSERT_NO_FATAL_FAILURE(sweepStepPlans(model, shapes, tweak, tally));
  print(what, tally);
  EXPECT_GE(tally.plans, 100);
  EXPECT_GE(tally.bound_bites, 1);
}

const std::vector<SweepShape> kDenseShapes = {{1, 1, 2},
                                              {1, 2, 2},
                                              {1, 2, 2, Schedule::kGpipe},
                                              {1, 4, 2},
                                              {1, 2, 2, Schedule::kInterleaved, 2}};

// Tied embedding and output weight (Megatron's default): at P = 1 the head owns no output weight
// (its GEMM's gradient goes to the embedding's table, which arrives last and whole with both
// uses); at P > 1 the last stage's head holds the copy Megatron keeps there and is plain again.
TEST(PendingBucketBound, TiedEmbeddingNeverPassesSimulate) {
  const ModelConfig model = tiedTinyLlama();
  ASSERT_FALSE(model.spec.untied_output);
  expectSweepCountsABucket("tied", model, kDenseShapes, [](Strategy&) {});
}

// Tied, by hand (fp32, D 2). At P = 1 the chunk holds N = 32,768 + 4 x 49,280 + 64 = 229,952
// (the table once); the head's output GEMM claims O = 32,768 elements of a layer that holds only
// the final norm's 64, so the head arrives whole as 64 first, then block 3 (fc2 12,288, fc1 24,576,
// proj 4,096, qkv 8,192, norms 128), ... and the table last with both uses' gradients.
// - 100,000: 64 + 49,280 + 49,280 = 98,624 fit, block 1's fc2 would pass: F = 98,624. Nothing is
//   assumed of a_1 (0); the later arrivals at most a block: max(0, min(100,001 - 49,280,
//   N - 32,768 = 197,184)) = 50,721.
// - 30,000: 64 + 12,288 = 12,352, fc1 would pass: F = 12,352; a block passes the bucket, so the
//   bound is 1 (taking the head as plain, a_1 = O, would claim 32,768 > F).
// At P = 2 the last stage holds Megatron's copy of the table as its output weight and gives its
// gradient first: with 30,000 it is reduced alone, F1 = O = 32,768 = the bound, as untied.
TEST(PendingBucketBound, TiedHeadByHand) {
  const ModelConfig model = tiedTinyLlama();
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  constexpr int64_t kTiedN = kEmbedding + 4 * kBlock + (kHead - kOutput);
  ASSERT_EQ(kTiedN, 229'952);
  struct Case {
    int pp;
    int64_t bucket;
    size_t chunk;
    int64_t first, bound;
  };
  for (const Case& c : {Case{1, 0, 0, kTiedN, kTiedN}, Case{1, 100'000, 0, 98'624, 50'721},
                        Case{1, 30'000, 0, 12'352, 1}, Case{2, 30'000, 1, kOutput, kOutput}}) {
    SCOPED_TRACE(::testing::Message() << "P " << c.pp << " bucket " << c.bucket);
    Strategy s = stepZero2(1, c.pp, 2, 1, 8);
    s.dp_bucket_bytes = 4 * c.bucket;
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    const IterationPlan plan = buildIterationPlan(model, cluster, s);
    if (c.pp == 1) {
      ASSERT_EQ(plan.stages[0].parameters, kTiedN);
    }
    if (c.pp == 2) {
      ASSERT_EQ(plan.stages[1].parameters, kN1);
    }
    EXPECT_EQ(firstBucketElements(plan, c.chunk), c.first);
    EXPECT_EQ(estimateMemory(plan).stages[c.chunk].pending_reduction_bytes, 4 * c.bound);
  }
}

// Multi-token prediction (one depth) on the last stage: its block, eh_proj and a second use of
// the output weight arrive with the head's, so nothing is assumed of the first arrival.
TEST(PendingBucketBound, MultiTokenPredictionNeverPassesSimulate) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    std::string text = modelText("tiny-llama") + "mtp_num_layers: 1\n";
    if (tied) {
      const std::string untied = "untie_embeddings_and_output_weights: true";
      text.replace(text.find(untied), untied.size(), "untie_embeddings_and_output_weights: false");
    }
    const ModelConfig model = parseModelConfig(text, "tiny-llama with MTP");
    ASSERT_EQ(model.mtp_layers, 1);
    expectSweepCountsABucket(tied ? "MTP, tied" : "MTP", model, kDenseShapes, [](Strategy&) {});
  }
}

// Recomputation (full, selective): the backward lists gain the recomputed forward, no arrival.
TEST(PendingBucketBound, RecomputeNeverPassesSimulate) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  for (const Recompute r : {Recompute::kFull, Recompute::kSelective}) {
    SCOPED_TRACE(recomputeName(r));
    expectSweepCountsABucket(r == Recompute::kFull ? "recompute full" : "recompute selective",
                             model, kDenseShapes, [r](Strategy& s) { s.recompute = r; });
  }
}

// Activation offload (--cpu-offloading) is refused under --grad-reduce-sync step (its copies'
// prefetch windows are counted with the reductions in the backward), so the bound never meets
// it; the optimizer's offload (the step on the host) runs, and is swept.
TEST(PendingBucketBound, OffloadNeverPassesSimulate) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  for (const Offload o : {Offload::kActivations, Offload::kBoth}) {
    Strategy s = stepZero2(1, 2, 2, 1, 8);
    s.offload = o;
    const std::optional<std::string> why = strategyViolation(model, cluster, s);
    ASSERT_TRUE(why.has_value()) << offloadName(o);
    EXPECT_CONTAINS(*why, "--offload activations or both");
  }
  expectSweepCountsABucket("optimizer offload", model, kDenseShapes,
                           [](Strategy& s) { s.offload = Offload::kOptimizer; });
}

// Context parallel 2: the same parameters, reduced over D x C.
TEST(PendingBucketBound, ContextParallelNeverPassesSimulate) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  std::vector<SweepShape> shapes;
  for (SweepShape shape : kDenseShapes) {
    shape.cp = 2;
    shapes.push_back(shape);
  }
  shapes.push_back({1, 2, 1, Schedule::kDapple, 1, 1, 2});  // D 1: only CP reduces
  expectSweepCountsABucket("CP 2", model, shapes, [](Strategy&) {});
}

// Sequence parallelism (TP 2; with CP 2 too): simulate's walk counts the SP input gradient on its
// plateaus only, not at a bucket's cast (memory_components.h, bucketMoment), while the closed
// form's first bucket is a plateau's with the full SP term; bf16 plans cast their buckets into the
// fp32 wire, and some peak there.
TEST(PendingBucketBound, SequenceParallelNeverPassesSimulate) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  SweepTally tally;
  ASSERT_NO_FATAL_FAILURE(sweepStepPlans(model,
                                         {{2, 1, 2},
                                          {2, 2, 2},
                                          {2, 2, 2, Schedule::kGpipe},
                                          {2, 4, 2},
                                          {2, 2, 2, Schedule::kInterleaved, 2},
                                          {2, 2, 2, Schedule::kDapple, 1, 1, 2}},
                                         [](Strategy& s) { s.sequence_parallel = true; }, tally));
  print("SP", tally);
  EXPECT_GE(tally.plans, 100);
  EXPECT_GE(tally.bound_bites, 1);
  EXPECT_GE(tally.cast_peaks, 1);
  EXPECT_GE(tally.lowered, 1);
}

// tiny-moe (8 SwiGLU experts, top 2): the routed experts' batched weight gradients arrive as one
// GEMM each, within a block. Expert parallel 2 over D 4 (the experts' group 2), over D 2 (their
// group 1: no reduction takes them, so no bound for their chunks), and E 1 (experts reduced with
// the dense parameters); with TP 2 (and SP) the experts' group is D x M / (ETP x E): 1 with
// ETP 2, 2 with ETP 1.
TEST(PendingBucketBound, MixtureOfExpertsNeverPassesSimulate) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-moe"));
  SweepTally tally;
  ASSERT_NO_FATAL_FAILURE(sweepStepPlans(
      model,
      {{1, 1, 4, Schedule::kDapple, 1, 2},
       {1, 2, 4, Schedule::kDapple, 1, 2},
       {1, 2, 4, Schedule::kInterleaved, 2, 2},
       {1, 1, 2, Schedule::kDapple, 1, 2},
       {1, 2, 2, Schedule::kDapple, 1, 2},
       {1, 2, 2, Schedule::kDapple, 1, 1},
       {2, 2, 2, Schedule::kDapple, 1, 2},
       {1, 2, 2, Schedule::kDapple, 1, 2, 2},
       {2, 2, 2, Schedule::kDapple, 1, 2, 1, 1}},
      // MoE under TP runs with sequence parallelism.
      [](Strategy& s) { s.sequence_parallel = s.tp > 1; }, tally));
  print("MoE", tally);
  EXPECT_EQ(tally.plans, 288);
  EXPECT_GE(tally.bound_bites, 1);
}

// tiny-moe with a multi-token prediction depth: its block is the model's last kind, an MoE block,
// so the head's chunk holds routed experts too (reduced apart under EP, or by no group).
TEST(PendingBucketBound, MixtureOfExpertsWithMtpNeverPassesSimulate) {
  const ModelConfig model =
      parseModelConfig(modelText("tiny-moe") + "mtp_num_layers: 1\n", "tiny-moe with MTP");
  ASSERT_EQ(model.mtp_layers, 1);
  SweepTally tally;
  ASSERT_NO_FATAL_FAILURE(sweepStepPlans(
      model,
      {{1, 1, 4, Schedule::kDapple, 1, 2},
       {1, 2, 4, Schedule::kDapple, 1, 2},
       {1, 2, 2, Schedule::kDapple, 1, 2},
       {1, 2, 2, Schedule::kDapple, 1, 1}},
      [](Strategy&) {}, tally));
  print("MoE with MTP", tally);
  EXPECT_GE(tally.plans, 100);
  EXPECT_GE(tally.bound_bites, 1);
}

}  // namespace
}  // namespace evsim

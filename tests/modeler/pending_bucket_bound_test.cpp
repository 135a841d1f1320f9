// --grad-reduce-sync step without a timeline (issue 29): the search's memory check and a plan's
// own estimate count the least first ZeRO-2 bucket a device's chunks fill
// (DeviceChunkSums::pending_reductions, setLeastFirstBuckets), a lower bound of what
// simulate's timeline walk finds (modeler/pending_reductions.h). Bucket sizes worked by hand;
// then a set of small plans on which the closed form never passes simulate's peak, with the
// cards on which the two verdicts disagree counted before (no bucket) and after.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "modeler/cost_model.h"
#include "modeler/memory_components.h"
#include "modeler/memory_model.h"
#include "modeler/pending_reductions.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "support/pending_bucket_cases.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using namespace test_support;

// 1M2P2D, m = 4, one bucket per chunk by DeepSpeed's 5e8-element default: F = N, held in the
// model dtype while filling: 4 x 131,328 = 525,312 and 4 x 131,392 = 525,568 bytes in fp32; 2 x N
// with bf16 parameters (the wire stays fp32: the filling bucket is the narrower one). The
// search's closed form counts the same, and simulate's walk no less.
TEST(PendingBucketBound, OneBucketAChunkIsItsParametersInTheModelDtype) {
  ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  for (const DType dtype : {DType::kFp32, DType::kBf16}) {
    SCOPED_TRACE(::testing::Message() << "dtype " << dtypeBytes(dtype));
    model.dtype = dtype;
    const int64_t e = dtypeBytes(dtype);
    PlanCache cache;
    const ClosedFormTier tier{model, cluster, costs, kDefaultMemoryHeadroom, cache};
    const Strategy s = stepZero2(1, 2, 2, 1, 8);
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    ASSERT_EQ(plan.stages[0].parameters, kN0);
    ASSERT_EQ(plan.stages[1].parameters, kN1);
    ASSERT_EQ(firstBucketElements(plan, 0), kN0);
    ASSERT_EQ(firstBucketElements(plan, 1), kN1);
    const MemoryEstimate estimate = estimateMemory(plan);
    EXPECT_EQ(estimate.stages[0].pending_reduction_bytes, e * kN0);
    EXPECT_EQ(estimate.stages[1].pending_reduction_bytes, e * kN1);
    // The old rule (nothing pending without a timeline) is the same estimate with 0 given.
    const MemoryEstimate old_rule =
        estimateMemory(plan, kDefaultMemoryHeadroom, std::vector<PendingReductionPeak>(2));
    // At the backward's moment it adds whole (with bf16 the stage may peak at its optimizer step).
    if (!estimate.stages[1].peak_at_optimizer_step && !old_rule.stages[1].peak_at_optimizer_step) {
      EXPECT_EQ(estimate.stages[1].allocated_bytes - old_rule.stages[1].allocated_bytes, e * kN1);
    }
    EXPECT_EQ(tier.evaluate(s).peak_memory_bytes, estimate.peak_bytes);
    std::vector<EventCost> event_costs = costs.costAll(plan.events);
    const Simulation sim = simulate(std::move(plan), std::move(event_costs));
    const std::vector<PendingReductionPeak> walked = pendingReductionPeaks(sim);
    ASSERT_EQ(walked.size(), 2u);
    EXPECT_GE(walked[0].plateau_bytes, e * kN0);
    EXPECT_GE(walked[1].plateau_bytes, e * kN1);
    // Under --grad-reduce-sync backward nothing of it is counted (the IPG buffer is instead).
    Strategy backward = s;
    backward.grad_reduce_sync = GradReduceSync::kBackward;
    EXPECT_EQ(estimateMemory(buildIterationPlan(model, cluster, backward))
                  .stages[0]
                  .pending_reduction_bytes,
              0);
  }
}

// Buckets smaller than a chunk (--dp-bucket-mb, in the fp32 wire's elements). Arrivals in
// backward order: chunk 1 the output weight O, the final norm 64, then each block fc2 12,288,
// fc1 24,576, proj 4,096, qkv 8,192 and its norms 128; chunk 0 its two blocks, then the
// embedding whole, last.
// - 100,000 elements: chunk 1 fills 32,832 + 49,280 = 82,112, + 12,288 = 94,400, and fc1 would
//   pass 100,000: F1 = 94,400; the bound max(O, 100,001 - 49,280) = 50,721 (the later arrivals
//   at most a block). Chunk 0: 98,560 fit and the embedding closes it (DeepSpeed's F0 = 98,560);
//   the embedding's own bucket, the epilogue's, is issued after the same op (its backward, the
//   chunk's last), so the walk opens both at the task's start as one: 131,328 in the plan's
//   queue. The bound min(50,721, N0 - 32,768 = 98,560) = 50,721 is below either.
// - 30,000 elements: the output weight alone passes it, reduced alone: F1 = O = 32,768, the bound
//   max(O, 30,001 - 30,000) = 32,768 exactly. Chunk 0's later arrivals may be a whole block,
//   larger than the bucket: nothing beyond F0 >= 1.
TEST(PendingBucketBound, SmallerBucketsByHand) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  struct Case {
    int64_t bucket;
    int64_t first0, first1;  // the plan's first buckets
    int64_t bound0, bound1;  // the memory model's least ones
  };
  for (const Case& c : {Case{100'000, kN0, 94'400, 50'721, 50'721},
                        Case{30'000, -1, kOutput, 1, kOutput}}) {
    SCOPED_TRACE(::testing::Message() << "bucket " << c.bucket);
    Strategy s = stepZero2(1, 2, 2, 1, 8);
    s.dp_bucket_bytes = 4 * c.bucket;  // fp32 wire
    ASSERT_FALSE(strategyViolation(model, cluster, s));
    const IterationPlan plan = buildIterationPlan(model, cluster, s);
    if (c.first0 > 0) {
      EXPECT_EQ(firstBucketElements(plan, 0), c.first0);
    }
    EXPECT_EQ(firstBucketElements(plan, 1), c.first1);
    EXPECT_LE(c.bound0, firstBucketElements(plan, 0));
    const MemoryEstimate estimate = estimateMemory(plan);
    EXPECT_EQ(estimate.stages[0].pending_reduction_bytes, 4 * c.bound0);
    EXPECT_EQ(estimate.stages[1].pending_reduction_bytes, 4 * c.bound1);
  }
  // A split backward fills its buckets in W, after B has freed the chunk's activations: no bound.
  Strategy zb = stepZero2(1, 2, 2, 1, 8);
  zb.schedule = Schedule::kZbh1;
  ASSERT_FALSE(strategyViolation(model, cluster, zb));
  const MemoryEstimate split = estimateMemory(buildIterationPlan(model, cluster, zb));
  EXPECT_EQ(split.stages[1].pending_reduction_bytes, 0);
}


// Small plans under step (tiny-llama in fp32 and bf16; TP 1-2, P 1-4, D 2-4; GPipe, 1F1B,
// interleaved with v = 2; m 2-8; queue bound none or 1; DeepSpeed's buckets, 100,000, 30,000 and
// 10,000 elements): the closed form's peak (the search's verdict) is the plan's estimate and never
// above simulate's (the walk's pending buckets); under --grad-reduce-sync backward the two are
// equal (no timeline term). Then for every card between the least and the largest peak, in steps
// of 4 KiB of usable bytes, the (plan, card) pairs where the search says "fits" and simulate says
// out of memory, before (nothing pending counted) and after: fewer after, none added.
TEST(PendingBucketBound, ClosedFormNeverPassesSimulateAndDisagreesLess) {
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const CostModel costs(cluster, nullptr, true);
  struct Peaks {
    int64_t before, after, simulated;
  };
  std::vector<Peaks> peaks;
  int backward_plans = 0;
  for (const DType dtype : {DType::kFp32, DType::kBf16}) {
    ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
    model.dtype = dtype;
    PlanCache cache;
    const ClosedFormTier tier{model, cluster, costs, kDefaultMemoryHeadroom, cache};
    struct Shape {
      int tp, pp, dp;
      Schedule schedule;
      int v;
    };
    for (const Shape& shape :
         {Shape{1, 1, 2, Schedule::kDapple, 1}, Shape{1, 2, 2, Schedule::kDapple, 1},
          Shape{1, 2, 2, Schedule::kGpipe, 1}, Shape{1, 4, 2, Schedule::kDapple, 1},
          Shape{2, 2, 2, Schedule::kDapple, 1}, Shape{1, 2, 4, Schedule::kDapple, 1},
          Shape{1, 2, 2, Schedule::kInterleaved, 2}}) {
      for (const int64_t m : {2, 4, 8}) {
        for (const int queue : {0, 1}) {
          for (const int64_t bucket : {int64_t{0}, int64_t{100'000}, int64_t{30'000},
                                       int64_t{10'000}}) {
            Strategy s = stepZero2(shape.tp, shape.pp, shape.dp, 1, m * shape.dp);
            s.schedule = shape.schedule;
            s.virtual_stages = shape.v;
            s.grad_reduce_queue = queue;
            s.dp_bucket_bytes = 4 * bucket;
            if (strategyViolation(model, cluster, s)) continue;
            SCOPED_TRACE(::testing::Message()
                         << s.name() << " schedule " << static_cast<int>(s.schedule) << " m " << m
                         << " queue " << queue << " bucket " << bucket << " dtype "
                         << dtypeBytes(dtype));
            const StepPlanRun r = runStepPlan(model, cluster, costs, tier, s);
            ASSERT_EQ(r.closed, r.estimate.peak_bytes);
            ASSERT_LE(r.closed, r.simulated);
            ASSERT_LE(r.before, r.closed);
            peaks.push_back({r.before, r.closed, r.simulated});
            if (queue == 0 && bucket == 0) {
              Strategy b = s;
              b.grad_reduce_sync = GradReduceSync::kBackward;
              if (strategyViolation(model, cluster, b)) continue;
              IterationPlan bp = buildIterationPlan(model, cluster, b);
              std::vector<EventCost> bc = costs.costAll(bp.events);
              const Simulation bs = simulate(std::move(bp), std::move(bc));
              EXPECT_EQ(tier.evaluate(b).peak_memory_bytes,
                        estimateMemory(bs.plan, kDefaultMemoryHeadroom, pendingReductionPeaks(bs))
                            .peak_bytes);
              ++backward_plans;
            }
          }
        }
      }
    }
  }
  ASSERT_GE(peaks.size(), 200u);
  EXPECT_GE(backward_plans, 10);
  int64_t least = peaks[0].before, largest = 0;
  for (const Peaks& p : peaks) {
    least = std::min(least, p.before);
    largest = std::max(largest, p.simulated);
  }
  constexpr int64_t kStep = 4096;
  int64_t disagree_before = 0, disagree_after = 0, plans_before = 0, plans_after = 0;
  for (const Peaks& p : peaks) {
    // Cards whose usable bytes U fall in [closed peak, simulated peak): "fits" against OOM.
    auto cards = [&](int64_t closed) {
      if (closed >= p.simulated) return int64_t{0};
      const int64_t first = (std::max(closed, least) - least + kStep - 1) / kStep;
      const int64_t end = (p.simulated - least + kStep - 1) / kStep;
      return end - first;
    };
    disagree_before += cards(p.before);
    disagree_after += cards(p.after);
    plans_before += p.before < p.simulated;
    plans_after += p.after < p.simulated;
  }
  std::cout << "[pending bucket bound] " << peaks.size() << " plans, cards every " << kStep
            << " B over " << largest - least << " B: disagreements " << disagree_before << " -> "
            << disagree_after << "; plans with a closed form below simulate " << plans_before
            << " -> " << plans_after << "\n";
  EXPECT_LT(disagree_after, disagree_before);
  EXPECT_LE(plans_after, plans_before);
}

}  // namespace
}  // namespace evsim

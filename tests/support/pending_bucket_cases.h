#pragma once
// The pending-bucket tests' shared cases (tests/modeler/pending_bucket_bound_test.cpp,
// pending_bucket_sweeps_test.cpp): tiny-llama's parameter counts worked by hand, a ZeRO-2 step
// strategy, a plan's first bucket, and one step plan priced four ways (header-only; for tests
// that link the modeler).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "modeler/cost_model.h"
#include "modeler/memory_components.h"
#include "modeler/memory_model.h"
#include "modeler/pending_reductions.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"

namespace evsim::test_support {

// tiny-llama on one rank of TP 1 (h 64, 4 heads in 2 K/V groups of d 16, SwiGLU ffn 192, vocab
// 512, untied, fp32): a block holds qkv 64 x (64 + 2 x 2 x 16) = 8,192, proj 4,096, fc1 2 x 192 x
// 64 = 24,576, fc2 12,288 and two norms 128: 49,280; the embedding 512 x 64 = 32,768; the head
// its output weight O = 32,768 and the final norm 64: 32,832. At P = 2 chunk 0 is the embedding
// and blocks 0-1, N0 = 131,328, chunk 1 blocks 2-3 and the head, N1 = 131,392.
constexpr int64_t kBlock = 49'280, kEmbedding = 32'768, kOutput = 32'768, kHead = 32'832;
constexpr int64_t kN0 = kEmbedding + 2 * kBlock, kN1 = 2 * kBlock + kHead;

inline Strategy stepZero2(int tp, int pp, int dp, int64_t micro_batch, int64_t global_batch) {
  Strategy s = Strategy::of(tp, pp, dp, micro_batch, global_batch);
  s.zero_stage = 2;
  s.grad_reduce_sync = GradReduceSync::kStep;
  return s;
}

// The chunk's first queued bucket in elements (its parts after the same op), from the plan.
inline int64_t firstBucketElements(const IterationPlan& plan, size_t chunk) {
  const std::vector<GradBucket>& buckets = plan.stages[chunk].micro_batch_buckets;
  int64_t elements = 0;
  for (const GradBucket& b : buckets) {
    if (b.ready_after_op != buckets[0].ready_after_op) break;
    const Event& e = plan.events[b.event].event;
    elements += e.message_bytes / dtypeBytes(e.dtype);
  }
  return elements;
}

// One step plan of a sweep, priced four ways: the plan's memory estimate (the search's figure),
// the same with nothing pending (the rule before session 25), the closed-form tier's verdict, and
// simulate's (its walk's pending buckets per device stage, and the peak with them).
struct StepPlanRun {
  Simulation sim;
  MemoryEstimate estimate;
  int64_t before = 0, closed = 0, simulated = 0;
  bool simulated_at_cast = false;  // simulate's busiest stage peaks at a bucket's cast
  // Simulate's peak by the rule before session 26: the walk's largest instant beside the full
  // SP term (no cast instant told apart).
  int64_t simulated_full_sp = 0;
  std::vector<PendingReductionPeak> walked;
};

inline StepPlanRun runStepPlan(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostModel& costs, const ClosedFormTier& tier,
                               const Strategy& s) {
  IterationPlan plan = buildIterationPlan(model, cluster, s);
  StepPlanRun r;
  r.estimate = estimateMemory(plan);
  const std::vector<PendingReductionPeak> none(static_cast<size_t>(s.pp));
  r.before = estimateMemory(plan, kDefaultMemoryHeadroom, none).peak_bytes;
  r.closed = tier.evaluate(s).peak_memory_bytes;
  std::vector<EventCost> event_costs = costs.costAll(plan.events);
  r.sim = simulate(std::move(plan), std::move(event_costs));
  r.walked = pendingReductionPeaks(r.sim);
  const MemoryEstimate simulated = estimateMemory(r.sim.plan, kDefaultMemoryHeadroom, r.walked);
  r.simulated = simulated.peak_bytes;
  r.simulated_at_cast =
      simulated.stages[static_cast<size_t>(simulated.peak_stage)].peak_at_bucket_cast;
  std::vector<PendingReductionPeak> one_figure;
  for (const PendingReductionPeak& p : r.walked) {
    one_figure.push_back({std::max(p.plateau_bytes, p.cast_bytes), 0});
  }
  r.simulated_full_sp =
      estimateMemory(r.sim.plan, kDefaultMemoryHeadroom, one_figure).peak_bytes;
  return r;
}

}  // namespace evsim::test_support

#pragma once
// The small simulation the trace, CSV and Chakra tests count by hand (trace_writer_test.cpp has
// the op counts per stage): the tiny GPT of test::model(64, 4, 256, 32, 512, 4, "fp16") (4 decoder
// blocks) as 2M2P2D, b = 1, B = 4 -> m = 2, GPipe, on 2 nodes x 4 GPUs. Costs: compute 1 us
// (measured), TP all-reduce 0.25 (measured), P2P 0.5 (estimated), DP all-reduce or bucket 3
// (derived): multiples of 0.25, so a 3-decimal trace is exact.

#include <set>
#include <utility>
#include <vector>

#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim::test {

// `dp_overlap`: gradient buckets beside the backward, one per layer on stage 0 and one for stage
// 1's whole chunk (Megatron buckets only pipeline rank 0's first chunk: plan/ddp_buckets.h).
inline Simulation handTracedSimulation(bool dp_overlap = false) {
  Strategy s;
  s.tp = 2;
  s.pp = 2;
  s.dp = 2;
  s.micro_batch = 1;
  s.global_batch = 4;
  s.schedule = Schedule::kGpipe;
  s.dp_overlap = dp_overlap;
  if (dp_overlap) s.dp_bucket_bytes = 1;  // every layer closes a bucket
  IterationPlan plan =
      buildIterationPlan(model(64, 4, 256, 32, 512, 4, "fp16"), cluster(4, 2, kSlowLinks), s);
  std::set<int> tp_ops, dp_ops;
  for (const StagePlan& st : plan.stages) {
    for (const OpList* ops : {&st.forward, &st.backward}) {
      for (const OpInstance& op : *ops) {
        if (op.stream == Stream::kTpComm) tp_ops.insert(op.event);
      }
    }
    if (st.dp_allreduce >= 0) dp_ops.insert(st.dp_allreduce);
    for (const GradBucket& b : st.dp_buckets) dp_ops.insert(b.event);
  }
  std::vector<EventCost> costs;
  for (int e = 0; e < plan.events.size(); ++e) {
    const UniqueEvent& u = plan.events[e];
    if (u.event.kind == EventKind::kCompute) {
      costs.push_back({1.0, Provenance::kMeasured});
    } else if (dp_ops.count(e)) {
      costs.push_back({3.0, Provenance::kDerived});
    } else if (tp_ops.count(e)) {
      costs.push_back({0.25, Provenance::kMeasured});
    } else {
      costs.push_back({0.5, Provenance::kEstimated});  // P2P
    }
  }
  return simulate(std::move(plan), std::move(costs));
}

}  // namespace evsim::test

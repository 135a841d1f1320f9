#include "events/strategy_space.h"

#include <fmt/format.h>

#include <set>
#include <tuple>

#include "events/iteration_plan.h"

namespace evsim {

namespace {

// Whether the interleaved schedule with v chunks per device can apply to (P, b, D) at all; the
// search skips the v values that cannot rather than listing them as invalid.
bool interleavedApplies(const ModelConfig& model, const Strategy& s, int v) {
  if (s.pp < 2 || int64_t{s.pp} * v > model.numLayers()) return false;
  const int64_t per_step = s.micro_batch * s.dp;
  if (per_step <= 0 || s.global_batch % per_step != 0) return true;  // invalid for another rule
  return s.microBatches() % s.pp == 0;
}

}  // namespace

std::vector<Candidate> enumerateCandidates(const ModelConfig& model, const ClusterConfig& cluster,
                                           const Strategy& base, const StrategySpace& space) {
  std::vector<Candidate> out;
  forEachCandidate(model, cluster, base, space,
                   [&](Candidate&& c) { out.push_back(std::move(c)); });
  return out;
}

void forEachCandidate(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                      const StrategySpace& space, const std::function<void(Candidate&&)>& visit) {
  auto add = [&](const Strategy& strategy) {
    for (Recompute rc : space.recomputes) {
      for (bool sp : space.sequence_parallel) {
        if (sp && strategy.tp < 2) continue;
        for (int zero : space.zero_stages) {
          if (zero > 0 && strategy.gradGroupSize() < 2) continue;
          for (bool overlap : space.dp_overlaps) {
            if (overlap && (strategy.gradGroupSize() < 2 || zero == 3)) continue;
            Candidate c;
            c.strategy = strategy;
            c.strategy.recompute = rc;
            c.strategy.sequence_parallel = sp;
            c.strategy.zero_stage = zero;
            c.strategy.dp_overlap = overlap;
            c.violation = strategyViolation(model, cluster, c.strategy);
            if (!c.violation && !space.allow_cross_node_tp) {
              c.violation = crossNodeTpViolation(cluster, c.strategy);
            }
            visit(std::move(c));
          }
        }
      }
    }
  };
  const int64_t experts = model.moe.num_experts;
  for (int64_t m = 1; m <= space.gpus; ++m) {
    if (space.gpus % m != 0) continue;
    for (int c : space.context_parallel) {
      if (c < 1 || (space.gpus / m) % c != 0) continue;
      if (c > 1 && !model.spec.flash_attention) continue;
      const int64_t pd = space.gpus / m / c;
      for (int64_t p = 1; p <= pd; ++p) {
        if (pd % p != 0) continue;
        const int64_t d = pd / p;
        for (int e : space.expert_parallel) {
          if (e < 1 || (e > 1 && (experts == 0 || d % e != 0 || experts % e != 0))) continue;
          for (int64_t b : space.micro_batches) {
            for (Schedule schedule : space.schedules) {
              Strategy s = base;
              s.tp = static_cast<int>(m);
              s.cp = c;
              s.pp = static_cast<int>(p);
              s.dp = static_cast<int>(d);
              s.ep = e;
              s.micro_batch = b;
              s.schedule = schedule;
              s.virtual_stages = 1;
              if (schedule != Schedule::kInterleaved) {
                add(s);
                continue;
              }
              for (int v : space.virtual_stages) {
                if (!interleavedApplies(model, s, v)) continue;
                s.virtual_stages = v;
                add(s);
              }
            }
          }
        }
      }
    }
  }
}

EventTable unionOfEvents(const ModelConfig& model, const ClusterConfig& cluster,
                         const Strategy& base, const StrategySpace& space) {
  EventTable all;
  // GPipe and DAPPLE share their events; the techniques change them (recomputation through the
  // stage partition, hence the gradient bytes), and so does the interleaved schedule (P*v chunks,
  // the wrap-around transfer): v is in the key, 1 for the other schedules.
  std::set<std::tuple<int, int, int, int, int, int64_t, int, bool, int, int>> seen;
  for (const Candidate& c : enumerateCandidates(model, cluster, base, space)) {
    if (c.violation) continue;
    const Strategy& s = c.strategy;
    if (!seen.insert({s.tp, s.cp, s.pp, s.dp, s.ep, s.micro_batch, static_cast<int>(s.recompute),
                      s.sequence_parallel, s.zero_stage, s.virtual_stages})
             .second) {
      continue;
    }
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    for (const UniqueEvent& e : plan.events.events()) all.addCount(all.intern(e.event), e.count);
  }
  return all;
}

}  // namespace evsim

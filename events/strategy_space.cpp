#include "events/strategy_space.h"

#include <set>
#include <tuple>

#include <fmt/format.h>

#include "events/iteration_plan.h"

namespace evsim {

std::vector<Candidate> enumerateCandidates(const ModelConfig& model, const ClusterConfig& cluster,
                                           const Strategy& base, const StrategySpace& space) {
  std::vector<Candidate> out;
  for (int64_t m = 1; m <= space.gpus; ++m) {
    if (space.gpus % m != 0) continue;
    for (int64_t p = 1; p <= space.gpus / m; ++p) {
      if ((space.gpus / m) % p != 0) continue;
      int64_t d = space.gpus / m / p;
      for (int64_t b : space.micro_batches) {
        for (Schedule schedule : space.schedules) {
          Candidate c;
          c.strategy = base;
          c.strategy.tp = static_cast<int>(m);
          c.strategy.pp = static_cast<int>(p);
          c.strategy.dp = static_cast<int>(d);
          c.strategy.micro_batch = b;
          c.strategy.schedule = schedule;
          c.violation = strategyViolation(model, cluster, c.strategy);
          if (!c.violation && !space.allow_cross_node_tp && cluster.gpus_per_node % m != 0) {
            c.violation = fmt::format(
                "--strategy {}: M={} does not divide the {} GPUs of a node (TP would cross nodes; "
                "--allow-cross-node-tp lifts this)",
                c.strategy.name(), m, cluster.gpus_per_node);
          }
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

EventTable unionOfEvents(const ModelConfig& model, const ClusterConfig& cluster,
                         const Strategy& base, const StrategySpace& space) {
  EventTable all;
  std::set<std::tuple<int, int, int, int64_t>> seen;  // schedules share their events
  for (const Candidate& c : enumerateCandidates(model, cluster, base, space)) {
    if (c.violation) continue;
    const Strategy& s = c.strategy;
    if (!seen.insert({s.tp, s.pp, s.dp, s.micro_batch}).second) continue;
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    for (const UniqueEvent& e : plan.events.events()) all.addCount(all.intern(e.event), e.count);
  }
  return all;
}

}  // namespace evsim

#include "profiler/modeled_cost.h"

#include "plan/iteration_plan.h"
#include "modeler/cost_model.h"
#include "modeler/simulation.h"

namespace evsim {

ModeledIterationCost modelIterationCost(const ModelConfig& model, const ClusterConfig& cluster,
                                        const std::vector<Strategy>& strategies,
                                        const ProfileDb& db) {
  ModeledIterationCost out;
  const CostModel cost_model(cluster, &db, /*analytic_fallback=*/false);
  for (const Strategy& strategy : strategies) {
    IterationPlan plan = buildIterationPlan(model, cluster, strategy);
    std::vector<EventCost> costs;
    costs.reserve(plan.events.size());
    bool covered = true;
    for (const UniqueEvent& u : plan.events.events()) {
      std::optional<EventCost> cost = cost_model.cost(u.event);
      if (!cost) {
        covered = false;
        break;
      }
      costs.push_back(*cost);
    }
    if (!covered) {
      ++out.not_covered;
      continue;
    }
    const double gpus = static_cast<double>(strategy.gpus());
    Simulation sim = simulate(std::move(plan), std::move(costs));
    out.device_s += sim.summary.iteration_us * 1e-6 * gpus;
    ++out.simulated;
  }
  return out;
}

}  // namespace evsim

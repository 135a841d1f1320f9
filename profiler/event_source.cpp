#include "profiler/event_source.h"

#include <set>

#include "common/error.h"
#include "events/event_file.h"
#include "plan/iteration_plan.h"

namespace evsim {

namespace {
std::vector<Event> eventsOf(const std::vector<UniqueEvent>& table) {
  std::vector<Event> out;
  for (const UniqueEvent& u : table) out.push_back(u.event);
  return uniqueEvents(out);
}
}  // namespace

std::vector<Event> eventsFromFile(const std::string& path) {
  return eventsOf(loadEventsFile(path));
}

std::vector<Event> eventsForStrategy(const ModelConfig& model, const ClusterConfig& cluster,
                                     const Strategy& strategy) {
  return eventsOf(buildIterationPlan(model, cluster, strategy).events.events());
}

std::vector<Event> eventsForGpus(const ModelConfig& model, const ClusterConfig& cluster,
                                 const Strategy& base, const StrategySpace& space) {
  EventTable table = unionOfEvents(model, cluster, base, space);
  if (table.size() == 0) {
    EVSIM_THROW(InputError, "--gpus {}: no valid strategy for {} on {} (global batch {})",
                space.gpus, model.name, cluster.name, base.global_batch);
  }
  return eventsOf(table.events());
}

std::vector<Event> uniqueEvents(const std::vector<Event>& events) {
  std::vector<Event> out;
  std::set<std::string> seen;
  for (const Event& e : events) {
    if (seen.insert(e.signature()).second) out.push_back(e);
  }
  return out;
}

}  // namespace evsim

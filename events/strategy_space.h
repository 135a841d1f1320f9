#pragma once
// Every xMxPxD strategy for N GPUs (x micro-batch x schedule), each valid or with the rule it
// breaks. Shared by `eventsim search` and by the union of events one profiling run must cover.

#include <optional>
#include <string>
#include <vector>

#include "events/cluster_config.h"
#include "events/event_table.h"
#include "events/model_config.h"
#include "events/strategy.h"

namespace evsim {

struct Candidate {
  Strategy strategy;
  std::optional<std::string> violation;  // the rule it breaks; nullopt when valid
};

struct StrategySpace {
  int64_t gpus = 0;
  std::vector<int64_t> micro_batches;
  std::vector<Schedule> schedules;
  bool allow_cross_node_tp = false;  // by default M divides the GPUs of a node
};

// All (M, P, D) with M*P*D == gpus, in order of M, then P; `base` gives the global batch and the
// other options. Invalid candidates carry their violation.
std::vector<Candidate> enumerateCandidates(const ModelConfig& model, const ClusterConfig& cluster,
                                           const Strategy& base, const StrategySpace& space);

// The union of the unique events of every valid candidate; `count` sums over candidates that
// differ in events (schedules share events and count once).
EventTable unionOfEvents(const ModelConfig& model, const ClusterConfig& cluster,
                         const Strategy& base, const StrategySpace& space);

}  // namespace evsim

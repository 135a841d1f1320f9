#pragma once
// What running the profiled strategies would cost, so eventprof's summary can put its own cost in
// proportion (DistSim reports profiling at 13% of the GPU time of running the candidates): one
// iteration of each strategy covered, simulated by the modeler from the profile just written, in
// device-seconds (iteration time x GPUs of the strategy), summed over the strategies.

#include <cstddef>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"
#include "io/profile_db.h"

namespace evsim {

struct ModeledIterationCost {
  double device_s = 0;     // sum over the simulated strategies
  size_t simulated = 0;    // strategies every event of which the profile covers
  size_t not_covered = 0;  // strategies skipped: an event is missing from the profile
};

// Simulates one iteration of each strategy from `db` alone (measured or derived costs, never
// estimated). Strategies that fail validation are the caller's bug and throw.
ModeledIterationCost modelIterationCost(const ModelConfig& model, const ClusterConfig& cluster,
                                        const std::vector<Strategy>& strategies,
                                        const ProfileDb& db);

}  // namespace evsim

#pragma once
// Iteration-to-iteration variability (--jitter, --iterations) and the critical path: which device
// stages, hence which ranks, an iteration's time runs through. Reported by `eventsim simulate`
// when stragglers or jitter are asked for (summary JSON key "variability", docs/JSON.md).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "modeler/simulation.h"

namespace evsim {

// One device stage of one pipeline class.
struct StageRef {
  int pipeline = 0;
  int stage = 0;
  bool operator==(const StageRef&) const = default;
  auto operator<=>(const StageRef&) const = default;
};

// The device stages the longest chain of the iteration passes through, walked back from the
// device that ends last: the optimizer step, the DP collective it waited for (to the class whose
// stage finished last), then each task to whichever held it back (its transfer input when that
// arrived after the device was free, else the device's previous task). Sorted, unique.
std::vector<StageRef> criticalPath(const IterationTimeline& timeline);

// World ranks of a stage of a class: its TP ranks in each of the class's replicas, ascending.
std::vector<int64_t> stageRanks(const IterationPlan& plan, StageRef stage);

struct CriticalShare {
  StageRef stage;
  double share = 0;  // of the sampled iterations whose critical path runs through it
};

struct IterationDistribution {
  int iterations = 0;
  double jitter = 0;
  uint64_t seed = 0;
  std::vector<double> iteration_us;  // ascending
  double p50_us = 0, p90_us = 0, p99_us = 0, mean_us = 0;
  std::vector<CriticalShare> critical;  // by stage
};

// `iterations` timings of `sim`'s input (its stragglers included) with per-op jitter `jitter`
// (TaskJitter), iteration i seeded from (seed, i). Percentiles by nearest rank.
IterationDistribution sampleIterations(const Simulation& sim, double jitter, uint64_t seed,
                                       int iterations);

// "0-3,8-11"
std::string rankRanges(const std::vector<int64_t>& sorted_ranks);

nlohmann::json variabilityJson(const Simulation& sim, const IterationDistribution& d);
std::string variabilityText(const Simulation& sim, const IterationDistribution& d);

}  // namespace evsim

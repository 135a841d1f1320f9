#pragma once
// Measured runs (measured_runs.h) turned into iteration plans once, so that a fit can re-cost and
// re-time all of them for each candidate set of device parameters without rebuilding anything.
// Each run is a Megatron GPT: `layers` decoder blocks with an embedding and an LM head, ffn = 4h,
// the settings below for what the CSV does not say.

#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "plan/iteration_plan.h"
#include "modeler/calibration/measured_runs.h"

namespace evsim {

struct RunSettings {
  DType dtype = DType::kFp16;
  int64_t vocab = 50257;
  Schedule schedule = Schedule::kDapple;
  Recompute recompute = Recompute::kFull;
};

struct PlannedRun {
  MeasuredRun run;
  IterationPlan plan;
};

class RunSet {
 public:
  // Builds every run's plan on `cluster`. Runs the planner refuses (an impossible strategy) are
  // kept aside with the reason, not fitted.
  RunSet(const std::vector<MeasuredRun>& runs, const ClusterConfig& cluster,
         const RunSettings& settings);

  // Predicted iteration time (ms) of every planned run on `cluster` (whose device model is the
  // candidate), by the device model alone. Uses up to `threads` threads.
  std::vector<double> predictMs(const ClusterConfig& cluster, int threads) const;

  const std::vector<PlannedRun>& planned() const { return planned_; }
  // Runs not planned, with why.
  const std::vector<std::pair<MeasuredRun, std::string>>& skipped() const { return skipped_; }

 private:
  std::vector<PlannedRun> planned_;
  std::vector<std::pair<MeasuredRun, std::string>> skipped_;
};

// One run's iteration time (µs) on `cluster` by the device model alone.
double predictIterationUs(const IterationPlan& plan, const ClusterConfig& cluster);

}  // namespace evsim

#pragma once
// Accuracy of a predicted timeline against a measured one (`eventsim compare`), as DistSim
// evaluates it:
//
// - iteration-time error: (pred - meas) / meas * 100, iteration = last end - first start of a file;
// - per-device activity error (§5.3): rows are matched by key (rank, stream, phase, micro-batch,
//   layer, op, k-th occurrence of that key in time order); per rank, the mean over its events of
//   (|Δstart| + |Δend|) / 2, with times relative to each file's own first start, as a percentage of
//   the measured iteration time;
// - per-stage, per-micro-batch start and finish error (§5.4): for stage s, micro-batch i, phase
//   forward or backward, start = min start and finish = max end of that task's rows over the
//   stage's ranks (all streams), relative to each file's first start; |Δ| as % of the measured
//   iteration time;
// - for a set of strategies: whether ordering by predicted iteration time matches ordering by
//   measured iteration time, and Kendall's tau-b of the two.
//
// Rows of one file with no partner in the other mean the files describe different runs: InputError
// naming the file that lacks them and the first few keys.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "modeler/timeline_csv.h"

namespace evsim {

struct DeviceActivityError {
  int32_t rank = 0;
  int64_t events = 0;
  double error_pct = 0;  // mean (|Δstart| + |Δend|) / 2 over the rank's events, % of measured iter
};

struct StageTaskError {
  int32_t stage = 0;
  int32_t micro_batch = 0;
  Phase phase = Phase::kForward;  // kForward or kBackward
  // Relative to each file's first start, µs.
  double predicted_start_us = 0, measured_start_us = 0;
  double predicted_finish_us = 0, measured_finish_us = 0;
  double start_error_pct = 0;   // |Δstart| % of measured iteration
  double finish_error_pct = 0;  // |Δfinish| % of measured iteration
};

struct MaxMean {
  double max = 0;
  double mean = 0;
};

struct PairComparison {
  int64_t matched_events = 0;
  double predicted_iteration_us = 0;
  double measured_iteration_us = 0;
  double iteration_error_pct = 0;  // signed: positive when the prediction is slower

  std::vector<DeviceActivityError> devices;  // by rank
  double device_error_pct_max = 0;
  int32_t device_error_max_rank = 0;
  double device_error_pct_mean = 0;  // mean over ranks

  std::vector<StageTaskError> tasks;  // by stage, phase (forward first), micro-batch
  MaxMean start_error_pct;
  MaxMean finish_error_pct;
  MaxMean task_error_pct;  // over starts and finishes together
};

// Compares two timelines read with the same NameTable. Throws InputError when rows or stage tasks
// do not match, or when the measured iteration time is not positive.
PairComparison compareTimelines(const Timeline& predicted, const Timeline& measured,
                                const NameTable& names);

struct RankingComparison {
  // No pair of strategies ordered one way by the prediction and the other way by the measurement
  // (a tie on either side does not count against it).
  bool preserved = true;
  std::optional<double> kendall_tau;    // tau-b; absent with fewer than 2 entries or all ties
  std::vector<size_t> predicted_order;  // indices, fastest first
  std::vector<size_t> measured_order;
};

// Two measured times within `tie_pct` percent of the smaller are a tie: strategies closer than the
// run-to-run spread of the measurement cannot be ordered by it. Predictions tie only when equal.
RankingComparison compareRankings(const std::vector<double>& predicted_us,
                                  const std::vector<double>& measured_us, double tie_pct = 0);

}  // namespace evsim

#pragma once
// Fits an NCCL all-reduce curve (config/device_config.h, CollectiveCurve) to measured times of one
// group inside one node — nccl-tests' all_reduce_perf, or the records `eventsim
// import-nccl-tests` put in a profile database. Five parameters: the floor, and latency and bus
// bandwidth of each of the two protocols. Minimises the mean squared log error first, then the
// L8 norm of the log errors (close to the worst point's error), from a few starting points.

#include <cstdint>
#include <string>
#include <vector>

#include "config/device_config.h"

namespace evsim {

struct CollectivePoint {
  int64_t bytes = 0;
  double time_us = 0;
};

struct CollectiveFit {
  CollectiveCurve curve;
  double mean_abs_error_pct = 0;
  double max_abs_error_pct = 0;
  int points = 0;
};

// Needs >= 5 points of distinct sizes; throws InputError naming `what` otherwise.
CollectiveFit fitAllReduceCurve(int group, const std::vector<CollectivePoint>& points,
                                const std::string& what);

}  // namespace evsim

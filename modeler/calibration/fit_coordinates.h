#pragma once
// The device model's compute and host parameters as the coordinates a Nelder-Mead search moves:
// efficiencies through a logistic transform (kept in (0, 1)), the rest in log space (kept > 0).
// Shared by the fit to measured iterations (compute_fit.h) and to measured kernels (kernel_fit.h).

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "events/device_config.h"
#include "modeler/calibration/nelder_mead.h"

namespace evsim::fit_coordinates {

struct Coordinate {
  SourcedValue DeviceModelParams::*param;
  bool fraction;  // logistic (0, 1) rather than log (0, inf)
};

// Kernel parameters first, then the host's: a kernel fit moves the first kKernelCount.
inline constexpr Coordinate kAll[] = {
    {&DeviceModelParams::gemm_efficiency, true},
    {&DeviceModelParams::gemm_tile_overhead_k, false},
    {&DeviceModelParams::gemm_kernel_us, false},
    {&DeviceModelParams::memory_efficiency, true},
    {&DeviceModelParams::memory_kernel_us, false},
    {&DeviceModelParams::host_op_us, false},
};
inline constexpr size_t kKernelCount = 5;

// Where a parameter starts when the starting model has it at 0 (log space cannot hold 0).
inline constexpr double kSmallestStart = 0.1;

inline std::vector<double> toCoordinates(const DeviceModelParams& p,
                                         std::span<const Coordinate> coordinates) {
  std::vector<double> x;
  for (const Coordinate& c : coordinates) {
    const double v = (p.*c.param).value;
    x.push_back(c.fraction ? std::log(std::clamp(v, 0.05, 0.95) / (1 - std::clamp(v, 0.05, 0.95)))
                           : std::log(std::max(v, kSmallestStart)));
  }
  return x;
}

inline void setFromCoordinates(const std::vector<double>& x,
                               std::span<const Coordinate> coordinates, DeviceModelParams& p) {
  for (size_t i = 0; i < x.size(); ++i) {
    const Coordinate& c = coordinates[i];
    (p.*c.param).value = c.fraction ? 1.0 / (1.0 + std::exp(-x[i])) : std::exp(x[i]);
  }
}

// Minimizes `mean_squared_log_error(x)` + prior_weight * |x - start|^2 by Nelder-Mead from `start`,
// then once more from the optimum (a restart escapes a collapsed simplex). The weak prior keeps
// parameters the data cannot tell apart (a GEMM efficiency in host-bound runs) at physical values
// instead of drifting to a bound. Returns the best coordinates; adds the evaluations used.
template <typename Error>
std::vector<double> minimizeWithPrior(Error&& mean_squared_log_error,
                                      const std::vector<double>& start, double prior_weight,
                                      int max_evaluations, double tolerance, int& evaluations) {
  auto objective = [&](const std::vector<double>& x) {
    double prior = 0;
    for (size_t i = 0; i < x.size(); ++i) prior += (x[i] - start[i]) * (x[i] - start[i]);
    return mean_squared_log_error(x) + prior_weight * prior;
  };
  const std::vector<double> step(start.size(), 0.5);
  MinimizeResult r = minimizeNelderMead(objective, start, step, max_evaluations, tolerance);
  MinimizeResult again = minimizeNelderMead(objective, r.x, step, max_evaluations / 2, tolerance);
  evaluations += r.evaluations + again.evaluations;
  return again.value <= r.value ? again.x : r.x;
}

}  // namespace evsim::fit_coordinates

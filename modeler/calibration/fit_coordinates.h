#pragma once
// The device model's compute and host parameters as the coordinates a Nelder-Mead search moves:
// efficiencies through a logistic transform (kept in (0, 1)), the rest in log space (kept > 0).
// Shared by the fit to measured iterations (compute_fit.h) and to measured kernels (kernel_fit.h).

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "config/device_config.h"
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

inline double toLogit(double fraction) {
  const double f = std::clamp(fraction, 0.05, 0.95);
  return std::log(f / (1 - f));
}
inline double fromLogit(double x) { return 1.0 / (1.0 + std::exp(-x)); }

inline std::vector<double> toCoordinates(const DeviceModelParams& p,
                                         std::span<const Coordinate> coordinates) {
  std::vector<double> x;
  for (const Coordinate& c : coordinates) {
    const double v = (p.*c.param).value;
    x.push_back(c.fraction ? toLogit(v) : std::log(std::max(v, kSmallestStart)));
  }
  return x;
}

// Reads the first coordinates.size() entries of x.
inline void setFromCoordinates(const std::vector<double>& x,
                               std::span<const Coordinate> coordinates, DeviceModelParams& p) {
  for (size_t i = 0; i < coordinates.size(); ++i) {
    const Coordinate& c = coordinates[i];
    (p.*c.param).value = c.fraction ? fromLogit(x[i]) : std::exp(x[i]);
  }
}

// Minimizes `mean_squared_log_error(x)` + prior_weight * |x - prior_center|^2 by Nelder-Mead from
// `start`, then once more from the optimum (a restart escapes a collapsed simplex). The weak prior
// keeps parameters the data cannot tell apart (a GEMM efficiency in host-bound runs) at physical
// values instead of drifting to a bound. Returns the best coordinates; adds the evaluations used.
template <typename Error>
std::vector<double> minimizeWithPrior(Error&& mean_squared_log_error,
                                      const std::vector<double>& start,
                                      const std::vector<double>& prior_center, double prior_weight,
                                      int max_evaluations, double tolerance, int& evaluations) {
  auto objective = [&](const std::vector<double>& x) {
    double prior = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      prior += (x[i] - prior_center[i]) * (x[i] - prior_center[i]);
    }
    return mean_squared_log_error(x) + prior_weight * prior;
  };
  const std::vector<double> step(start.size(), 0.5);
  MinimizeResult r = minimizeNelderMead(objective, start, step, max_evaluations, tolerance);
  MinimizeResult again = minimizeNelderMead(objective, r.x, step, max_evaluations / 2, tolerance);
  evaluations += r.evaluations + again.evaluations;
  return again.value <= r.value ? again.x : r.x;
}

// Minimizes a function of one variable on [lo, hi] by golden-section search (it must be unimodal
// there); `iterations` narrow the bracket by 0.618 each.
template <typename F>
double goldenSection(F&& f, double lo, double hi, int iterations) {
  const double r = (std::sqrt(5.0) - 1) / 2;
  double a = hi - r * (hi - lo), b = lo + r * (hi - lo);
  double fa = f(a), fb = f(b);
  for (int i = 0; i < iterations; ++i) {
    if (fa < fb) {
      hi = b, b = a, fb = fa;
      a = hi - r * (hi - lo), fa = f(a);
    } else {
      lo = a, a = b, fa = fb;
      b = lo + r * (hi - lo), fb = f(b);
    }
  }
  return fa < fb ? a : b;
}

}  // namespace evsim::fit_coordinates

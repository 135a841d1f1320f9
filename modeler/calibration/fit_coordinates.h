#pragma once
// The device model's compute and host parameters as the coordinates a Nelder-Mead search moves:
// efficiencies through a logistic transform (kept in (0, 1)), the rest in log space (kept > 0).
// Shared by the fit to measured iterations (compute_fit.h) and to measured kernels (kernel_fit.h).

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "events/device_config.h"

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

}  // namespace evsim::fit_coordinates

#pragma once
// Derivative-free minimisation (Nelder-Mead simplex, with the standard coefficients: reflection 1,
// expansion 2, contraction 1/2, shrink 1/2). The fits of the device model are small (<= 8
// parameters) and their objectives are not smooth (max/min of protocols, wave quantization), so
// a simplex search suits them better than gradients. Deterministic.

#include <functional>
#include <vector>

namespace evsim {

struct MinimizeResult {
  std::vector<double> x;
  double value = 0;
  int evaluations = 0;
};

// Minimises `f` from `start`; `step` is the initial simplex edge per coordinate. Stops after
// `max_evaluations` or when the simplex values differ by less than `tolerance`.
MinimizeResult minimizeNelderMead(const std::function<double(const std::vector<double>&)>& f,
                                  std::vector<double> start, const std::vector<double>& step,
                                  int max_evaluations, double tolerance = 1e-10);

}  // namespace evsim

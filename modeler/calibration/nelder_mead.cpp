#include "modeler/calibration/nelder_mead.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace evsim {

MinimizeResult minimizeNelderMead(const std::function<double(const std::vector<double>&)>& f,
                                  std::vector<double> start, const std::vector<double>& step,
                                  int max_evaluations, double tolerance) {
  const size_t n = start.size();
  EVSIM_CHECK(n > 0 && step.size() == n, "{} steps for {} parameters", step.size(), n);
  int evaluations = 0;
  auto eval = [&](const std::vector<double>& x) {
    ++evaluations;
    double v = f(x);
    return std::isfinite(v) ? v : std::numeric_limits<double>::max();
  };
  std::vector<std::vector<double>> simplex(n + 1, start);
  for (size_t i = 0; i < n; ++i) simplex[i + 1][i] += step[i];
  std::vector<double> values(n + 1);
  for (size_t i = 0; i <= n; ++i) values[i] = eval(simplex[i]);

  std::vector<size_t> order(n + 1);
  auto point = [&](const std::vector<double>& centroid, const std::vector<double>& worst,
                   double t) {
    std::vector<double> p(n);
    for (size_t j = 0; j < n; ++j) p[j] = centroid[j] + t * (worst[j] - centroid[j]);
    return p;
  };
  while (evaluations < max_evaluations) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return values[a] < values[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (std::abs(values[worst] - values[best]) <= tolerance * (1 + std::abs(values[best]))) break;
    std::vector<double> centroid(n, 0.0);
    for (size_t i : order) {
      if (i == worst) continue;
      for (size_t j = 0; j < n; ++j) centroid[j] += simplex[i][j] / double(n);
    }
    std::vector<double> reflected = point(centroid, simplex[worst], -1.0);
    double fr = eval(reflected);
    if (fr < values[best]) {
      std::vector<double> expanded = point(centroid, simplex[worst], -2.0);
      double fe = eval(expanded);
      if (fe < fr) {
        simplex[worst] = expanded, values[worst] = fe;
      } else {
        simplex[worst] = reflected, values[worst] = fr;
      }
      continue;
    }
    if (fr < values[second]) {
      simplex[worst] = reflected, values[worst] = fr;
      continue;
    }
    // Contract towards the better of the worst point and its reflection.
    const bool outside = fr < values[worst];
    std::vector<double> contracted = point(centroid, outside ? reflected : simplex[worst], 0.5);
    double fc = eval(contracted);
    if (fc < std::min(fr, values[worst])) {
      simplex[worst] = contracted, values[worst] = fc;
      continue;
    }
    for (size_t i : order) {
      if (i == best) continue;
      for (size_t j = 0; j < n; ++j)
        simplex[i][j] = simplex[best][j] + 0.5 * (simplex[i][j] - simplex[best][j]);
      values[i] = eval(simplex[i]);
    }
  }
  size_t best = std::min_element(values.begin(), values.end()) - values.begin();
  return MinimizeResult{simplex[best], values[best], evaluations};
}

}  // namespace evsim

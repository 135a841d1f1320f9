#include "plan/stage_partition.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace evsim {

std::vector<int> partitionLayers(const std::vector<double>& block_cost, double first_stage_extra,
                                 double last_stage_extra, int stages) {
  const int n = static_cast<int>(block_cost.size());
  EVSIM_CHECK(stages >= 1 && stages <= n, "{} stages for {} blocks", stages, n);
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + block_cost[i];
  auto stageCost = [&](int first, int end, int stage) {
    double cost = prefix[end] - prefix[first];
    if (stage == 0) cost += first_stage_extra;
    if (stage == stages - 1) cost += last_stage_extra;
    return cost;
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][i]: smallest achievable max cost putting blocks [0, i) into stages [0, k).
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> split(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0.0;
  // least[j]: the smallest best[k - 1][j'] for j' >= j. A split at j' costs at least
  // best[k - 1][j'], so once least[j] reaches what would improve best[k][i], no later j can: the
  // scan stops there with the same result as a full one.
  std::vector<double> least(n + 2, kInf);
  for (int k = 1; k <= stages; ++k) {
    for (int j = n; j >= 0; --j) least[j] = std::min(best[k - 1][j], least[j + 1]);
    for (int i = k; i <= n - (stages - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        if (least[j] >= best[k][i] * (1 - 1e-12)) break;
        if (best[k - 1][j] == kInf) continue;
        double candidate = std::max(best[k - 1][j], stageCost(j, i, k - 1));
        // Relative tolerance so float noise does not break ties between equal splits.
        if (candidate < best[k][i] * (1 - 1e-12)) {
          best[k][i] = candidate;
          split[k][i] = j;
        }
      }
    }
  }
  std::vector<int> first(stages);
  int end = n;
  for (int k = stages; k >= 1; --k) {
    first[k - 1] = split[k][end];
    end = split[k][end];
  }
  return first;
}

}  // namespace evsim

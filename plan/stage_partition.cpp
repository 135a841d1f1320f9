#include "plan/stage_partition.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace evsim {

// The dynamic programme over (stages k, blocks i) picks, for each (k, i), the split j that
// minimises max(best[k-1][j], cost of blocks [j, i) as stage k-1), the earliest j on ties. Scanning
// every j made it O(P x L^2) (a 41,288-block model took 30 s at P = 16, issue 33). Here best[k-1]
// is nondecreasing in j and the stage cost nonincreasing, so the value is falling while the stage
// cost dominates and rising after: the scan starts just before the crossing (found by a pointer
// that only moves forward as i grows) and stops just after it, O(P x L) in all, with the same
// result as the full scan, tolerance and ties included (tests/plan/stage_partition_test.cpp
// compares it with the full scan).
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
  // Relative tolerance so float noise does not break ties between equal splits.
  constexpr double kKeep = 1 - 1e-12;
  // prev[j] = best[k - 1][j], cur[i] = best[k][i]: the smallest achievable max cost putting blocks
  // [0, i) into stages [0, k). split[k][i] for i in [k, k + width) only (each stage holds a block).
  std::vector<double> prev(n + 1, kInf), cur(n + 1, kInf);
  prev[0] = 0.0;
  const int width = n - stages + 1;
  std::vector<int> split(static_cast<size_t>(stages + 1) * width, 0);
  auto splitAt = [&](int k, int i) -> int& {
    return split[static_cast<size_t>(k) * width + (i - k)];
  };
  // least[j]: the smallest best[k - 1][j'] for j' >= j. A split at j' costs at least
  // best[k - 1][j'], so once least[j] reaches what would improve best[k][i], no later j can.
  std::vector<double> least(n + 2, kInf);
  for (int k = 1; k <= stages; ++k) {
    std::fill(cur.begin(), cur.end(), kInf);
    for (int j = n; j >= 0; --j) least[j] = std::min(prev[j], least[j + 1]);
    auto value = [&](int j, int i) { return std::max(prev[j], stageCost(j, i, k - 1)); };
    // crossing: the first j >= k - 1 where best[k - 1][j] reaches the stage cost of [j, i) (up to
    // the tolerance), or i - 1. Before it the value is the stage cost, falling as j grows; it only
    // moves forward as i grows (the stage cost of [j, i) grows with i).
    int crossing = k - 1;
    for (int i = k; i <= n - (stages - k); ++i) {
      while (crossing < i - 1 && prev[crossing] < stageCost(crossing, i, k - 1) * kKeep) {
        ++crossing;
      }
      // The full scan reaches `start` with a best no lower than the value just before it, so it
      // takes `start` whenever the value fell by more than the tolerance there; walk back over
      // steps within the tolerance (blocks of ~0 cost) so that holds.
      int start = std::max(k - 1, crossing - 1);
      while (start > k - 1 && !(value(start, i) < value(start - 1, i) * kKeep)) --start;
      double& best = cur[i];
      for (int j = start; j < i; ++j) {
        if (least[j] >= best * kKeep) break;
        if (prev[j] == kInf) continue;
        const double candidate = value(j, i);
        if (candidate < best * kKeep) {
          best = candidate;
          splitAt(k, i) = j;
        }
      }
    }
    std::swap(prev, cur);
  }
  std::vector<int> first(stages);
  int end = n;
  for (int k = stages; k >= 1; --k) {
    first[k - 1] = splitAt(k, end);
    end = first[k - 1];
  }
  return first;
}

}  // namespace evsim

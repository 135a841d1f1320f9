// The start order of link sharing's flows; sharing_flows.h.
#include "modeler/network/sharing_flows.h"

#include <algorithm>

namespace evsim::sharing {

std::vector<int> startOrder(const FlowList& flows, std::vector<double>& end_us) {
  std::vector<int> keys, merged;  // the caller's indices (their starts read from `flows`)
  std::vector<size_t> runs;       // where each run of rising start times begins, then the end
  keys.reserve(flows.size());
  double last_start_us = 0;
  for (size_t f = 0; f < flows.size(); ++f) {
    const FlowList::Shape& shape = flows.shape(flows.shapeOf(f));
    const double start_us = flows.startUs(f);
    end_us[f] = start_us + shape.duration_us;
    if (!shares(shape)) continue;
    if (keys.empty() || start_us < last_start_us) runs.push_back(keys.size());
    keys.push_back(static_cast<int>(f));
    last_start_us = start_us;
  }
  runs.push_back(keys.size());
  merged.resize(keys.size());
  auto earlier = [&](int a, int b) {
    return flows.startUs(static_cast<size_t>(a)) < flows.startUs(static_cast<size_t>(b));
  };
  while (runs.size() > 2) {
    std::vector<size_t> joined;
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      joined.push_back(runs[r]);
      const size_t mid = runs[r + 1], end = r + 2 < runs.size() ? runs[r + 2] : mid;
      std::merge(keys.begin() + runs[r], keys.begin() + mid, keys.begin() + mid, keys.begin() + end,
                 merged.begin() + runs[r], earlier);
    }
    joined.push_back(keys.size());
    keys.swap(merged);
    runs = std::move(joined);
  }
  return keys;
}

}  // namespace evsim::sharing

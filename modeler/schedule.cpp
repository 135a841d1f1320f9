#include "modeler/schedule.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages, int64_t micro_batches) {
  EVSIM_CHECK(stage >= 0 && stage < stages && micro_batches > 0, "stage {} of {}, m={}", stage,
              stages, micro_batches);
  const int m = static_cast<int>(micro_batches);
  std::vector<StageTask> order;
  order.reserve(2 * static_cast<size_t>(m));
  if (schedule == Schedule::kGpipe) {
    for (int i = 0; i < m; ++i) order.push_back({Phase::kForward, i});
    for (int i = 0; i < m; ++i) order.push_back({Phase::kBackward, i});
    return order;
  }
  const int warmup = std::min(stages - stage - 1, m);
  for (int i = 0; i < warmup; ++i) order.push_back({Phase::kForward, i});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({Phase::kForward, warmup + i});
    order.push_back({Phase::kBackward, i});
  }
  for (int i = m - warmup; i < m; ++i) order.push_back({Phase::kBackward, i});
  return order;
}

int peakActivationsInFlight(const std::vector<StageTask>& order) {
  int in_flight = 0, peak = 0;
  for (const StageTask& t : order) {
    in_flight += t.phase == Phase::kForward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  return peak;
}

}  // namespace evsim

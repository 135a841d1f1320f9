// DAPPLE / Megatron's 1F1B (Fan et al. 2021; Narayanan et al. 2021): stage s of P runs
// w = min(P-s-1, m) warm-up forwards, then alternates one forward and one backward
// (F(w) B0 F(w+1) B1 ...), then drains the remaining backwards. At most min(P-s, m) micro-batches
// are in flight.
#include <algorithm>

#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class OneFOneB final : public PipelineSchedule {
 public:
  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    const int m = static_cast<int>(shape.micro_batches);
    const int warmup = std::min(shape.stages - device - 1, m);
    std::vector<StageTask> order;
    order.reserve(2 * static_cast<size_t>(m));
    for (int i = 0; i < warmup; ++i) order.push_back({Phase::kForward, i});
    for (int i = 0; i < m - warmup; ++i) {
      order.push_back({Phase::kForward, warmup + i});
      order.push_back({Phase::kBackward, i});
    }
    for (int i = m - warmup; i < m; ++i) order.push_back({Phase::kBackward, i});
    return order;
  }
};

}  // namespace

const PipelineSchedule& oneFOneBSchedule() {
  static const OneFOneB schedule;
  return schedule;
}

}  // namespace evsim

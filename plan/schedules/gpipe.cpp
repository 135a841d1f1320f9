// GPipe (Huang et al. 2019): every device runs all its forwards, then all its backwards.
//   F0 F1 ... F(m-1) B0 B1 ... B(m-1)
#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class Gpipe final : public PipelineSchedule {
 public:
  std::vector<StageTask> deviceOrder(int /*device*/, const PipelineShape& shape) const override {
    const int m = static_cast<int>(shape.micro_batches);
    std::vector<StageTask> order;
    order.reserve(2 * static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) order.push_back({Phase::kForward, i});
    for (int i = 0; i < m; ++i) order.push_back({Phase::kBackward, i});
    return order;
  }
};

}  // namespace

const PipelineSchedule& gpipeSchedule() {
  static const Gpipe schedule;
  return schedule;
}

}  // namespace evsim

// Megatron-LM's forward_backward_pipelining_with_interleaving (virtual pipeline, Narayanan et al.
// 2021) with microbatch_group_size_per_vp_stage = P. Each device holds v model chunks and runs m*v
// forward and m*v backward micro-steps; forward micro-step k runs micro-batch
// (k / (P*v)) * P + k % P of chunk (k % (P*v)) / P, backward micro-step k the same micro-batch of
// chunk v-1-(k % (P*v)) / P. Stage s runs w = min((P-s-1)*2 + (v-1)*P, m*v) warm-up forwards,
// then 1F1B (forward micro-step w+i, backward micro-step i), then the remaining backwards. Needs
// m % P == 0 (validated with the strategy).
#include <algorithm>

#include "common/error.h"
#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class Interleaved final : public PipelineSchedule {
 public:
  bool allowsChunks() const override { return true; }

  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    const int P = shape.stages;
    const int v = shape.chunks;
    const int m = static_cast<int>(shape.micro_batches);
    EVSIM_CHECK(v >= 1 && m % P == 0, "interleaved schedule: v={}, m={} not a multiple of P={}", v,
                m, P);
    const int total = m * v;
    auto forwardStep = [&](int k) {
      return StageTask{Phase::kForward, (k / (P * v)) * P + k % P, (k % (P * v)) / P};
    };
    auto backwardStep = [&](int k) {
      return StageTask{Phase::kBackward, (k / (P * v)) * P + k % P, v - 1 - (k % (P * v)) / P};
    };
    const int warmup = std::min((P - device - 1) * 2 + (v - 1) * P, total);
    std::vector<StageTask> order;
    order.reserve(2 * static_cast<size_t>(total));
    for (int k = 0; k < warmup; ++k) order.push_back(forwardStep(k));
    for (int i = 0; i < total - warmup; ++i) {
      order.push_back(forwardStep(warmup + i));
      order.push_back(backwardStep(i));
    }
    for (int k = total - warmup; k < total; ++k) order.push_back(backwardStep(k));
    return order;
  }
};

}  // namespace

const PipelineSchedule& interleavedSchedule() {
  static const Interleaved schedule;
  return schedule;
}

}  // namespace evsim

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24, section 3.1): 1F1B with each
// backward split into B (input gradient, sent upstream at once) and W (weight gradient), the W's
// deferred. Stage s of P keeps 1F1B's w = P-s-1 warm-up forwards and delays its W's by s
// micro-batches, so that every stage holds at most P micro-batches' activations (1F1B's peak, now
// on every stage) and the deferred W's fill the cooldown:
//   F0 .. F(w-1), then for j = 0 .. m-1: F(w+j) (while forwards remain), B(j), W(j-s) (j >= s),
//   then W(m-s) .. W(m-1).
// With F, B, W taking T_F, T_B, T_W on every stage and free transfers the iteration is
// m(T_F + T_B + T_W) + (P-1)(T_F + T_B - T_W), against 1F1B's (P-1)(T_F + T_B + T_W) bubble.
// Needs m >= P (validated with the strategy).
#include "common/error.h"
#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class ZbH1 final : public PipelineSchedule {
 public:
  bool splitsBackward() const override { return true; }

  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    const int P = shape.stages;
    const int m = static_cast<int>(shape.micro_batches);
    EVSIM_CHECK(m >= P, "zbh1 schedule: m={} micro-batches < P={}", m, P);
    const int warmup = P - device - 1;
    std::vector<StageTask> order;
    order.reserve(3 * static_cast<size_t>(m));
    for (int i = 0; i < warmup; ++i) order.push_back({Phase::kForward, i});
    for (int j = 0; j < m; ++j) {
      if (warmup + j < m) order.push_back({Phase::kForward, warmup + j});
      order.push_back({Phase::kBackward, j});
      if (j >= device) order.push_back({Phase::kWeightGrad, j - device});
    }
    for (int j = m - device; j < m; ++j) order.push_back({Phase::kWeightGrad, j});
    return order;
  }
};

}  // namespace

const PipelineSchedule& zbH1Schedule() {
  static const ZbH1 schedule;
  return schedule;
}

}  // namespace evsim

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory" / the zero-bubble repository's
// V schedule; torch.distributed.pipelining's ScheduleZBVZeroBubble): two model chunks per device on
// the V layout (pipeline_layout.h: chunk 0 is virtual stage s, chunk 1 is 2P-1-s), the backward
// split into B and W. Device s of P runs, with n = max(m, 2P-1):
//   warm-up    2(P-s)-1 forwards of chunk 0; s pairs F(chunk 1), F(chunk 0); P-s triples
//              F B W of chunk 1
//   steady     while chunk 1 has forwards left: F(chunk 0) (while left), B W of chunk 0,
//              F B W of chunk 1
//   cool-down  s pairs B(chunk 0), B(chunk 1); P-s pairs B W of chunk 0; the remaining W's of
//              chunk 1, then of chunk 0
// and the tasks of micro-batches >= m are dropped (the order stays valid: dependencies only run
// within a micro-batch). With T_F = T_B = T_W per chunk and free transfers the devices run from
// their first task to their last without a gap once m >= 2P-1; each holds at most 2P chunk
// activations, i.e. P micro-batches of a whole device stage, 1F1B's peak.
#include <algorithm>

#include "common/error.h"
#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class ZbV final : public PipelineSchedule {
 public:
  bool splitsBackward() const override { return true; }
  bool allowsChunks() const override { return true; }
  LayoutKind layout() const override { return LayoutKind::kV; }
  int fixedChunks() const override { return 2; }

  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    EVSIM_CHECK(shape.chunks == 2, "zbv schedule: v={} chunks per device, not 2", shape.chunks);
    const int P = shape.stages;
    const int s = device;
    const int m = static_cast<int>(shape.micro_batches);
    const int n = std::max(m, 2 * P - 1);
    std::vector<StageTask> order;
    order.reserve(6 * static_cast<size_t>(m));
    auto add = [&](Phase phase, int micro_batch, int chunk) {
      if (micro_batch < m) order.push_back({phase, micro_batch, chunk});
    };
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    for (int i = 0; i < 2 * (P - s) - 1; ++i) add(Phase::kForward, f0++, 0);
    for (int i = 0; i < s; ++i) {
      add(Phase::kForward, f1++, 1);
      add(Phase::kForward, f0++, 0);
    }
    for (int i = 0; i < P - s; ++i) {
      add(Phase::kForward, f1++, 1);
      add(Phase::kBackward, b1, 1);
      add(Phase::kWeightGrad, b1++, 1);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) add(Phase::kForward, f0++, 0);
      add(Phase::kBackward, b0, 0);
      add(Phase::kWeightGrad, b0++, 0);
      add(Phase::kForward, f1++, 1);
      add(Phase::kBackward, b1, 1);
      add(Phase::kWeightGrad, b1++, 1);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < s; ++i) {
      add(Phase::kBackward, b0++, 0);
      add(Phase::kBackward, b1++, 1);
    }
    for (int i = 0; i < P - s; ++i) {
      add(Phase::kBackward, b0++, 0);
      add(Phase::kWeightGrad, w0++, 0);
    }
    while (w1 < b1) add(Phase::kWeightGrad, w1++, 1);
    while (w0 < b0) add(Phase::kWeightGrad, w0++, 0);
    return order;
  }
};

}  // namespace

const PipelineSchedule& zbVSchedule() {
  static const ZbV schedule;
  return schedule;
}

}  // namespace evsim

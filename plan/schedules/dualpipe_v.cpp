// DualPipeV (deepseek-ai/DualPipe, dualpipev.py: DeepSeek-V3's DualPipe "cut in half", Sea AI
// Lab): two model chunks per device on the V layout (pipeline_layout.h: chunk 0 is virtual stage
// s, chunk 1 is 2P-1-s), the forward of one micro-batch and the backward of another overlapped as
// one fused task (StageTask::overlapped; timing_engine.h has the fused duration), and some
// backwards split into B and a W run later ("zero bubble"). Device s of P, m >= 2P micro-batches,
// runs the reference's eight steps:
//   1  2(P-s-1) x  F0
//   2  s+1      x  F0 F1
//   3  P-s-1    x  B1 (split) W F1
//   4  m-2P+s+1 x  F0&B1 F1&B0           (the first F0&B1 of the last device is not fused)
//   5  P-s-1    x  B1 F1&B0
//   6  s+1      x  B1 B0                 (split from the middle on: from B1 of pair (s+1)/2 on an
//                                          odd device, from its B0 on an even one)
//   7  P-s-1    x  W B0 (split)
//   8  s+1      x  W
// where Fc / Bc is the next micro-batch of chunk c, X&Y a fused pair (the backward whole), W the
// oldest deferred weight gradient (first in, first out), and a backward that is not split runs as
// B and its W right after it. The task graph holds split and whole backwards alike as B and W
// tasks (task_graph.h), so a whole backward is its B followed by its W.
#include <deque>
#include <utility>

#include "common/error.h"
#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class DualPipeV final : public PipelineSchedule {
 public:
  bool splitsBackward() const override { return true; }
  bool allowsChunks() const override { return true; }
  bool fusesTasks() const override { return true; }
  LayoutKind layout() const override { return LayoutKind::kV; }
  int fixedChunks() const override { return 2; }

  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    EVSIM_CHECK(shape.chunks == 2, "dualpipev schedule: v={} chunks per device, not 2",
                shape.chunks);
    const int P = shape.stages, s = device;
    const int m = static_cast<int>(shape.micro_batches);
    EVSIM_CHECK(P >= 2 && m >= 2 * P, "dualpipev schedule: P={} m={} (needs P >= 2, m >= 2P)", P,
                m);
    std::vector<StageTask> order;
    order.reserve(6 * static_cast<size_t>(m));
    int f[2] = {0, 0}, b[2] = {0, 0};
    std::deque<std::pair<int, int>> deferred;  // (chunk, micro-batch) of split backwards
    auto forward = [&](int c) { order.push_back({Phase::kForward, f[c]++, c, false}); };
    auto backward = [&](int c, bool split, bool overlapped = false) {
      const int i = b[c]++;
      order.push_back({Phase::kBackward, i, c, overlapped});
      if (split) {
        deferred.emplace_back(c, i);
      } else {
        order.push_back({Phase::kWeightGrad, i, c, overlapped});
      }
    };
    auto weight = [&] {
      EVSIM_CHECK(!deferred.empty(), "dualpipev schedule: device {} has no W to run", s);
      order.push_back({Phase::kWeightGrad, deferred.front().second, deferred.front().first});
      deferred.pop_front();
    };
    auto fused = [&](int forward_chunk, int backward_chunk) {
      forward(forward_chunk);
      backward(backward_chunk, /*split=*/false, /*overlapped=*/true);
    };
    for (int i = 0; i < 2 * (P - s - 1); ++i) forward(0);    // 1
    for (int i = 0; i < s + 1; ++i) forward(0), forward(1);  // 2
    for (int i = 0; i < P - s - 1; ++i) {                    // 3
      backward(1, true);
      weight();
      forward(1);
    }
    for (int i = 0; i < m - 2 * P + s + 1; ++i) {  // 4
      if (i == 0 && s == P - 1) {
        forward(0);
        backward(1, false);
      } else {
        fused(0, 1);
      }
      fused(1, 0);
    }
    for (int i = 0; i < P - s - 1; ++i) {  // 5
      backward(1, false);
      fused(1, 0);
    }
    bool split = false;
    for (int i = 0; i < s + 1; ++i) {  // 6
      if (i == (s + 1) / 2 && s % 2 == 1) split = true;
      backward(1, split);
      if (i == (s + 1) / 2 && s % 2 == 0) split = true;
      backward(0, split);
    }
    for (int i = 0; i < P - s - 1; ++i) {  // 7
      weight();
      backward(0, true);
    }
    for (int i = 0; i < s + 1; ++i) weight();  // 8
    EVSIM_CHECK(deferred.empty() && f[0] == m && f[1] == m && b[0] == m && b[1] == m,
                "dualpipev schedule: device {} of P={} m={} left tasks unplaced", s, P, m);
    return order;
  }
};

}  // namespace

const PipelineSchedule& dualPipeVSchedule() {
  static const DualPipeV schedule;
  return schedule;
}

}  // namespace evsim

// Megatron-LM's forward_backward_pipelining_with_interleaving (virtual pipeline, Narayanan et al.
// 2021) with its tunable group N = microbatch_group_size_per_vp_stage (default P; the Llama 3
// paper's N, section 3.3.2). Each device holds v model chunks and runs m*v forward and m*v backward
// micro-steps, in the order of Megatron's schedule table (schedules.py, get_schedule_table): the
// micro-batches in groups of N (the last group the remainder), and within a group chunk 0 for its
// micro-batches, then chunk 1, ..., chunk v-1. Forward micro-step k runs table entry k; backward
// micro-step k the same micro-batch of chunk v-1-c. Stage s runs
// w = min((P-s-1)*2 + (v-1)*N, m*v) warm-up forwards (get_pp_rank_microbatches), then 1F1B
// (forward micro-step w+i, backward micro-step i), then the remaining backwards. Device s then
// holds up to w + 1 chunk activations. The strategy validates Megatron's rules: P <= N <= m, and a
// last group of 0 or >= P micro-batches.
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
    const int N = shape.group > 0 ? shape.group : P;
    EVSIM_CHECK(v >= 1 && N >= P && N <= m && (m % N == 0 || m % N >= P),
                "interleaved schedule: v={}, m={}, N={}, P={}", v, m, N, P);
    // Megatron's schedule table: (micro-batch, chunk) per virtual micro-step.
    std::vector<StageTask> table;
    table.reserve(static_cast<size_t>(m) * v);
    for (int first = 0; first < m; first += N) {
      const int end = first + N >= m ? m : first + N;
      for (int c = 0; c < v; ++c) {
        for (int mb = first; mb < end; ++mb) table.push_back(StageTask{Phase::kForward, mb, c});
      }
    }
    const int total = m * v;
    auto forwardStep = [&](int k) { return table[static_cast<size_t>(k)]; };
    auto backwardStep = [&](int k) {
      const StageTask& t = table[static_cast<size_t>(k)];
      return StageTask{Phase::kBackward, t.micro_batch, v - 1 - t.chunk};
    };
    const int warmup = std::min((P - device - 1) * 2 + (v - 1) * N, total);
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

// ZB-H2 (Qi et al., ICLR'24, section 3.1): more warm-up forwards than 1F1B, so that the first
// backward finds every stage busy, and the deferred W's filling the tail; each stage may hold up to
// 2P-1 micro-batches' activations (twice 1F1B's peak). With equal F, B and W times and free
// transfers the stages run without a gap from their first forward to their last W (the paper's
// parallelogram) once m >= 2P-1; a synchronous optimizer step then waits (P-1) T_F for the last
// stage, which started that much later.
//
// The orders are the paper's heuristic run once on unit task times: every stage, whenever free,
// starts the first of these that can start earliest (ties in this priority): its next B (its
// gradient has arrived), its next F (its activation has arrived and fewer than 2P-1 micro-batches
// are held), its oldest pending W; the stage that can start earliest goes first (lowest index on
// ties). The resulting per-device orders are then timed with the real costs like any schedule.
// Needs m >= P (validated with the strategy).
#include <algorithm>
#include <deque>
#include <limits>

#include "common/error.h"
#include "plan/schedules/schedules.h"

namespace evsim {

namespace {

class ZbH2 final : public PipelineSchedule {
 public:
  bool splitsBackward() const override { return true; }

  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    return orders(shape)[device];
  }

  std::vector<std::vector<StageTask>> orders(const PipelineShape& shape) const override {
    EVSIM_CHECK(shape.micro_batches >= shape.stages, "zbh2 schedule: m={} micro-batches < P={}",
                shape.micro_batches, shape.stages);
    const int P = shape.stages;
    const int m = static_cast<int>(shape.micro_batches);
    constexpr double kUnknown = -1;
    const int limit = 2 * P - 1;
    std::vector<std::vector<double>> f_end(P, std::vector<double>(m, kUnknown));
    std::vector<std::vector<double>> b_end(P, std::vector<double>(m, kUnknown));
    std::vector<int> next_f(P, 0), next_b(P, 0), held(P, 0);
    std::vector<std::deque<int>> pending_w(P);
    std::vector<double> free(P, 0);
    std::vector<std::vector<StageTask>> out(P);
    for (int64_t left = int64_t{3} * m * P; left > 0; --left) {
      struct Pick {
        double start = std::numeric_limits<double>::infinity();
        int stage = -1;
        StageTask task;
      } best;
      for (int s = 0; s < P; ++s) {
        // Candidates in priority order: B, F, W; each with the time it could start.
        Pick pick;
        auto consider = [&](double ready, StageTask task) {
          const double start = std::max(free[s], ready);
          if (start < pick.start) pick = Pick{start, s, task};
        };
        if (next_b[s] < m) {
          const int j = next_b[s];
          const double ready = s + 1 < P ? b_end[s + 1][j] : f_end[s][j];
          if (ready >= 0) consider(ready, {Phase::kBackward, j});
        }
        if (next_f[s] < m && held[s] < limit) {
          const int j = next_f[s];
          const double ready = s > 0 ? f_end[s - 1][j] : 0;
          if (ready >= 0) consider(ready, {Phase::kForward, j});
        }
        if (!pending_w[s].empty()) consider(free[s], {Phase::kWeightGrad, pending_w[s].front()});
        if (pick.start < best.start) best = pick;
      }
      EVSIM_CHECK(best.stage >= 0, "zbh2 order for P={} m={} deadlocked", P, m);
      const int s = best.stage;
      const StageTask t = best.task;
      free[s] = best.start + 1;
      out[s].push_back(t);
      if (t.phase == Phase::kForward) {
        f_end[s][t.micro_batch] = free[s];
        ++next_f[s];
        ++held[s];
      } else if (t.phase == Phase::kBackward) {
        b_end[s][t.micro_batch] = free[s];
        ++next_b[s];
        pending_w[s].push_back(t.micro_batch);
      } else {
        pending_w[s].pop_front();
        --held[s];
      }
    }
    return out;
  }
};

}  // namespace

const PipelineSchedule& zbH2Schedule() {
  static const ZbH2 schedule;
  return schedule;
}

}  // namespace evsim

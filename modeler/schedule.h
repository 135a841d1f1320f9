#pragma once
// Pipeline schedules: the order in which one stage runs its forward and backward micro-batch tasks.
//   GPipe:        F0 F1 ... F(m-1) B0 B1 ... B(m-1)
//   DAPPLE/1F1B:  stage s of P runs w = min(P-s-1, m) warm-up forwards, then alternates one forward
//                 and one backward (F(w) B0 F(w+1) B1 ...), then drains the remaining backwards.

#include <cstdint>
#include <vector>

#include "events/op_list.h"
#include "events/strategy.h"

namespace evsim {

struct StageTask {
  Phase phase = Phase::kForward;  // kForward or kBackward
  int micro_batch = 0;
};

std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages, int64_t micro_batches);

// Most micro-batches whose activations a stage holds at once (forwards done, backwards not yet).
int peakActivationsInFlight(const std::vector<StageTask>& order);

}  // namespace evsim

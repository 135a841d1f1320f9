#pragma once
// Pipeline schedules: the order in which one device stage runs its forward and backward
// micro-batch tasks.
//   GPipe:        F0 F1 ... F(m-1) B0 B1 ... B(m-1)
//   DAPPLE/1F1B:  stage s of P runs w = min(P-s-1, m) warm-up forwards, then alternates one forward
//                 and one backward (F(w) B0 F(w+1) B1 ...), then drains the remaining backwards.
//   Interleaved:  Megatron-LM's forward_backward_pipelining_with_interleaving (virtual pipeline,
//                 Narayanan et al. 2021) with microbatch_group_size_per_vp_stage = P. Each device
//                 holds v model chunks and runs m*v forward and m*v backward micro-steps; forward
//                 micro-step k runs micro-batch (k / (P*v)) * P + k % P of chunk (k % (P*v)) / P,
//                 backward micro-step k the same micro-batch of chunk v-1-(k % (P*v)) / P. Stage s
//                 runs w = min((P-s-1)*2 + (v-1)*P, m*v) warm-up forwards, then 1F1B (forward
//                 micro-step w+i, backward micro-step i), then the remaining backwards. Needs
//                 m % P == 0 (validated with the strategy).

#include <cstdint>
#include <vector>

#include "events/op_list.h"
#include "events/strategy.h"

namespace evsim {

struct StageTask {
  Phase phase = Phase::kForward;  // kForward or kBackward
  int micro_batch = 0;
  int chunk = 0;  // which of the device's model chunks (0 unless interleaved)
};

// `virtual_stages` (v) must be 1 for GPipe and DAPPLE; kInterleaved needs m % P == 0.
std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages,
                                      int64_t micro_batches, int virtual_stages = 1);

// Most micro-batch chunk activations a stage holds at once (forwards done, backwards not yet).
int peakActivationsInFlight(const std::vector<StageTask>& order);

// Peak activation bytes held along `order`: each forward of chunk c adds chunk_bytes[c], its
// backward frees them. With one chunk this is peakActivationsInFlight * chunk_bytes[0].
int64_t peakActivationBytes(const std::vector<StageTask>& order,
                            const std::vector<int64_t>& chunk_bytes);

}  // namespace evsim

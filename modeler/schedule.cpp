#include "modeler/schedule.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace evsim {

namespace {

// Megatron's interleaved order (see the header), micro-step by micro-step.
std::vector<StageTask> interleavedOrder(int stage, int stages, int m, int v) {
  const int P = stages;
  const int total = m * v;
  auto forwardStep = [&](int k) {
    return StageTask{Phase::kForward, (k / (P * v)) * P + k % P, (k % (P * v)) / P};
  };
  auto backwardStep = [&](int k) {
    return StageTask{Phase::kBackward, (k / (P * v)) * P + k % P, v - 1 - (k % (P * v)) / P};
  };
  const int warmup = std::min((P - stage - 1) * 2 + (v - 1) * P, total);
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

}  // namespace

std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages,
                                      int64_t micro_batches, int virtual_stages) {
  EVSIM_CHECK(stage >= 0 && stage < stages && micro_batches > 0, "stage {} of {}, m={}", stage,
              stages, micro_batches);
  const int m = static_cast<int>(micro_batches);
  if (schedule == Schedule::kInterleaved) {
    EVSIM_CHECK(virtual_stages >= 1 && m % stages == 0,
                "interleaved schedule: v={}, m={} not a multiple of P={}", virtual_stages, m,
                stages);
    return interleavedOrder(stage, stages, m, virtual_stages);
  }
  EVSIM_CHECK(virtual_stages == 1, "{} schedule with v={}", scheduleName(schedule), virtual_stages);
  std::vector<StageTask> order;
  order.reserve(2 * static_cast<size_t>(m));
  if (schedule == Schedule::kGpipe) {
    for (int i = 0; i < m; ++i) order.push_back({Phase::kForward, i});
    for (int i = 0; i < m; ++i) order.push_back({Phase::kBackward, i});
    return order;
  }
  const int warmup = std::min(stages - stage - 1, m);
  for (int i = 0; i < warmup; ++i) order.push_back({Phase::kForward, i});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({Phase::kForward, warmup + i});
    order.push_back({Phase::kBackward, i});
  }
  for (int i = m - warmup; i < m; ++i) order.push_back({Phase::kBackward, i});
  return order;
}

int peakActivationsInFlight(const std::vector<StageTask>& order) {
  int in_flight = 0, peak = 0;
  for (const StageTask& t : order) {
    in_flight += t.phase == Phase::kForward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  return peak;
}

int64_t peakActivationBytes(const std::vector<StageTask>& order,
                            const std::vector<int64_t>& chunk_bytes) {
  // In 128 bits, clamped to int64 (memory_model.cpp saturates likewise): a peak beyond int64 is
  // out of memory on any device, and the running sum must not wrap.
  __int128 held = 0, peak = 0;
  for (const StageTask& t : order) {
    EVSIM_CHECK(t.chunk >= 0 && t.chunk < static_cast<int>(chunk_bytes.size()), "chunk {} of {}",
                t.chunk, chunk_bytes.size());
    held += t.phase == Phase::kForward ? chunk_bytes[t.chunk] : -chunk_bytes[t.chunk];
    peak = std::max(peak, held);
  }
  return static_cast<int64_t>(std::min<__int128>(peak, std::numeric_limits<int64_t>::max()));
}

}  // namespace evsim

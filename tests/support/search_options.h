#pragma once
// The search space the modeler's search tests build: N GPUs at a global batch, over micro-batch
// sizes and schedules, on two threads (header-only; for tests that link the modeler).

#include <cstdint>
#include <utility>
#include <vector>

#include "modeler/search.h"

namespace evsim::test_support {

inline SearchOptions searchOptions(int64_t gpus, int64_t global_batch,
                                   std::vector<int64_t> micro_batches,
                                   std::vector<Schedule> schedules) {
  SearchOptions o;
  o.base.global_batch = global_batch;
  o.space.gpus = gpus;
  o.space.micro_batches = std::move(micro_batches);
  o.space.schedules = std::move(schedules);
  o.threads = 2;
  return o;
}

}  // namespace evsim::test_support

#pragma once
// When no candidate of a search fits in device memory: which technique or size would bring the
// closest one under the limit. Each change is tried on the candidate with the memory model (the
// same one the search uses), smallest change first; the first that fits is the advice.

#include <cstdint>
#include <optional>
#include <string>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"

namespace evsim {

struct FitAdvice {
  std::string change;  // the flags that make it fit, e.g. "--sequence-parallel on --zero 1"
  Strategy strategy;   // the candidate with the change applied
  int64_t peak_memory_bytes = 0;
};

// The smallest change (one change, else two of different kinds) of `strategy` that fits in
// `cluster`'s device memory with `headroom` set aside, or none. Changes, smallest first: sequence
// parallelism, selective recomputation, ZeRO-1, a smaller micro-batch, ZeRO-2, full recomputation,
// ZeRO-3.
std::optional<FitAdvice> adviseFit(const ModelConfig& model, const ClusterConfig& cluster,
                                   const Strategy& strategy, double headroom);

}  // namespace evsim

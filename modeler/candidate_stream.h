#pragma once
// A search space's enumeration (forEachCandidate) as batches of valid candidates in enumeration
// order, the invalid ones counted on the way (SearchReport::noteInvalid, in order, as before).
// With `background` the enumeration runs on a thread of its own while the caller works on the
// batches before (at most kQueuedBatches wait, so memory stays bounded): a search on two threads
// no longer waits for the enumeration between batches. Without it, all runs on the caller's thread.
// Either way `consume` sees the same batches in the same order.

#include <cstddef>
#include <functional>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"
#include "plan/strategy_space.h"
#include "modeler/search.h"

namespace evsim {

struct IndexedStrategy {
  Strategy strategy;
  size_t index = 0;  // in the enumeration (invalid candidates included)
};

inline constexpr size_t kQueuedBatches = 2;

// Calls consume(batch) on the caller's thread for every batch of `batch_size` valid candidates (the
// last may be smaller), and notes every invalid candidate in `invalid` (its `invalid` count, rules
// and examples). An exception from the enumeration or from `consume` stops both and is rethrown.
void streamCandidates(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                      const StrategySpace& space, size_t batch_size, bool background,
                      SearchReport& invalid,
                      const std::function<void(std::vector<IndexedStrategy>&&)>& consume);

}  // namespace evsim

#pragma once
// A search space's enumeration (forEachCandidate) shared among worker threads, so that the
// enumeration and everything done per candidate run on every worker (issue 34: with the
// enumeration on a thread of its own and the workers meeting after every batch, two threads gave
// 1.35-1.50x). The units of the space (forEachUnit: a strategy before its techniques) form groups
// of one (M, C, P, E, ETP, micro-batch): every worker walks the units in order (cheap: no
// validity checks) and enumerates the variants (forEachVariant) of the groups it claims, each
// group claimed by exactly one worker, the next unclaimed one whenever its own is done. A group's
// candidates share their closed forms' memos (layer times, collectives, P2P sends), which then
// stay in one worker's workspace.
//
// Which worker sees a candidate depends on timing; its index does not: (unit number <<
// kVariantBits) | its number within the unit, increasing in enumeration order (a tie-breaker, not
// a count). Each worker sees its candidates in increasing index order.

#include <cstddef>
#include <functional>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"
#include "plan/strategy_space.h"

namespace evsim {

inline constexpr int kVariantBits = 24;

// Calls visit(worker, index, candidate) for every candidate of the space (invalid ones with their
// violation; the candidate is valid only during the call, forEachVariant), on `workers` threads
// (0: every core; worker in 0..workers-1, each on a thread of its own, all walking at once:
// runWorkers). Then, when given, walked(worker) on that worker's thread once it has enumerated
// every group it claimed and no group is left to claim (the others may still be enumerating
// theirs): its own end-of-walk work runs beside them rather than after all of them. The first
// exception (of visit or walked) stops every worker (each at its next group: the group it is
// enumerating is finished; walked is not called for a stopped worker) and is rethrown on the
// caller's thread once all have stopped.
void shareCandidates(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                     const StrategySpace& space, unsigned workers,
                     const std::function<void(unsigned, size_t, const Candidate&)>& visit,
                     const std::function<void(unsigned)>& walked = {});

}  // namespace evsim

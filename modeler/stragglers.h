#pragma once
// Stragglers (--slow-ranks): ranks or whole nodes whose compute runs slower by a factor. The
// modeler simulates one pipeline per class of identical DP replicas (iteration_plan.h); a replica
// holding a slow rank no longer matches the others, so it becomes its own class, whose device
// stage runs at the slowest factor among its TP ranks (the TP group runs in lockstep). The DP
// gradient collectives then wait for the slowest replica (timing_engine.h).

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "plan/iteration_plan.h"

namespace evsim {

// Compute slowdown factor by world rank (ranks not listed run at 1).
using RankSlowdowns = std::map<int64_t, double>;

// Parses "17:1.2,node3:1.1": RANK:FACTOR or nodeN:FACTOR (every rank of node N), factors > 0; a
// rank named twice keeps the larger factor. Throws InputError naming `flag`, the entry and the rule
// (a rank outside the strategy's `gpus`, a node outside the `nodes` the ranks occupy).
RankSlowdowns parseSlowRanks(std::string_view text, int64_t gpus, int gpus_per_node,
                             std::string_view flag = "--slow-ranks");

// Splits `plan`'s pipeline classes so that every class's replicas share one per-stage slowdown
// vector, and returns that vector for each class (size P each; all 1 for a class without slow
// ranks). Classes keep their order; a split class's replicas with the first vector (lowest DP index
// first) keep its place and the others follow it.
std::vector<std::vector<double>> splitSlowReplicas(IterationPlan& plan, const RankSlowdowns& slow);

}  // namespace evsim

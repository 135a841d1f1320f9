#pragma once
// Where a communication record was measured: the layout (ranks, nodes, most ranks on one node) of
// the group eventprof timed it on, which is not always the event's own placement (an event whose
// group the profiling cluster cannot hold is measured on a smaller group and scaled; docs/PROFILER.md,
// "Choosing the measured group"). The profile records it (io/profile_db.h: measured_nodes,
// measured_ranks_per_node beside measured_group_size) so that a fit costs what ran
// (scripts/profile_fit_rows.py); this file holds the one copy of the planner's shape rule that both
// the profiler (profiler/group_planner.cpp) and the loader's fallback for older profiles use.

#include <optional>
#include <span>
#include <string>
#include <utility>

#include "events/event.h"

namespace evsim {

// Groups of at most this many ranks are measured directly (rule 2 of the measured-group rule).
inline constexpr int kMaxDirectGroupSize = 8;

// Rule 3: the largest uniform shape k nodes x r ranks for `target` on a profiling cluster whose
// nodes hold `node_sizes` ranks (largest first): 2 <= k <= target.nodes (k = 1 for an intra-node
// event), r <= target.ranks_per_node, 2 <= k * r <= max_direct, and the k-th largest node holds
// r ranks; the largest k * r wins, then the largest r. {0, 0} when none fits.
std::pair<int, int> largestUniformShape(const Placement& target, std::span<const int> node_sizes,
                                        int max_direct = kMaxDirectGroupSize);

// Why `measured` cannot be the layout `event` was measured on, or "" when it can: each node holds
// at least one rank and at most ranks_per_node (nodes <= group <= nodes x ranks_per_node,
// ranks_per_node <= group), the link type is kept (one node exactly when the event is on one),
// and the measured group is no wider than the event's (nodes and ranks per node at most its).
std::string measuredLayoutProblem(const Placement& event, const Placement& measured);

// The fallback for a record that does not say where it was measured (profiles written before
// session 15): on the profile's cluster (world_size / ranks_per_node nodes of ranks_per_node),
//   1. a record measured at its own size whose placement the cluster holds ran where it is filed
//      (rule 2, or an imported nccl-tests / PyTorch row);
//   2. otherwise it ran on rule 3's shape, when that shape has measured_group_size ranks;
// std::nullopt when neither explains the record (or the cluster is not whole nodes): its layout is
// unknown.
std::optional<Placement> derivedMeasuredPlacement(const Placement& event, int measured_group_size,
                                                  int world_size, int ranks_per_node);

}  // namespace evsim

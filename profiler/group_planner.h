#pragma once
// Chooses the ranks that measure a communication event on the profiling cluster.
//
// Rule (docs/PROFILER.md, "Choosing the measured group"):
//  1. Intra-node events (nodes = 1) stay intra-node and inter-node events stay inter-node: the link
//     type matters more than the group size, which ring scaling corrects.
//  2. A group of at most `max_direct` (8) ranks is measured directly with the event's placement
//  when
//     the cluster can hold it: `nodes` nodes, the first taking `rpn` ranks, and so on, each node
//     keeping at least one rank for the nodes after it (greedy fill, e.g. 4 = 2+2, 3 = 2+1).
//  3. Otherwise it is measured on the largest uniform shape k' nodes x r' ranks that fits: 2 <= k'
//  <=
//     nodes (1 for intra-node), r' <= rpn, k' * r' <= max_direct, and the cluster has k' nodes with
//     r' ranks; largest k' * r' first, then largest r' (closest per-node shape). The measured group
//     is min(group, k' * r') ranks; a smaller group than the event's is scaled by the ring factor.
//  4. Ranks are the lowest ranks of the nodes with the most ranks (ties: lowest node index).
// Inter-node events on a one-node cluster and intra-node events where no node has 2 ranks cannot be
// measured; the plan says why.

#include <string>
#include <vector>

#include "events/event.h"
#include "events/measured_layout.h"
#include "mpi/topology.h"

namespace evsim {

struct GroupPlan {
  std::vector<int> ranks;    // ascending world ranks that take part; empty when unmeasurable
  Placement measured;        // how `ranks` sit on the profiling cluster
  bool exact = false;        // measured == the event's placement
  std::string unmeasurable;  // why no group can be built (empty when `ranks` is usable)

  bool scaled(const Placement& target) const { return measured.group_size != target.group_size; }
};

GroupPlan planGroup(const Topology& topo, const Placement& target,
                    int max_direct = kMaxDirectGroupSize);
// planGroup for `event`, except that a collective which does not scale by the ring factor
// (events/collective.h: all-to-all, broadcast) is unmeasurable on a smaller group than its own.
GroupPlan planEventGroup(const Topology& topo, const Event& event);

// Ranks per node when `group` ranks fill `nodes` nodes at most `rpn` each, every node keeping at
// least one rank: 4/2/2 -> {2,2}; 3/2/2 -> {2,1}; 6/3/4 -> {4,1,1}.
std::vector<int> fillNodes(int group, int nodes, int rpn);

}  // namespace evsim

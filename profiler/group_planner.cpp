#include "profiler/group_planner.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "events/collective.h"

namespace evsim {

std::vector<int> fillNodes(int group, int nodes, int rpn) {
  EVSIM_CHECK(nodes >= 1 && rpn >= 1 && group >= nodes && group <= nodes * rpn,
              "cannot place {} ranks on {} nodes of at most {}", group, nodes, rpn);
  std::vector<int> counts;
  int remaining = group;
  for (int i = 0; i < nodes; ++i) {
    int take = std::min(rpn, remaining - (nodes - i - 1));
    counts.push_back(take);
    remaining -= take;
  }
  return counts;
}

namespace {

// Nodes by rank count, most first; ties keep the lower node index first.
std::vector<int> nodesBySize(const Topology& topo) {
  std::vector<int> order(topo.nodes());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return topo.ranks_of_node[a].size() > topo.ranks_of_node[b].size();
  });
  return order;
}

// Takes counts[i] lowest ranks of the i-th node in `order`, if every node is large enough.
bool takeRanks(const Topology& topo, const std::vector<int>& order, const std::vector<int>& counts,
               std::vector<int>& ranks) {
  if (counts.size() > order.size()) return false;
  ranks.clear();
  for (size_t i = 0; i < counts.size(); ++i) {
    const std::vector<int>& node = topo.ranks_of_node[order[i]];
    if (static_cast<int>(node.size()) < counts[i]) return false;
    ranks.insert(ranks.end(), node.begin(), node.begin() + counts[i]);
  }
  std::sort(ranks.begin(), ranks.end());
  return true;
}

}  // namespace

GroupPlan planGroup(const Topology& topo, const Placement& target, int max_direct) {
  EVSIM_CHECK(target.group_size >= 2 && target.nodes >= 1, "bad placement group={} nodes={}",
              target.group_size, target.nodes);
  GroupPlan plan;
  if (target.nodes > target.group_size || target.ranks_per_node > target.group_size) {
    plan.unmeasurable = fmt::format("placement group={} nodes={} rpn={} is impossible",
                                    target.group_size, target.nodes, target.ranks_per_node);
    return plan;
  }
  const std::vector<int> order = nodesBySize(topo);
  auto size_of = [&](int i) { return static_cast<int>(topo.ranks_of_node[order[i]].size()); };

  if (target.nodes == 1) {
    if (size_of(0) < 2) {
      plan.unmeasurable = "intra-node: needs a node with at least 2 ranks (every node has 1)";
      return plan;
    }
  } else if (topo.nodes() < 2) {
    plan.unmeasurable = fmt::format(
        "inter-node: needs at least 2 nodes (the profiling cluster has "
        "1; use --ranks-per-node to emulate nodes, or "
        "--intra-node-only)");
    return plan;
  }

  // Rule 2: the exact placement.
  if (target.group_size <= max_direct &&
      takeRanks(topo, order, fillNodes(target.group_size, target.nodes, target.ranks_per_node),
                plan.ranks)) {
    plan.measured = target;
    plan.exact = true;
    return plan;
  }

  // Rule 3: the largest uniform k' x r' shape with the event's link type (events/measured_layout.h,
  // the one copy of the rule: the profile loader's fallback for older profiles uses it too).
  std::vector<int> sizes(order.size());
  for (size_t i = 0; i < order.size(); ++i) sizes[i] = size_of(static_cast<int>(i));
  const auto [best_nodes, best_rpn] = largestUniformShape(target, sizes, max_direct);
  EVSIM_CHECK(best_nodes > 0, "no group for group={} nodes={} rpn={}", target.group_size,
              target.nodes, target.ranks_per_node);
  const int group = std::min(target.group_size, best_nodes * best_rpn);
  const std::vector<int> counts = fillNodes(group, best_nodes, best_rpn);
  EVSIM_CHECK(takeRanks(topo, order, counts, plan.ranks), "planned shape does not fit");
  plan.measured = Placement{group, best_nodes, *std::max_element(counts.begin(), counts.end())};
  plan.exact = plan.measured == target;
  return plan;
}

GroupPlan planEventGroup(const Topology& topo, const Event& event) {
  GroupPlan plan = planGroup(topo, event.placement);
  const Collective& collective = collectiveOf(event.kind);
  if (plan.unmeasurable.empty() && plan.scaled(event.placement) && event.kind != EventKind::kP2P &&
      !collective.ring_scalable) {
    plan = GroupPlan{};
    plan.unmeasurable = fmt::format(
        "{} over {} ranks cannot be scaled from a smaller group (it does not follow the ring "
        "volume factor): profile it on a cluster of at least {} ranks in that placement",
        collective.name, event.placement.group_size, event.placement.group_size);
  }
  return plan;
}

}  // namespace evsim

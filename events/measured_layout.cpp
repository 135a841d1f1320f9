// The measured group's layout: the planner's shape rule and the fallback for older profiles
// (measured_layout.h).
#include "events/measured_layout.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fmt/format.h"

namespace evsim {

std::pair<int, int> largestUniformShape(const Placement& target, std::span<const int> node_sizes,
                                        int max_direct) {
  int best_nodes = 0, best_rpn = 0;
  const int cluster_nodes = static_cast<int>(node_sizes.size());
  const int max_nodes = target.nodes == 1 ? 1 : std::min(target.nodes, cluster_nodes);
  const int min_nodes = target.nodes == 1 ? 1 : 2;
  for (int k = min_nodes; k <= max_nodes; ++k) {
    for (int r = 1; r <= target.ranks_per_node; ++r) {
      if (k * r > max_direct || k * r < 2 || node_sizes[k - 1] < r) continue;
      if (k * r > best_nodes * best_rpn || (k * r == best_nodes * best_rpn && r > best_rpn)) {
        best_nodes = k;
        best_rpn = r;
      }
    }
  }
  return {best_nodes, best_rpn};
}

std::string measuredLayoutProblem(const Placement& event, const Placement& measured) {
  const int n = measured.nodes, r = measured.ranks_per_node, g = measured.group_size;
  if (n < 1 || r < 1) return fmt::format("{} nodes of {} ranks: both must be >= 1", n, r);
  if (g < n || g > int64_t{n} * r || r > g) {
    return fmt::format("{} nodes with at most {} ranks each cannot hold measured_group_size {}", n,
                       r, g);
  }
  if ((n == 1) != (event.nodes == 1)) {
    return fmt::format("measured on {} node(s) for an event on {}: the link type must be kept", n,
                       event.nodes);
  }
  if (n > event.nodes || r > event.ranks_per_node) {
    return fmt::format("{} nodes of {} ranks is wider than the event's {} nodes of {}", n, r,
                       event.nodes, event.ranks_per_node);
  }
  return {};
}

std::optional<Placement> derivedMeasuredPlacement(const Placement& event, int measured_group_size,
                                                  int world_size, int ranks_per_node) {
  if (ranks_per_node < 1 || world_size < ranks_per_node) return std::nullopt;
  const int hosts = world_size / ranks_per_node;
  if (measured_group_size == event.group_size && event.nodes <= hosts &&
      event.ranks_per_node <= ranks_per_node) {
    return event;
  }
  if (world_size % ranks_per_node != 0) return std::nullopt;
  const std::vector<int> sizes(static_cast<size_t>(hosts), ranks_per_node);
  const auto [k, r] = largestUniformShape(event, sizes);
  if (k == 0) return std::nullopt;
  const int group = std::min(event.group_size, k * r);
  if (group != measured_group_size) return std::nullopt;
  // fillNodes' first (largest) node: each node after it keeps at least one rank.
  const Placement measured{group, k, std::min(r, group - (k - 1))};
  if (!measuredLayoutProblem(event, measured).empty()) return std::nullopt;
  return measured;
}

}  // namespace evsim

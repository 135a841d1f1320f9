#include "mpi/topology.h"

#include <algorithm>
#include <map>

#include "common/error.h"

namespace evsim {

int Topology::ranksPerNode() const {
  size_t most = 0;
  for (const auto& ranks : ranks_of_node) most = std::max(most, ranks.size());
  return static_cast<int>(most);
}

bool Topology::uniform() const {
  return std::all_of(ranks_of_node.begin(), ranks_of_node.end(),
                     [&](const auto& r) { return r.size() == ranks_of_node.front().size(); });
}

Topology buildTopology(const std::vector<int>& host_key, const std::vector<std::string>& host_name,
                       int emulated_ranks_per_node) {
  EVSIM_CHECK(!host_key.empty() && host_key.size() == host_name.size(),
              "{} host keys for {} host names", host_key.size(), host_name.size());
  if (emulated_ranks_per_node < 0) {
    EVSIM_THROW(InputError, "--ranks-per-node {}: must be > 0", emulated_ranks_per_node);
  }
  // Real nodes in order of their lowest rank (ranks are visited in ascending order).
  std::vector<std::vector<int>> real_nodes;
  std::map<int, size_t> real_index;
  for (int r = 0; r < static_cast<int>(host_key.size()); ++r) {
    auto [it, inserted] = real_index.emplace(host_key[r], real_nodes.size());
    if (inserted) real_nodes.emplace_back();
    real_nodes[it->second].push_back(r);
  }

  Topology topo;
  topo.world_size = static_cast<int>(host_key.size());
  topo.node_of_rank.assign(host_key.size(), -1);
  topo.emulated = emulated_ranks_per_node > 0;
  for (const std::vector<int>& ranks : real_nodes) {
    const std::string& name = host_name[ranks.front()];
    if (!topo.emulated) {
      topo.ranks_of_node.push_back(ranks);
      topo.node_names.push_back(name);
      continue;
    }
    const size_t k = static_cast<size_t>(emulated_ranks_per_node);
    if (ranks.size() % k != 0) {
      EVSIM_THROW(InputError,
                  "--ranks-per-node {}: host {} has {} ranks, not a multiple of {} (emulated nodes "
                  "must all have the same size)",
                  k, name, ranks.size(), k);
    }
    for (size_t first = 0; first < ranks.size(); first += k) {
      topo.ranks_of_node.emplace_back(ranks.begin() + first, ranks.begin() + first + k);
      topo.node_names.push_back(fmt::format("{}/{}", name, first / k));
    }
  }
  for (int node = 0; node < topo.nodes(); ++node) {
    for (int r : topo.ranks_of_node[node]) topo.node_of_rank[r] = node;
  }
  return topo;
}

}  // namespace evsim

#pragma once
// Which ranks of the profiling run share a node. Real nodes come from MPI (ranks that share memory,
// MPI_Comm_split_type SHARED); `--ranks-per-node K` splits each real node into emulated nodes of K
// consecutive ranks so that a single machine can stand in for a small cluster in tests and demos.
// This file is MPI-free: the MPI queries live in mpi_env.cpp and pass their answers in here.

#include <string>
#include <vector>

namespace evsim {

struct Topology {
  int world_size = 0;
  std::vector<int> node_of_rank;                // dense node index per world rank
  std::vector<std::vector<int>> ranks_of_node;  // ascending world ranks of each node
  std::vector<std::string> node_names;  // host name, or "host/k" for emulated node k of host
  bool emulated = false;

  int nodes() const { return static_cast<int>(ranks_of_node.size()); }
  // Most ranks on one node: the profile's `ranks_per_node`.
  int ranksPerNode() const;
  // True when every node has the same number of ranks.
  bool uniform() const;
};

// `host_key[r]`: equal for world ranks on the same real node (e.g. the lowest world rank of the
// node's shared-memory communicator). `host_name[r]`: that node's name. `emulated_ranks_per_node`:
// 0 to use real nodes, otherwise K > 0 and every real node's rank count must be a multiple of K
// (InputError naming --ranks-per-node otherwise). Real nodes are numbered by their lowest rank;
// an emulated node k of a real node follows node k-1 of the same real node.
Topology buildTopology(const std::vector<int>& host_key, const std::vector<std::string>& host_name,
                       int emulated_ranks_per_node);

}  // namespace evsim

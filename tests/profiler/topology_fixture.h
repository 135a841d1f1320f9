#pragma once
// A topology of real hosts for the profiler tests, without MPI.

#include <string>
#include <vector>

#include "mpi/topology.h"

namespace evsim::test {

// `nodes` real hosts of `per_node` consecutive ranks each, named host0, host1, ...
inline Topology hosts(int nodes, int per_node) {
  std::vector<int> keys;
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) {
    for (int i = 0; i < per_node; ++i) {
      keys.push_back(n * per_node);
      names.push_back("host" + std::to_string(n));
    }
  }
  return buildTopology(keys, names, 0);
}

}  // namespace evsim::test

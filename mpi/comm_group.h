#pragma once
// A group of ranks that communicate together, with its own MPI communicator: the ranks that measure
// one communication event (eventprof) or run one collective (the NCCL runners in mpi/cuda/).

#include <mpi.h>

#include <vector>

namespace evsim {

// The ranks of one communication, in their own communicator.
struct CommGroup {
  MPI_Comm comm = MPI_COMM_NULL;  // only the measuring ranks
  int rank = 0;                   // this rank's index in comm
  int size = 0;
  std::vector<int> world_ranks;  // ascending; comm rank i is world_ranks[i]
};

}  // namespace evsim

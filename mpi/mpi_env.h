#pragma once
// MPI-side facts about the profiling run and small collective helpers. All functions here are
// collective over MPI_COMM_WORLD unless they say otherwise.

#include <mpi.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "mpi/topology.h"

namespace evsim {

// Bad input that every rank knows about with the same message (rank 0 found it and broadcast
// it): main() prints it once and all ranks exit normally, with no MPI_Abort needed.
class CollectiveInputError : public InputError {
 public:
  using InputError::InputError;
};

struct MpiWorld {
  int rank = 0;
  int size = 1;
  std::string host;    // MPI_Get_processor_name
  int local_rank = 0;  // index among the ranks sharing this rank's real node (picks the GPU)
  int local_size = 1;
  int host_key = 0;  // lowest world rank on this rank's real node
  // Cores the ranks of this node may run on together: the union of their CPU affinity masks.
  // mpirun binds each rank to one core by default, so one rank's own mask says 1 on any host.
  int host_cores = 1;
};

// Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD, then finds this rank's node with
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
MpiWorld queryMpiWorld();

// Gathers every rank's host key and name and builds the (possibly emulated) topology, identical on
// all ranks. Throws InputError (on every rank) for a bad --ranks-per-node.
Topology discoverTopology(const MpiWorld& world, int emulated_ranks_per_node);

// Ranks that cannot have a GPU of their own (NCCL refuses two ranks of a communicator on one GPU).
// Collective: every rank passes the GPUs it sees and gets the same answer.
struct GpuShortage {
  std::vector<std::string> without;  // "r@host": ranks that see no GPU
  std::vector<std::string> shared;   // "r@host (k ranks, g GPUs)": more ranks than GPUs on a host
  bool none() const { return without.empty() && shared.empty(); }
  // The --backend cuda error for a shortage (ranks without a GPU first).
  std::string message() const;
};
GpuShortage findGpuShortage(const MpiWorld& world, int visible_gpus);

// MPI_Get_library_version's first line up to the first comma, e.g. "Open MPI v4.1.4". Local.
std::string mpiLibraryVersion();

std::string broadcastString(const std::string& text, int root, MPI_Comm comm);
std::vector<std::string> broadcastStrings(const std::vector<std::string>& items, int root,
                                          MPI_Comm comm);
// Every rank's `text`, in rank order, on `root` (empty elsewhere).
std::vector<std::string> gatherStrings(const std::string& text, int root, MPI_Comm comm);

}  // namespace evsim

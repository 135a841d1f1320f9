#pragma once
// eventprof --overlap: the overlap slowdown's measurement (modeler/overlap_slowdown.h). A GEMM and
// a memory-bound kernel are timed alone and while an all-reduce runs beside them the whole time
// (Device::timeComputeBeside), over a group inside one node (NVLink traffic on GPUs) and, when
// the ranks span nodes, over one rank per node (network traffic). Rank 0 writes each pair as an
// overlap record of the profile database (io/profile_db.h); `eventsim calibrate --overlap` fits
// the factor per traffic kind from them.
//
// Collective over MPI_COMM_WORLD. The kernels' sizes are fixed per platform (large enough on a
// GPU that a repetition's CUDA events cost little beside it; small on a CPU so the test is fast).

#include "io/profile_db.h"
#include "mpi/mpi_env.h"
#include "mpi/topology.h"
#include "platform/device.h"
#include "profiler/profile_session.h"

namespace evsim {

// Writes options.output_path (a new profile: `metadata` and the overlap records). Returns the
// number of records written. Throws CollectiveInputError when no group of two ranks exists.
int measureOverlap(const MpiWorld& world, const Topology& topo, Device& device,
                   const ProfileOptions& options, const ProfileMetadata& metadata);

}  // namespace evsim

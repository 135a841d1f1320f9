#pragma once
// The CPU device's communicator: buffers and MPI calls of every collective of events/collective.h,
// for eventprof's CPU backend and eventrun's CPU executor alike (one place, so both measure and
// run the same thing). 16-bit types travel as MPI_INT16_T (MPI has no half types; summing
// integers costs what a GPU's reduction would), fp32 as float, odd byte counts as bytes.

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "events/event.h"

namespace evsim {

struct MpiCollectiveBuffers {
  MPI_Datatype type = MPI_UINT8_T;
  int64_t element_bytes = 1;
  int64_t elements = 0;  // of the event's message (the full buffer for sharded collectives)
  int group = 1;         // ranks the buffers were sized for
  std::vector<char> send, recv;
};

// Buffers for `event` (a collective or p2p) over its group, filled with small non-zero values
// (sums over a group never overflow 16-bit integers). Throws Error past MPI's int counts.
// The elements MPI moves for `event` (its dtype's, or bytes when the size is not a multiple):
// eventprof refuses an event beyond MPI's int count before measuring (CpuDevice::cannotMeasure).
int64_t mpiElementCount(const Event& event);

MpiCollectiveBuffers makeMpiBuffers(const Event& event, int group_size);

// Runs `event`'s collective over `comm` (whose size is the group the buffers were made for).
// With `request` it is started non-blocking (MPI_I...) and `request` must be waited on; without,
// it blocks. P2P is not a collective: its two sides are MPI_Send / MPI_Recv of `send` / `recv`.
void runMpiCollective(const Event& event, MpiCollectiveBuffers& buffers, MPI_Comm comm,
                      MPI_Request* request = nullptr);

}  // namespace evsim

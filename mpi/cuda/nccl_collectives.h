#pragma once
// The CUDA device's communicator: device buffers and NCCL calls of every collective of
// events/collective.h, for eventprof's CUDA backend and eventrun's CUDA executor alike (the CUDA
// counterpart of mpi/mpi_collectives.h).

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>

#include "events/event.h"
#include "mpi/cuda/cuda_buffers.h"

namespace evsim {

struct NcclCollectiveBuffers {
  ncclDataType_t type = ncclUint8;
  size_t elements = 0;  // of the event's message (the full buffer for sharded collectives)
  int group = 1;
  std::unique_ptr<DeviceBuffer> send, recv;
};

// Buffers for `event` (a collective or p2p) over `group_size` ranks, sized by the collective's
// buffer shape.
NcclCollectiveBuffers makeNcclBuffers(const Event& event, int group_size);

// Enqueues `event`'s collective on `stream` over `comm` (a communicator of the group the buffers
// were made for); all-to-all as grouped ncclSend/ncclRecv to every peer, as nccl-tests does. P2P is
// not a collective: its sides are ncclSend / ncclRecv of `send` / `recv`. Name of the NCCL call(s)
// for messages: ncclCallName().
void enqueueNcclCollective(const Event& event, NcclCollectiveBuffers& buffers, ncclComm_t comm,
                           cudaStream_t stream);
const char* ncclCallName(EventKind kind);

}  // namespace evsim

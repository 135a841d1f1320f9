#include "mpi/mpi_collectives.h"

#include <algorithm>
#include <climits>

#include "common/error.h"
#include "events/collective.h"
#include "mpi/mpi_check.h"

namespace evsim {

namespace {

std::vector<char> filled(int64_t elements, int64_t element_bytes) {
  std::vector<char> buffer(static_cast<size_t>(elements * element_bytes));
  for (int64_t i = 0; i < elements; ++i) {
    if (element_bytes == 4) {
      reinterpret_cast<float*>(buffer.data())[i] = 1.0f;
    } else if (element_bytes == 2) {
      reinterpret_cast<int16_t*>(buffer.data())[i] = 1;
    } else {
      buffer[static_cast<size_t>(i)] = 1;
    }
  }
  return buffer;
}

// makeMpiBuffers checked the largest count against INT_MAX.
int count(int64_t elements) { return static_cast<int>(elements); }

}  // namespace

namespace {
// The element size MPI moves `event` in: its dtype's, or bytes when the size is not a multiple.
int64_t mpiElementBytes(const Event& event) {
  const int64_t bytes = dtypeBytes(event.dtype);
  return event.message_bytes % bytes == 0 ? bytes : 1;
}
}  // namespace

int64_t mpiElementCount(const Event& event) { return event.message_bytes / mpiElementBytes(event); }

MpiCollectiveBuffers makeMpiBuffers(const Event& event, int group_size) {
  MpiCollectiveBuffers b;
  b.element_bytes = mpiElementBytes(event);
  b.type = b.element_bytes == 4 ? MPI_FLOAT : (b.element_bytes == 2 ? MPI_INT16_T : MPI_UINT8_T);
  b.elements = mpiElementCount(event);
  b.group = std::max(1, group_size);
  if (b.elements > INT_MAX) {
    EVSIM_THROW(Error, "'{}': {} elements exceed MPI's int count", event.signature(), b.elements);
  }
  const CollectiveBuffers shape = collectiveOf(event.kind).buffers(b.elements, b.group);
  EVSIM_CHECK(shape.send_elements > 0 && shape.recv_elements > 0, "'{}': fewer elements than ranks",
              event.signature());
  b.send = filled(shape.send_elements, b.element_bytes);
  b.recv = filled(shape.recv_elements, b.element_bytes);
  return b;
}

void runMpiCollective(const Event& event, MpiCollectiveBuffers& b, MPI_Comm comm,
                      MPI_Request* request) {
  int size = 0;
  EVSIM_MPI_CHECK(MPI_Comm_size(comm, &size));
  EVSIM_CHECK(size == b.group, "'{}' run in a group of {} ranks, buffers for {}", event.signature(),
              size, b.group);
  void* send = b.send.data();
  void* recv = b.recv.data();
  const int shard = count(b.elements / b.group);
  // Blocking collectives use MPI's tuned blocking algorithms (what eventprof measures); only
  // overlapped DP buckets need the non-blocking forms.
  switch (event.kind) {
    case EventKind::kAllReduce: {
      const int n = count(b.elements);
      EVSIM_MPI_CHECK(request ? MPI_Iallreduce(send, recv, n, b.type, MPI_SUM, comm, request)
                              : MPI_Allreduce(send, recv, n, b.type, MPI_SUM, comm));
      break;
    }
    case EventKind::kReduceScatter:
      EVSIM_MPI_CHECK(
          request ? MPI_Ireduce_scatter_block(send, recv, shard, b.type, MPI_SUM, comm, request)
                  : MPI_Reduce_scatter_block(send, recv, shard, b.type, MPI_SUM, comm));
      break;
    case EventKind::kAllGather:
      EVSIM_MPI_CHECK(request
                          ? MPI_Iallgather(send, shard, b.type, recv, shard, b.type, comm, request)
                          : MPI_Allgather(send, shard, b.type, recv, shard, b.type, comm));
      break;
    case EventKind::kAllToAll:
      EVSIM_MPI_CHECK(request
                          ? MPI_Ialltoall(send, shard, b.type, recv, shard, b.type, comm, request)
                          : MPI_Alltoall(send, shard, b.type, recv, shard, b.type, comm));
      break;
    case EventKind::kBroadcast: {
      const int n = count(b.elements);
      EVSIM_MPI_CHECK(request ? MPI_Ibcast(send, n, b.type, /*root=*/0, comm, request)
                              : MPI_Bcast(send, n, b.type, /*root=*/0, comm));
      break;
    }
    case EventKind::kP2P:
    case EventKind::kCompute:
      EVSIM_THROW(Error, "'{}' is not a collective", event.signature());
  }
}

}  // namespace evsim

#include "mpi/cuda/nccl_collectives.h"

#include <algorithm>

#include "common/error.h"
#include "events/collective.h"
#include "mpi/cuda/nccl_check.h"

namespace evsim {

NcclCollectiveBuffers makeNcclBuffers(const Event& event, int group_size) {
  NcclCollectiveBuffers b;
  std::tie(b.type, b.elements) = ncclElements(event, event.message_bytes);
  b.group = std::max(1, group_size);
  const size_t element_bytes = b.elements == 0 ? 1 : size_t(event.message_bytes) / b.elements;
  const CollectiveBuffers shape =
      collectiveOf(event.kind).buffers(static_cast<int64_t>(b.elements), b.group);
  EVSIM_CHECK(shape.send_elements > 0 && shape.recv_elements > 0, "'{}': fewer elements than ranks",
              event.signature());
  b.send = std::make_unique<DeviceBuffer>(size_t(shape.send_elements) * element_bytes);
  b.recv = std::make_unique<DeviceBuffer>(size_t(shape.recv_elements) * element_bytes);
  return b;
}

const char* ncclCallName(EventKind kind) {
  switch (kind) {
    case EventKind::kAllReduce:
      return "ncclAllReduce";
    case EventKind::kReduceScatter:
      return "ncclReduceScatter";
    case EventKind::kAllGather:
      return "ncclAllGather";
    case EventKind::kAllToAll:
      return "ncclSend/ncclRecv (all-to-all)";
    case EventKind::kBroadcast:
      return "ncclBroadcast";
    case EventKind::kP2P:
      return "ncclSend/ncclRecv";
    case EventKind::kCompute:
      break;
  }
  return "?";
}

void enqueueNcclCollective(const Event& event, NcclCollectiveBuffers& b, ncclComm_t comm,
                           cudaStream_t stream) {
  void* send = b.send->get();
  void* recv = b.recv->get();
  const size_t shard = b.elements / size_t(b.group);
  switch (event.kind) {
    case EventKind::kAllReduce:
      EVSIM_NCCL_CHECK(ncclAllReduce(send, recv, b.elements, b.type, ncclSum, comm, stream));
      break;
    case EventKind::kReduceScatter:
      EVSIM_NCCL_CHECK(ncclReduceScatter(send, recv, shard, b.type, ncclSum, comm, stream));
      break;
    case EventKind::kAllGather:
      EVSIM_NCCL_CHECK(ncclAllGather(send, recv, shard, b.type, comm, stream));
      break;
    case EventKind::kAllToAll: {
      const size_t element_bytes = b.elements == 0 ? 1 : size_t(event.message_bytes) / b.elements;
      const size_t peer_bytes = shard * element_bytes;
      EVSIM_NCCL_CHECK(ncclGroupStart());
      for (int peer = 0; peer < b.group; ++peer) {
        EVSIM_NCCL_CHECK(ncclSend(static_cast<char*>(send) + size_t(peer) * peer_bytes, shard,
                                  b.type, peer, comm, stream));
        EVSIM_NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + size_t(peer) * peer_bytes, shard,
                                  b.type, peer, comm, stream));
      }
      EVSIM_NCCL_CHECK(ncclGroupEnd());
      break;
    }
    case EventKind::kBroadcast:
      EVSIM_NCCL_CHECK(ncclBroadcast(send, recv, b.elements, b.type, /*root=*/0, comm, stream));
      break;
    case EventKind::kP2P:
    case EventKind::kCompute:
      EVSIM_THROW(Error, "'{}' is not a collective", event.signature());
  }
}

}  // namespace evsim

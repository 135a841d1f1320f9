#include "mpi/cuda/nccl_comm.h"

#include <chrono>
#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "mpi/cuda/nccl_check.h"
#include "mpi/mpi_check.h"

namespace evsim {

NcclComm::NcclComm(const CommGroup& group, double timeout_s)
    : timeout_s_(timeout_s),
      ranks_text_(fmt::format("world ranks {}", fmt::join(group.world_ranks, ","))) {
  ncclUniqueId id{};
  if (group.rank == 0) EVSIM_NCCL_CHECK(ncclGetUniqueId(&id));
  EVSIM_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group.comm));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that initialisation with a dead peer can time out
  EVSIM_NCCL_CHECK(ncclCommInitRankConfig(&comm_, group.size, id, group.rank, &config));
  poll([] { return true; }, "ncclCommInitRankConfig");
}

NcclComm::~NcclComm() {
  if (comm_ == nullptr) return;
  // Teardown must not throw: finalize with a bounded wait, abort when that fails.
  ncclResult_t finalize = ncclCommFinalize(comm_);
  bool clean = finalize == ncclSuccess || finalize == ncclInProgress;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ncclResult_t state = ncclInProgress;
  while (clean && state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (clean && state == ncclSuccess) {
    EVSIM_NCCL_IGNORE(ncclCommDestroy(comm_));
  } else {
    EVSIM_NCCL_IGNORE(ncclCommAbort(comm_));
  }
}

void NcclComm::abortAndThrow(const std::string& why) {
  EVSIM_NCCL_IGNORE(ncclCommAbort(comm_));
  comm_ = nullptr;
  EVSIM_THROW(EnvironmentError, "{}", why);
}

template <typename Ready>
void NcclComm::poll(Ready&& ready, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    EVSIM_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      abortAndThrow(fmt::format("NCCL {} on {}: {} (communicator aborted)", what, ranks_text_,
                                ncclGetErrorString(state)));
    }
    if (state == ncclSuccess && ready()) return;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) {
      abortAndThrow(
          fmt::format("NCCL {} on {}: still pending after {:.0f} s (a peer lost or "
                      "stuck?); communicator aborted (see --comm-timeout)",
                      what, ranks_text_, waited));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclComm::waitEnqueued(const std::string& what) {
  poll([] { return true; }, what);
}

void NcclComm::waitEvent(cudaEvent_t done, const std::string& what) {
  poll(
      [&] {
        cudaError_t status = cudaEventQuery(done);
        if (status == cudaErrorNotReady) return false;
        EVSIM_CUDA_CHECK(status);
        return true;
      },
      what);
}

}  // namespace evsim

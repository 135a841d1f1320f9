#pragma once
// One NCCL communicator over the ranks of a CommGroup, built so that a lost peer ends the run
// instead of hanging it: non-blocking initialisation and every wait poll ncclCommGetAsyncError
// with a deadline, and on an error or timeout the communicator is aborted (ncclCommAbort) and an
// Error thrown, which main() turns into MPI_Abort.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "mpi/comm_group.h"

namespace evsim {

class NcclComm {
 public:
  // Collective over group.comm: group rank 0 makes the NCCL unique id and broadcasts it with MPI.
  NcclComm(const CommGroup& group, double timeout_s);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  // After enqueuing an operation: waits while the non-blocking communicator reports ncclInProgress.
  void waitEnqueued(const std::string& what);
  // Waits until `done` (recorded on the stream after the operation) has completed.
  void waitEvent(cudaEvent_t done, const std::string& what);

 private:
  [[noreturn]] void abortAndThrow(const std::string& why);
  // Polls until `ready()` or an async error or the deadline; `what` names the operation.
  template <typename Ready>
  void poll(Ready&& ready, const std::string& what);

  ncclComm_t comm_ = nullptr;
  double timeout_s_;
  std::string ranks_text_;  // "world ranks 0,1,2,3" for messages
};

}  // namespace evsim

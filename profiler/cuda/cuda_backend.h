#pragma once
// The CUDA backend's entry points, free of CUDA headers so backend_factory.cpp can include them.
// Built only when EVSIM_WITH_CUDA (target evsim_profiler_cuda).

#include <cstdint>
#include <memory>

#include "profiler/backend.h"

namespace evsim {

struct CudaBackendOptions {
  int local_rank = 0;           // rank among those on this node: picks device local_rank % count
  uint64_t seed = 1;            // kernels' random inputs
  double comm_timeout_s = 300;  // a NCCL operation pending longer aborts its communicator
  bool use_cupti = true;        // false: compute timed with CUDA events (to cross-check CUPTI)
};

// Compute: kernels/cuda timed by CUPTI kernel spans (CUDA events when CUPTI is unavailable).
// Communication: NCCL on a dedicated stream, timed with CUDA events, NCCL ids exchanged over MPI.
std::unique_ptr<ProfilerBackend> makeCudaBackend(const CudaBackendOptions& options);

}  // namespace evsim

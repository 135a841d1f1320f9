#pragma once
// The CUDA platform's entry point, free of CUDA headers so device_factory.cpp can include it.
// Built only when EVSIM_WITH_CUDA (target evsim_platform_cuda).

#include <cstdint>
#include <memory>

#include "platform/device.h"

namespace evsim {

// How the device times compute events when measuring them.
enum class CudaComputeTimer {
  kCupti,       // the span of the event's kernels in CUPTI's activity records (CUDA events when
                // CUPTI is unavailable)
  kCudaEvents,  // CUDA events around groups of repetitions (to cross-check CUPTI)
  kNone,        // the device only runs programs (eventrun): no CUPTI subscription to slow them
};

struct CudaDeviceOptions {
  int local_rank = 0;  // rank among those on this node: picks device local_rank % count
  uint64_t seed = 1;            // kernels' random inputs
  double comm_timeout_s = 300;  // a NCCL operation pending longer aborts its communicator
  CudaComputeTimer compute_timer = CudaComputeTimer::kCupti;
};

// Compute: kernels/cuda timed by the chosen timer. Communication: NCCL on a dedicated stream,
// timed with CUDA events, NCCL ids exchanged over MPI. Programs run on the same GPU through
// runner/'s CUDA executor (runner/executor_factory.h).
std::unique_ptr<Device> makeCudaDevice(const CudaDeviceOptions& options);

}  // namespace evsim

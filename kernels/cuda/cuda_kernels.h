#pragma once
// CUDA implementations of the compute events (cuBLAS GEMMs, own kernels for everything else).
// No CUDA include here: the profiler's backend-neutral code can include this header; the stream
// is passed as void* and cast to cudaStream_t inside.
//
// Call order: makeCudaKernel (allocates, fills and synchronises; not timed) -> run() enqueues the
// event's work once on `cuda_stream` -> synchronize() waits for that stream.

#include <cstdint>
#include <memory>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim {

// Kernel for `event` in its dtype on the current CUDA device. `cuda_stream` is a cudaStream_t
// (nullptr = the default stream) that must outlive the kernel. Throws InputError naming the
// signature for a communication event or an unknown op, Error for a failing CUDA/cuBLAS call.
std::unique_ptr<ComputeKernel> makeCudaKernel(const Event& event, void* cuda_stream,
                                              uint64_t seed = 1);

// Visible CUDA devices; 0 when there is no GPU or no driver. Never throws (tests use it to skip).
int cudaDeviceCount();

}  // namespace evsim

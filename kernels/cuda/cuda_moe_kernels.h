#pragma once
// CUDA ComputeKernel wrappers of the mixture-of-experts routing ops, called by makeCudaKernel's
// switch (cuda_kernels.cpp). Buffers sized and laid out as the CPU wrappers'
// (kernels/cpu/cpu_moe_kernels.cpp), in the event's dtype (probabilities fp32).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim::cuda {

// InputError naming the signature for a bad top-k, before touching the device.
std::unique_ptr<ComputeKernel> makeCudaMoeKernel(const Event& event, cudaStream_t stream,
                                                 uint64_t seed);

}  // namespace evsim::cuda

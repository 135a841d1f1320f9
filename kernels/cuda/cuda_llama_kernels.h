#pragma once
// CUDA ComputeKernel wrappers of RMSNorm, SwiGLU and RoPE, called by makeCudaKernel's switch
// (cuda_kernels.cpp; fused attention is cuda_attention.h's). Buffers in the event's dtype, sized
// and laid out as the CPU wrappers' (kernels/cpu/cpu_llama_kernels.cpp), so both backends time
// the same bytes.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim::cuda {

std::unique_ptr<ComputeKernel> makeCudaRmsNormKernel(const Event& event, cudaStream_t stream,
                                                     uint64_t seed, bool backward);
std::unique_ptr<ComputeKernel> makeCudaSwiGluKernel(const Event& event, cudaStream_t stream,
                                                    uint64_t seed, bool backward);
// InputError naming the signature for an odd dim, before touching the device.
std::unique_ptr<ComputeKernel> makeCudaRopeKernel(const Event& event, cudaStream_t stream,
                                                  uint64_t seed, bool backward);

}  // namespace evsim::cuda

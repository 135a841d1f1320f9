#pragma once
// CPU ComputeKernel wrappers of the Llama-style ops (RMSNorm, SwiGLU, RoPE, fused attention),
// called by makeCpuKernel's switch (cpu_kernels.cpp). Each owns float32 buffers sized as the op's
// memory rule in events/compute_op_rules.cpp counts them, filled with random values at
// construction.

#include <cstdint>
#include <memory>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim::cpu {

std::unique_ptr<ComputeKernel> makeRmsNormKernel(const Event& event, uint64_t seed, bool backward);
std::unique_ptr<ComputeKernel> makeSwiGluKernel(const Event& event, uint64_t seed, bool backward);
// InputError naming the signature for an odd dim.
std::unique_ptr<ComputeKernel> makeRopeKernel(const Event& event, uint64_t seed, bool backward);
std::unique_ptr<ComputeKernel> makeAttentionKernel(const Event& event, uint64_t seed,
                                                   bool backward);

}  // namespace evsim::cpu

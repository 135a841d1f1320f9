#pragma once
// CPU ComputeKernel wrappers of the mixture-of-experts routing ops (moe_router_fwd/bwd,
// moe_permute, moe_unpermute), called by makeCpuKernel's switch (cpu_kernels.cpp). Buffers are
// float32, sized as the ops' memory rules in events/compute_op_rules.cpp count them.

#include <cstdint>
#include <memory>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim::cpu {

// InputError naming the signature when topk exceeds experts or does not divide the rows.
std::unique_ptr<ComputeKernel> makeMoeKernel(const Event& event, uint64_t seed);

}  // namespace evsim::cpu

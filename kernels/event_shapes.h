#pragma once
// What both kernel factories (CPU and CUDA) read from an event before allocating anything: the
// checks they share, so the two backends refuse the same events with the same message, and the
// attention shape. Host-only (includes events/event.h, which nvcc's C++17 does not compile).

#include <string_view>

#include "events/event.h"
#include "kernels/kernel_params.h"

namespace evsim {

// InputError naming the signature for an fp8 event that is not a GEMM: FP8 is for GEMM operands
// only (Transformer Engine's recipe); the planner keeps every other op in bf16. `backend` names
// who asked ("CPU", "CUDA").
void checkKernelDType(const Event& event, const ComputeOpKind& kind, std::string_view backend);

// InputError naming the signature for a rope event with an odd dim: rotate-half pairs channel i
// with channel i + dim/2.
void checkRopeDim(const Event& event);

// InputError naming the signature for a routing event whose topk exceeds its experts
// (moe_router_*) or does not divide its rows (moe_unpermute).
void checkMoeShape(const Event& event);

// The flash_attn event's dims (batch groups seq dim causal) as a shape.
kernel_params::AttentionShape attentionShape(const Event& event);

}  // namespace evsim

#pragma once
// The memory-bound kernels Transformer Engine's ring attention runs beside its fused-attention
// calls (AttnFuncWithCPAndKVP2P: cp_comm_type p2p, and the ring of a2a+p2p), read from
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py (NVIDIA/
// TransformerEngine d0067d0; the same structure since TE 1.x, with cuDNN's FusedAttention, the
// backend TE prefers on Hopper). Causal attention, the load-balanced split (rank r holds chunks r
// and 2R-1-r of a ring of R ranks), BF16/FP16 attention, the sbhd layout Megatron uses. q: the
// rank's Q (and its output O, dO, dQ) bytes; k: its K (and V, dK, dV) bytes each.
//
// Forward, ring step i of rank r: i = 0 the diagonal block; 1 <= i <= r the "lower-triangle"
// (all queries against the first half of the received K/V); i > r the "upper-triangle" (the second
// half of the queries against all of K/V). Megatron hands TE sbhd tensors (TEDotProductAttention's
// qkv_format 'sbhd'), viewed as [2, s/2C, b, h, d], so a half is `x[0]` or `x[1]`: contiguous, and
// the step's `.contiguous()` copies no byte (bshd, batch first, would copy: not modelled).
//   cp_kv_pack:            torch.cat((k.view(-1), v.view(-1))), the first send buffer: 2k -> 2k;
//   cp_out_correction_init: after the loop, flash_attn_fwd_out_correction_init on step 0's output
//                          (q -> q; the fp32 log-sum-exp rows, q/(2d) of them, left out);
//   cp_out_correction:     flash_attn_fwd_out_correction (out += O_i exp(lse_i - lse), 2q -> q)
//                          for i <= r, the second-half one (q -> q/2) for i > r: mean 1.5q ->
//                          0.75q.
// Backward, step i: i = R-1 the diagonal; i >= R-1-r lower-triangle; else upper-triangle (halves
// again views under sbhd).
//   cp_kv_grad_buffer:     p2p_comm_buffers[0][0].copy_(kv): 2k -> 2k;
//   cp_dq_accumulate, cp_dk_accumulate, cp_dv_accumulate: each step's gradient into the running
//                          one (dq.add_(dq_), dk.add_(dk_), dv.add_(dv_), or a copy_ at the first):
//                          a full-size add (2x -> x, x = q or k) or a half-size one (x -> x/2)
//                          by section; worked per rank (the branches of the causal, non-fp8 path)
//                          each tensor totals x(R + r) read, x(R + r + 1)/2 written for dq, and
//                          the mirror image for dk and dv; over the ring's ranks both are
//                          x(3R - 1)/2 read and x(3R + 1)/4 written: the first step a copy (x -> x)
//                          and each later one the mean of a full and a half add (1.5x -> 0.75x).
// TE's backward step adds dQ before waiting for the step's exchange, dK and dV after (they go
// into the received running sums): the step's exchange runs beside the step and its dQ
// accumulation (ops/cp_attention.cpp).
// The mean rank is taken because the ring runs its ranks in lockstep (each step waits for its
// neighbour's K/V) and eventsim times one representative rank; byte counts are rounded down to
// whole bytes.

#include <cstdint>

#include "ops/eager_ops.h"

namespace evsim {

// `ring`: R >= 2; `q`, `k`: the rank's Q and K bytes (as above).
EagerKernel cpRingKvPack(int64_t k);
EagerKernels cpRingOutCorrections(int ring, int64_t q);  // R kernels, after the loop
EagerKernel cpRingKvGradBuffer(int64_t k);
// Step `step` (0-based) of the backward: its dQ, dK and dV accumulations (3 kernels, in that
// order: the step's exchange runs beside the first).
EagerKernels cpRingGradAccumulations(int step, int64_t q, int64_t k);

}  // namespace evsim

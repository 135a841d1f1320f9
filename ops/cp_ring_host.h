#pragma once
// What Transformer Engine's ring loop asks of the host, op by op: the torch calls that
// AttnFuncWithCPAndKVP2P (cp_comm_type p2p, and the ring of a2a+p2p) makes from inside its one
// autograd function for each op eventsim places on the ring (ops/cp_attention.cpp,
// ops/cp_ring_copies.h). A framework op (a Megatron module's forward or an autograd node's
// backward) costs the device file's host_op_us, the A100 fit's per-op average (65.2 us); these ops
// are issued by the loop's own Python, with no module, hook or autograd node around them, so each
// costs its calls times host_call_us, one eager call's host path (Python, dispatcher, launch;
// 6.94 us measured for `add_` on the H100 machine, configs/devices/measurements/h100-sxm5-80gb/
// torch_host.csv).
//
// Counted in transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py
// (NVIDIA/TransformerEngine d0067d0) for the path Megatron runs: sbhd, causal, BF16/FP16,
// FusedAttention, cp_size > 2 (isend and irecv one by one; batch_isend_irecv at cp_size 2 adds a
// call). A call is every call from Python into torch, torch.distributed or TE's extension: a
// kernel (add_, copy_, empty_like, the compiled corrections), a view or index (x.view, x[0], a
// slice), a stream or event call, a request's wait. Where sections differ (diagonal, lower,
// upper triangle) the mean over the ring's ranks is taken, as cp_ring_copies.h does for bytes.
//
// Forward (AttnFuncWithCPAndKVP2P.forward):
//   cp_kv_pack        3: k.view, v.view, torch.cat.
//   cp_kv_exchange    3: torch.empty_like for the receive buffer, dist.isend, dist.irecv.
//   ring step j       stream switch in and out (current_stream, set_stream, set_stream: 3); the
//                     previous step's two requests waited (2, none at step 0); K and V sliced and
//                     viewed out of the received buffer (4); the section's Q, K, V views (3);
//                     .contiguous() on the halves (lower triangle 2, upper 1: 1.5 at j >= 1); the
//                     fused-attention call (kFusedAttentionCalls); then, on the other stream, the
//                     running log-sum-exp correction of this step's output (wait_event but at
//                     step 0, the stream switch 3, squeeze_, the compiled correction or at step 0
//                     a clone, record_event: 7, 6 at step 0; the last step's has no record_event
//                     and the loop then joins the streams with one wait_stream: the same 7).
//                     Step 0: 3 + 4 + 3 + F + 6 = 16 + F; later steps 3 + 2 + 4 + 3 + 1.5 + F + 7
//                     = 20.5 + F.
//   cp_out_correction(_init)  2: out.view and the compiled correction; the first also the final
//                     out.view and out.to (4).
// Backward (AttnFuncWithCPAndKVP2P.backward, one stream):
//   cp_kv_grad_buffer 3: p2p_comm_buffers[0][0] indexed, copy_ (and the buffer list's index).
//   cp_kv_grad_exchange  the previous step's requests waited at the top (2, none at step 0); the
//                     send and receive halves indexed at the first and last steps (2); dist.isend,
//                     dist.irecv (2); "wait until dKV is received" (2): 6 at step 0 and the
//                     middle steps, 8 at the last.
//   ring step j       kv indexed out of the buffer (1); K and V sliced and viewed (4); the
//                     section's Q, K, V, O, dO views (5); .contiguous() (lower 2, upper 3: 2.5;
//                     none on the diagonal, the last step); the fused-attention call (F):
//                     12.5 + F, 10 + F at the last step.
//   cp_dq_accumulate  2: dq[1] indexed and add_ (or dq_.view and add_; copy_ at the first).
//   cp_dk_accumulate  5: the received dKV half indexed (1), dk sliced and viewed (2), dk_.view
//                     where the section needs it (0.5), dk[0] indexed and add_ (1.5).
//   cp_dv_accumulate  4: as dk, without the buffer index.
// F, the fused-attention call (fused_attn_fwd / fused_attn_bwd: TE's Python wrapper, then its
// C++ allocating the outputs and auxiliary tensors, the RNG state, cuDNN's graph-cache lookup and
// execute): 4 calls, the least certain entry (no published host time of one TE fused-attention
// call was found; docs/VALIDATION.md, Session 24, host28).
// Python between the calls (argument lists of 14 and 27 entries built per step, the wrappers'
// keyword handling) is not counted: the counts are a floor on the loop's Python.

namespace evsim {

inline constexpr double kFusedAttentionCalls = 4;

inline constexpr double kCpKvPackCalls = 3;
inline constexpr double kCpKvExchangeCalls = 3;
// Forward step `step` (0-based) of a ring of `ring` steps.
inline constexpr double cpRingForwardStepCalls(int step) {
  return (step == 0 ? 16 : 20.5) + kFusedAttentionCalls;
}
// The output corrections after the loop: the first (init) also the final view and cast.
inline constexpr double cpOutCorrectionCalls(int index) { return index == 0 ? 4 : 2; }

inline constexpr double kCpKvGradBufferCalls = 3;
inline constexpr double cpRingBackwardExchangeCalls(int step, int ring) {
  return step + 1 == ring ? 8 : 6;
}
inline constexpr double cpRingBackwardStepCalls(int step, int ring) {
  return (step + 1 == ring ? 10 : 12.5) + kFusedAttentionCalls;
}
// The step's dQ, dK and dV accumulations (cpRingGradAccumulations' order), `which` 0, 1, 2.
inline constexpr double cpGradAccumulationCalls(int which) {
  return which == 0 ? 2 : (which == 1 ? 5 : 4);
}

}  // namespace evsim

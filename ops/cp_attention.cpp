// The fused attention core under context parallelism, one op list per --cp-comm-type
// (ops/cp_comm.h has what Transformer Engine runs for each). With b the micro-batch, a and g the
// query and key/value heads, d the head size, t the TP size, C the CP size, T = b s / C the rank's
// tokens and e the model dtype's bytes, the rank's Q (and the output O) is q = e T (a/t) d bytes,
// its K and V k = e T (g/t) d bytes each. Message sizes follow nccl-tests (an all-gather's and a
// reduce-scatter's the whole gathered buffer, an all-to-all's the rank's send buffer):
//   p2p:       C steps; beside each of the first C-1 a p2p of K and V to the ring neighbour (2k);
//              backward one beside every step, as TE's AttnFuncWithCPAndKVP2P.backward sends its
//              [KV, dKV] buffer: step 0 K and V (2k), steps 1 to C-2 K, V, dK, dV (4k), step C-1
//              dK and dV (2k): 4k (C-1) in all;
//   a2a:       forward a2a of Q (q), K (k), V (k); one causal call over s on a/(tC) heads; a2a of
//              O (q). Backward a2a of dO (q); the call's backward; a2a of dQ (q), dK, dV (k);
//   allgather: forward all-gathers of K and V (C k each); the rank's causal blocks; backward the
//              same gathers, the blocks' backward, reduce-scatters of dK and dV (C k each);
//   a2a+p2p:   the a2a steps over A ranks around a ring of R = C / A steps on s/R queries and
//              a/(tA) heads, whose exchanges carry what p2p's do (backward 2k, 4k..., 2k).
// Every variant does the same attention work: C causal blocks of s/C queries (p2p), one causal
// s x s over a/(tC) heads (a2a) and R causal blocks of s/R over a/(tA) heads all run
// 2 s^2 (a/t) d / C multiply-adds forward. The allgather's two calls (query chunks r and 2C-1-r
// of s/2C against the gathered keys up to their position: (r + 1/2) + (2C - r - 1/2) = 2C chunk
// squares) are costed as the C causal s/C blocks they add up to, as the ring's steps.
// Only the p2p exchanges overlap compute (TE's ring); the collectives are exposed: TE overlaps
// each a2a with the previous one's reordering copies only, and the allgather waits for K/V.

#include "ops/cp_ring_copies.h"
#include "ops/cp_ring_host.h"
#include "ops/layer_ops.h"

namespace evsim {

Event LayerOpBuilder::flashAttentionStep(bool backward, int64_t seq, int head_split) const {
  const LayerShape& s = shape_;
  const int64_t heads = s.micro_batch * s.heads / s.tp / head_split;
  const int64_t kv_heads = s.micro_batch * s.kvHeadsIntoAttention() / s.tp / head_split;
  return makeCompute(backward ? "flash_attn_bwd" : "flash_attn_fwd",
                     {{"batch", heads}, {"groups", kv_heads}, {"seq", seq}, {"dim", s.headDim()},
                      {"causal", 1}},
                     "", s.dtype);
}

void LayerOpBuilder::cpRingExchange(OpList& out, int layer, std::string_view name, int64_t bytes) {
  Event e = makeCommunication(EventKind::kP2P, bytes, shape_.cp_ring, shape_.dtype);
  OpInstance op{table_.intern(e), Stream::kCpComm, layer, name, recomputing_};
  op.overlap_ops = 1;
  out.push_back(op);
}

void LayerOpBuilder::cpCollective(OpList& out, int layer, std::string_view name, EventKind kind,
                                  int64_t bytes) {
  Event e = makeCommunication(kind, bytes, shape_.cp_group, shape_.dtype);
  out.push_back(OpInstance{table_.intern(e), Stream::kCpComm, layer, name, recomputing_});
}

void LayerOpBuilder::ringAttention(OpList& out, int layer, bool backward, const RingAttention& r) {
  // Transformer Engine's copies and merges around its ring (ops/cp_ring_copies.h), on K and V of
  // k bytes each. Under TE every op of the ring is issued by the loop's own Python, not as a
  // framework op: its host time is the torch calls it makes (ops/cp_ring_host.h).
  const bool copies = r.copies && r.ring > 1;
  const int64_t k = r.kv_block_bytes / 2;
  auto issuedBy = [&](double calls) {
    if (copies) out.back().host_calls = calls;
  };
  if (copies) {
    const EagerKernel buffer = backward ? cpRingKvGradBuffer(k) : cpRingKvPack(k);
    eagerKernels(out, layer, std::span(&buffer, 1));
    issuedBy(backward ? kCpKvGradBufferCalls : kCpKvPackCalls);
  }
  for (int j = 0; j < r.ring; ++j) {
    // What travels while this step computes (TE's ring; after an a2a each block is s/R tokens on
    // a/(tA) heads: the same bytes). Forward: the next K/V block, beside each step but the last.
    // Backward, beside every step (TE's send buffer [KV, dKV]): step 0 sends the K/V block alone
    // (no gradient summed yet), the middle steps K/V and the running dK/dV sums, the last step
    // the sums alone (no K/V needed after it).
    int64_t bytes = 0;
    if (r.ring > 1 && !backward && j + 1 < r.ring) bytes = r.kv_block_bytes;
    if (r.ring > 1 && backward) {
      bytes = (j == 0 || j + 1 == r.ring) ? r.kv_block_bytes : 2 * r.kv_block_bytes;
    }
    if (bytes > 0) {
      cpRingExchange(out, layer, backward ? "cp_kv_grad_exchange" : "cp_kv_exchange", bytes);
      issuedBy(backward ? cpRingBackwardExchangeCalls(j, r.ring) : kCpKvExchangeCalls);
      // TE waits for the exchange only before adding the step's dK and dV into the received
      // running sums ("wait until dKV is received"): the step's dQ accumulation runs beside it.
      if (copies && backward) out.back().overlap_ops = 2;
    }
    compute(out, layer,
            j == 0 ? (backward ? "flash_attention_bwd" : "flash_attention")
                   : (backward ? "flash_attention_ring_step_bwd" : "flash_attention_ring_step"),
            r.step, 0, j == 0 ? r.saved_bytes : 0);
    issuedBy(backward ? cpRingBackwardStepCalls(j, r.ring) : cpRingForwardStepCalls(j));
    if (copies && backward) {
      const EagerKernels sums = cpRingGradAccumulations(j, r.q_bytes, k);
      for (size_t i = 0; i < sums.size(); ++i) {
        eagerKernels(out, layer, std::span(&sums[i], 1));
        issuedBy(cpGradAccumulationCalls(static_cast<int>(i)));
      }
    }
  }
  if (copies && !backward) {
    const EagerKernels corrections = cpRingOutCorrections(r.ring, r.q_bytes);
    for (size_t i = 0; i < corrections.size(); ++i) {
      eagerKernels(out, layer, std::span(&corrections[i], 1));
      issuedBy(cpOutCorrectionCalls(static_cast<int>(i)));
    }
  }
}

void LayerOpBuilder::flashAttentionCore(OpList& out, int layer, bool backward) {
  const LayerShape& s = shape_;
  const int64_t heads = s.micro_batch * s.heads / s.tp;  // query heads on this rank, times b
  const int64_t kv_heads = s.micro_batch * s.kvHeadsIntoAttention() / s.tp;
  const int64_t q_bytes = e() * heads * s.localSeq() * s.headDim();
  const int64_t kv_bytes = e() * kv_heads * s.localSeq() * s.headDim();
  // What the forward keeps (on its first call): the rank's Q, K, V and log-sum-exp (after an a2a
  // the same bytes: s tokens on a/(tC) heads); K/V blocks received or gathered are not kept.
  const int64_t saved = backward ? 0 : q_bytes + 2 * kv_bytes + kLseBytes * heads * s.localSeq();
  const char* first = backward ? "flash_attention_bwd" : "flash_attention";

  if (s.cp > 1 && s.cp_comm == CpComm::kAllGather) {
    const int64_t gathered = int64_t{s.cp} * kv_bytes;
    cpCollective(out, layer, backward ? "cp_k_regather" : "cp_k_allgather", EventKind::kAllGather,
                 gathered);
    cpCollective(out, layer, backward ? "cp_v_regather" : "cp_v_allgather", EventKind::kAllGather,
                 gathered);
    const Event block = flashAttentionStep(backward, s.localSeq(), 1);
    for (int j = 0; j < s.cp; ++j) {
      compute(out, layer,
              j == 0 ? first
                     : (backward ? "flash_attention_gathered_block_bwd"
                                 : "flash_attention_gathered_block"),
              block, 0, j == 0 ? saved : 0);
    }
    if (backward) {
      cpCollective(out, layer, "cp_dk_reduce_scatter", EventKind::kReduceScatter, gathered);
      cpCollective(out, layer, "cp_dv_reduce_scatter", EventKind::kReduceScatter, gathered);
    }
    return;
  }

  // p2p, a2a and a2a+p2p (and no CP: one call): the a2a around a ring of R steps.
  const int a2a = s.cpA2a(), ring = s.cpRing();
  if (a2a > 1) {
    if (backward) {
      cpCollective(out, layer, "cp_dout_a2a", EventKind::kAllToAll, q_bytes);
    } else {
      cpCollective(out, layer, "cp_q_a2a", EventKind::kAllToAll, q_bytes);
      cpCollective(out, layer, "cp_k_a2a", EventKind::kAllToAll, kv_bytes);
      cpCollective(out, layer, "cp_v_a2a", EventKind::kAllToAll, kv_bytes);
    }
  }
  RingAttention r;
  r.step = flashAttentionStep(backward, s.seq / ring, a2a);
  r.ring = ring;
  r.kv_block_bytes = 2 * kv_bytes;
  r.saved_bytes = saved;
  r.copies = s.te_ring_copies;
  r.q_bytes = q_bytes;
  ringAttention(out, layer, backward, r);
  if (a2a > 1) {
    if (backward) {
      cpCollective(out, layer, "cp_dq_a2a", EventKind::kAllToAll, q_bytes);
      cpCollective(out, layer, "cp_dk_a2a", EventKind::kAllToAll, kv_bytes);
      cpCollective(out, layer, "cp_dv_a2a", EventKind::kAllToAll, kv_bytes);
    } else {
      cpCollective(out, layer, "cp_out_a2a", EventKind::kAllToAll, q_bytes);
    }
  }
}

}  // namespace evsim

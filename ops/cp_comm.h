#pragma once
// How context parallelism exchanges attention's inputs: Megatron-LM's --cp-comm-type, Transformer
// Engine's cp_comm_type (transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py). Each rank holds 2 of the 2C sequence chunks (chunks r and 2C-1-r, the
// load-balanced causal split), and the variants differ in what travels and what it overlaps:
//   p2p: ring attention (AttnFuncWithCPAndKVP2P): C steps of one causal block of the rank's s/C
//     queries each; each step's K/V block comes from the ring neighbour while the step before it
//     computes; the backward sends K, V and their gradients the same way;
//   a2a: DeepSpeed-Ulysses (AttnFuncWithCPAndQKVOA2A): all-to-all of Q, K and V over the C ranks
//     (the sequence gathered, the heads scattered), attention over the whole sequence on a/(tC)
//     query heads, all-to-all of the output back; the backward the same with dO, then dQ, dK, dV.
//     TE overlaps each all-to-all only with the reordering copies of the one before: exposed;
//   allgather: the Llama 3 paper's (sec. 3.3.2; AttnFuncWithCPAndKVAllGather, "KV all-gather
//     between CP ranks is exposed"): all-gather of K and of V, then the rank's two query chunks
//     attend to the gathered K/V up to their position (two calls on two streams); the backward
//     gathers K and V again and reduce-scatters their full-length gradients;
//   a2a+p2p: hierarchical (--hierarchical-context-parallel-sizes A R, A x R = C): a2a over A
//     consecutive CP ranks, then ring attention over the R ranks of the same a2a index (s/R
//     tokens, a/(tA) heads on each), then the output's a2a back.

#include <string_view>

namespace evsim {

enum class CpComm { kP2p, kA2a, kAllGather, kA2aP2p };
std::string_view cpCommName(CpComm comm);  // "p2p", "a2a", "allgather", "a2a+p2p"
// Megatron's spellings ("all_gather", TE's, too); throws InputError naming `flag` otherwise. A
// per-layer list ("p2p a2a ...", Megatron's nargs='+') is refused: one type for every layer.
CpComm parseCpComm(std::string_view text, std::string_view flag = "--cp-comm-type");

// Ranks of the CP all-to-all: C for a2a, `a2a` (the first hierarchical size) for a2a+p2p, else 1.
int cpA2aSize(CpComm comm, int cp, int a2a);
// Ranks of the CP ring: C for p2p, C / a2a for a2a+p2p, else 1 (a2a and allgather have none).
int cpRingSize(CpComm comm, int cp, int a2a);

}  // namespace evsim

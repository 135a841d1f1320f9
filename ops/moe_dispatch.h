#pragma once
// What DeepEP's normal (high-throughput) dispatch and combine kernels move per token
// (deepseek-ai/DeepEP, the kernels Megatron-LM runs with --moe-token-dispatcher-type flex
// --moe-enable-deepep): a token goes ONCE to each node that holds one of its k experts, over RDMA
// to the GPU of the same local rank there (the "rail" hop: one NIC per GPU), which forwards it
// over NVLink to each GPU of that node holding one of its experts (the second hop); the two hops
// are pipelined in chunks inside one kernel, so a dispatch takes as long as the slower hop. The
// combine is the reverse with the same bytes. Megatron's all-to-all dispatcher instead sends the k
// copies of every token, one per expert, wherever they go.
//
// Expected distinct destinations of a token, drawing its k experts uniformly without
// replacement from a pool (nothing here models which experts a router prefers):
//   the pool: the experts of the L nodes a token may reach, L = the EP group's nodes N, or, with
//     node-limited routing (MoeSpec::router_groups G, router_group_topk M; DeepSeek-V3's G = 8
//     groups, M = 4), L = min(N, M x N / G) when G is a multiple of N or N of G (a group on one
//     node or spanning N / G nodes): an upper bound, as chosen groups can share a node;
//   nodes_per_token = L (1 - C(X - x_n, k) / C(X, k)), X = L x E / N experts in the pool, x_n = E /
//   N
//     per node (P(a node of the pool holds none of the k));
//   ranks_per_token = L r (1 - C(X - x_r, k) / C(X, k)), x_r = E / (N r) experts per rank.
// The RDMA hop's buffer is nodes_per_token copies of every token, (N-1)/N of them off the node
// (the L nodes are a uniformly random subset); the NVLink hop's is ranks_per_token copies, (r-1)/r
// of them to another GPU of the node. Both as all-to-all "size" (events/event.h).

#include <cstdint>

#include "config/model_config.h"

namespace evsim {

struct DispatchFanout {
  double nodes_per_token = 0;   // distinct nodes among a token's k experts (own node included)
  double ranks_per_token = 0;   // distinct EP ranks among them
  int64_t reachable_nodes = 0;  // L above
};

// For an EP group of `nodes` x `ranks_per_node` ranks holding moe.num_experts experts (E divisible
// by the group, as strategyViolation requires).
DispatchFanout deepEpFanout(const MoeSpec& moe, int nodes, int ranks_per_node);

// C(X - x, k) / C(X, k): the chance that k draws without replacement from X miss a given x.
double missProbability(int64_t pool, int64_t held, int64_t draws);

}  // namespace evsim

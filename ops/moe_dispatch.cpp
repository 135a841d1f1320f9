// DeepEP's per-token fan-out; ops/moe_dispatch.h states the model.
#include "ops/moe_dispatch.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

double missProbability(int64_t pool, int64_t held, int64_t draws) {
  EVSIM_CHECK(pool >= held && held >= 0 && draws >= 0 && draws <= pool,
              "miss probability of {} of {} in {} draws", held, pool, draws);
  double p = 1;
  for (int64_t i = 0; i < draws; ++i) {
    if (pool - held - i <= 0) return 0;
    p *= static_cast<double>(pool - held - i) / static_cast<double>(pool - i);
  }
  return p;
}

DispatchFanout deepEpFanout(const MoeSpec& moe, int nodes, int ranks_per_node) {
  EVSIM_CHECK(
      nodes >= 1 && ranks_per_node >= 1 && moe.num_experts % (int64_t{nodes} * ranks_per_node) == 0,
      "DeepEP fan-out of {} experts over {} nodes x {} ranks", moe.num_experts, nodes,
      ranks_per_node);
  const int64_t N = nodes, G = moe.router_groups, M = moe.router_group_topk;
  int64_t L = N;
  if (G > 0 && G % N == 0) L = std::min(N, M);                     // whole groups on each node
  if (G > 0 && G < N && N % G == 0) L = std::min(N, M * (N / G));  // a group over N/G nodes
  const int64_t per_node = moe.num_experts / N, per_rank = per_node / ranks_per_node;
  const int64_t pool = L * per_node, k = moe.top_k;
  DispatchFanout out;
  out.reachable_nodes = L;
  out.nodes_per_token = static_cast<double>(L) * (1 - missProbability(pool, per_node, k));
  out.ranks_per_token =
      static_cast<double>(L * ranks_per_node) * (1 - missProbability(pool, per_rank, k));
  return out;
}

}  // namespace evsim

#include "events/rank_layout.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

namespace {
// Larger is worse: crossing more nodes, then crowding fewer ranks on each.
bool worse(const Placement& a, const Placement& b) {
  if (a.nodes != b.nodes) return a.nodes > b.nodes;
  return a.ranks_per_node < b.ranks_per_node;
}
}  // namespace

RankLayout::RankLayout(const Strategy& strategy, int gpus_per_node)
    : tp_(strategy.tp), pp_(strategy.pp), dp_(strategy.dp), gpus_per_node_(gpus_per_node) {
  EVSIM_CHECK(tp_ > 0 && pp_ > 0 && dp_ > 0 && gpus_per_node_ > 0, "bad layout");
}

RankCoord RankLayout::coord(int64_t rank) const {
  RankCoord c;
  c.tp = static_cast<int>(rank % tp_);
  c.dp = static_cast<int>((rank / tp_) % dp_);
  c.pp = static_cast<int>(rank / (int64_t{tp_} * dp_));
  return c;
}

Placement RankLayout::placementOf(const std::vector<int64_t>& ranks) const {
  // Groups are arithmetic progressions of ranks, so equal nodes are adjacent once sorted: count
  // runs instead of filling a map (this runs for every group of every plan of a search).
  std::vector<int64_t> sorted;
  const std::vector<int64_t>* in = &ranks;
  if (!std::is_sorted(ranks.begin(), ranks.end())) {
    sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    in = &sorted;
  }
  Placement p;
  p.group_size = static_cast<int>(in->size());
  p.nodes = 0;
  p.ranks_per_node = 0;
  int run = 0, last_node = -1;
  for (int64_t r : *in) {
    const int n = node(r);
    if (p.nodes == 0 || n != last_node) {
      ++p.nodes;
      run = 0;
      last_node = n;
    }
    p.ranks_per_node = std::max(p.ranks_per_node, ++run);
  }
  return p;
}

Placement RankLayout::tpGroup(int dp, int pp) const {
  std::vector<int64_t> ranks;
  for (int t = 0; t < tp_; ++t) ranks.push_back(rank(t, dp, pp));
  return placementOf(ranks);
}

Placement RankLayout::dpGroup(int tp, int pp) const {
  std::vector<int64_t> ranks;
  for (int d = 0; d < dp_; ++d) ranks.push_back(rank(tp, d, pp));
  return placementOf(ranks);
}

Placement RankLayout::pipelinePair(int tp, int dp, int pp) const {
  return stagePair(tp, dp, pp, pp + 1);
}

Placement RankLayout::stagePair(int tp, int dp, int from_pp, int to_pp) const {
  EVSIM_CHECK(from_pp >= 0 && from_pp < pp_ && to_pp >= 0 && to_pp < pp_ && from_pp != to_pp,
              "stage pair {} -> {} of {} stages", from_pp, to_pp, pp_);
  return placementOf({rank(tp, dp, from_pp), rank(tp, dp, to_pp)});
}

Placement RankLayout::worstTpGroup(int pp) const {
  Placement worst = tpGroup(0, pp);
  for (int d = 1; d < dp_; ++d) {
    Placement p = tpGroup(d, pp);
    if (worse(p, worst)) worst = p;
  }
  return worst;
}

Placement RankLayout::worstDpGroup(int pp) const {
  Placement worst = dpGroup(0, pp);
  for (int t = 1; t < tp_; ++t) {
    Placement p = dpGroup(t, pp);
    if (worse(p, worst)) worst = p;
  }
  return worst;
}

Placement RankLayout::worstPipelinePair(int dp, int pp) const {
  return worstStagePair(dp, pp, pp + 1);
}

Placement RankLayout::worstStagePair(int dp, int from_pp, int to_pp) const {
  Placement worst = stagePair(0, dp, from_pp, to_pp);
  for (int t = 1; t < tp_; ++t) {
    Placement p = stagePair(t, dp, from_pp, to_pp);
    if (worse(p, worst)) worst = p;
  }
  return worst;
}

}  // namespace evsim

#include "plan/rank_layout.h"

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
    : tp_(strategy.tp),
      pp_(strategy.pp),
      dp_(strategy.dp),
      cp_(strategy.cp),
      ep_(strategy.ep),
      etp_(strategy.expertTp()),
      gpus_per_node_(gpus_per_node) {
  EVSIM_CHECK(tp_ > 0 && pp_ > 0 && dp_ > 0 && cp_ > 0 && ep_ > 0 && etp_ > 0 &&
                  (int64_t{tp_} * dp_) % (int64_t{etp_} * ep_) == 0 && gpus_per_node_ > 0,
              "bad layout");
}

int64_t RankLayout::expertRank(int64_t etp, int64_t ep, int64_t edp, int pp, int cp) const {
  const int64_t i = etp + etp_ * (ep + ep_ * edp);
  return rank(static_cast<int>(i % tp_), static_cast<int>(i / tp_), pp, cp);
}

RankCoord RankLayout::coord(int64_t rank) const {
  RankCoord c;
  c.tp = static_cast<int>(rank % tp_);
  c.cp = static_cast<int>((rank / tp_) % cp_);
  c.dp = static_cast<int>((rank / (int64_t{tp_} * cp_)) % dp_);
  c.pp = static_cast<int>(rank / (int64_t{tp_} * cp_ * dp_));
  return c;
}

Placement RankLayout::placementOf(const std::vector<int64_t>& ranks) const {
  if (std::is_sorted(ranks.begin(), ranks.end())) return placementOfSorted(ranks);
  std::vector<int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  return placementOfSorted(sorted);
}

Placement RankLayout::placementOfSorting(std::vector<int64_t>& ranks) const {
  if (!std::is_sorted(ranks.begin(), ranks.end())) std::sort(ranks.begin(), ranks.end());
  return placementOfSorted(ranks);
}

Placement RankLayout::placementOfSorted(const std::vector<int64_t>& ranks) const {
  // Groups are arithmetic progressions of ranks, so equal nodes are adjacent once sorted: count
  // runs instead of filling a map (this runs for every group of every plan of a search).
  Placement p;
  p.group_size = static_cast<int>(ranks.size());
  p.nodes = 0;
  p.ranks_per_node = 0;
  int run = 0, last_node = -1;
  for (int64_t r : ranks) {
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

void RankLayout::tpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const {
  ranks.clear();
  for (int t = 0; t < tp_; ++t) ranks.push_back(rank(t, c.dp, c.pp, c.cp));
}

void RankLayout::dpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const {
  ranks.clear();
  for (int d = 0; d < dp_; ++d) {
    for (int x = 0; x < cp_; ++x) ranks.push_back(rank(c.tp, d, c.pp, x));
  }
}

void RankLayout::cpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const {
  ranks.clear();
  for (int x = 0; x < cp_; ++x) ranks.push_back(rank(c.tp, c.dp, c.pp, x));
}

void RankLayout::epRanks(const RankCoord& c, std::vector<int64_t>& ranks) const {
  const int64_t i = expertIndex(c);
  ranks.clear();
  for (int e = 0; e < ep_; ++e) {
    ranks.push_back(expertRank(i % etp_, e, i / (int64_t{etp_} * ep_), c.pp, c.cp));
  }
}

void RankLayout::etpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const {
  const int64_t i = expertIndex(c);
  ranks.clear();
  for (int j = 0; j < etp_; ++j) {
    ranks.push_back(expertRank(j, (i / etp_) % ep_, i / (int64_t{etp_} * ep_), c.pp, c.cp));
  }
}

void RankLayout::expertDpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const {
  const int64_t i = expertIndex(c);
  const int64_t groups = int64_t{tp_} * dp_ / (int64_t{etp_} * ep_);
  ranks.clear();
  for (int64_t g = 0; g < groups; ++g) {
    for (int x = 0; x < cp_; ++x)
      ranks.push_back(expertRank(i % etp_, (i / etp_) % ep_, g, c.pp, x));
  }
  std::sort(ranks.begin(), ranks.end());
}

// The vector-returning forms, for executors: the filling forms into a vector of their own.
#define EVSIM_RANKS_BY_VALUE(name)                                      \
  std::vector<int64_t> RankLayout::name(const RankCoord& c) const {    \
    std::vector<int64_t> ranks;                                         \
    name(c, ranks);                                                     \
    return ranks;                                                       \
  }
EVSIM_RANKS_BY_VALUE(tpRanks)
EVSIM_RANKS_BY_VALUE(dpRanks)
EVSIM_RANKS_BY_VALUE(cpRanks)
EVSIM_RANKS_BY_VALUE(epRanks)
EVSIM_RANKS_BY_VALUE(etpRanks)
EVSIM_RANKS_BY_VALUE(expertDpRanks)
#undef EVSIM_RANKS_BY_VALUE

Placement RankLayout::tpGroup(int dp, int pp, int cp) const {
  return placementOf(tpRanks(RankCoord{0, dp, pp, cp}));
}

Placement RankLayout::dpGroup(int tp, int pp) const {
  return placementOf(dpRanks(RankCoord{tp, 0, pp, 0}));
}

Placement RankLayout::cpGroup(int tp, int dp, int pp) const {
  return placementOf(cpRanks(RankCoord{tp, dp, pp, 0}));
}

Placement RankLayout::epGroup(int tp, int dp, int pp, int cp) const {
  return placementOf(epRanks(RankCoord{tp, dp, pp, cp}));
}

Placement RankLayout::etpGroup(int tp, int dp, int pp, int cp) const {
  return placementOf(etpRanks(RankCoord{tp, dp, pp, cp}));
}

Placement RankLayout::expertDpGroup(int tp, int dp, int pp) const {
  return placementOf(expertDpRanks(RankCoord{tp, dp, pp, 0}));
}

Placement RankLayout::pipelinePair(int tp, int dp, int pp) const {
  return stagePair(tp, dp, pp, pp + 1);
}

Placement RankLayout::stagePair(int tp, int dp, int from_pp, int to_pp, int cp) const {
  EVSIM_CHECK(from_pp >= 0 && from_pp < pp_ && to_pp >= 0 && to_pp < pp_ && from_pp != to_pp,
              "stage pair {} -> {} of {} stages", from_pp, to_pp, pp_);
  // placementOf for two distinct ranks, without building a vector: this runs for every stage
  // pair of every DP replica, TP and CP rank of every plan a search simulates (N x v calls).
  const bool same_node = node(rank(tp, dp, from_pp, cp)) == node(rank(tp, dp, to_pp, cp));
  Placement p;
  p.group_size = 2;
  p.nodes = same_node ? 1 : 2;
  p.ranks_per_node = same_node ? 2 : 1;
  return p;
}

Placement RankLayout::worstTpGroup(int pp) const {
  std::vector<int64_t> ranks;
  auto group = [&](int dp, int cp) {
    tpRanks(RankCoord{0, dp, pp, cp}, ranks);
    return placementOfSorting(ranks);
  };
  Placement worst = group(0, 0);
  for (int d = 0; d < dp_; ++d) {
    for (int x = 0; x < cp_; ++x) {
      Placement p = group(d, x);
      if (worse(p, worst)) worst = p;
    }
  }
  return worst;
}

Placement RankLayout::worstCpGroup(int pp) const {
  std::vector<int64_t> ranks;
  auto group = [&](int tp, int dp) {
    cpRanks(RankCoord{tp, dp, pp, 0}, ranks);
    return placementOfSorting(ranks);
  };
  Placement worst = group(0, 0);
  for (int t = 0; t < tp_; ++t) {
    for (int d = 0; d < dp_; ++d) {
      Placement p = group(t, d);
      if (worse(p, worst)) worst = p;
    }
  }
  return worst;
}

// Each group once: its member with EP index 0 (or expert-TP index 0, or expert-DP index 0).
Placement RankLayout::worstEpGroup(int pp) const {
  std::vector<int64_t> ranks;
  auto group = [&](int tp, int dp, int cp) {
    epRanks(RankCoord{tp, dp, pp, cp}, ranks);
    return placementOfSorting(ranks);
  };
  Placement worst = group(0, 0, 0);
  const int64_t n = int64_t{tp_} * dp_;
  for (int64_t i = 0; i < n; ++i) {
    if ((i / etp_) % ep_ != 0) continue;
    for (int x = 0; x < cp_; ++x) {
      Placement p = group(static_cast<int>(i % tp_), static_cast<int>(i / tp_), x);
      if (worse(p, worst)) worst = p;
    }
  }
  return worst;
}

Placement RankLayout::worstEtpGroup(int pp) const {
  std::vector<int64_t> ranks;
  auto group = [&](int tp, int dp, int cp) {
    etpRanks(RankCoord{tp, dp, pp, cp}, ranks);
    return placementOfSorting(ranks);
  };
  Placement worst = group(0, 0, 0);
  const int64_t n = int64_t{tp_} * dp_;
  for (int64_t i = 0; i < n; i += etp_) {
    for (int x = 0; x < cp_; ++x) {
      Placement p = group(static_cast<int>(i % tp_), static_cast<int>(i / tp_), x);
      if (worse(p, worst)) worst = p;
    }
  }
  return worst;
}

Placement RankLayout::worstExpertDpGroup(int pp) const {
  std::vector<int64_t> ranks;
  auto group = [&](int tp, int dp) {
    expertDpRanks(RankCoord{tp, dp, pp, 0}, ranks);
    return placementOfSorting(ranks);
  };
  Placement worst = group(0, 0);
  const int64_t n = int64_t{etp_} * ep_;  // one member of each group: expert-DP index 0
  for (int64_t i = 0; i < n; ++i) {
    Placement p = group(static_cast<int>(i % tp_), static_cast<int>(i / tp_));
    if (worse(p, worst)) worst = p;
  }
  return worst;
}

Placement RankLayout::worstCpRingPair(int pp) const {
  const Placement group = worstCpGroup(pp);
  return group.nodes > 1 ? Placement{2, 2, 1} : Placement{2, 1, 2};
}

Placement RankLayout::worstCpRingPair(int pp, int stride) const {
  EVSIM_CHECK(stride >= 1 && cp_ % stride == 0, "CP ring stride {} of {}", stride, cp_);
  bool crosses = false;
  std::vector<int64_t> ranks;
  for (int t = 0; t < tp_ && !crosses; ++t) {
    for (int d = 0; d < dp_ && !crosses; ++d) {
      for (int a = 0; a < stride && !crosses; ++a) {
        ranks.clear();
        for (int x = a; x < cp_; x += stride) ranks.push_back(rank(t, d, pp, x));
        crosses = placementOfSorting(ranks).nodes > 1;
      }
    }
  }
  return crosses ? Placement{2, 2, 1} : Placement{2, 1, 2};
}

Placement RankLayout::worstCpBlock(int pp, int size) const {
  EVSIM_CHECK(size >= 1 && cp_ % size == 0, "CP block of {} in {}", size, cp_);
  Placement worst;
  bool first = true;
  std::vector<int64_t> ranks;
  for (int t = 0; t < tp_; ++t) {
    for (int d = 0; d < dp_; ++d) {
      for (int base = 0; base < cp_; base += size) {
        ranks.clear();
        for (int x = base; x < base + size; ++x) ranks.push_back(rank(t, d, pp, x));
        const Placement p = placementOfSorting(ranks);
        if (first || worse(p, worst)) worst = p;
        first = false;
      }
    }
  }
  return worst;
}

Placement RankLayout::worstDpGroup(int pp) const {
  std::vector<int64_t> ranks;
  auto group = [&](int tp) {
    dpRanks(RankCoord{tp, 0, pp, 0}, ranks);
    return placementOfSorting(ranks);
  };
  Placement worst = group(0);
  for (int t = 1; t < tp_; ++t) {
    Placement p = group(t);
    if (worse(p, worst)) worst = p;
  }
  return worst;
}

Placement RankLayout::worstPipelinePair(int dp, int pp) const {
  return worstStagePair(dp, pp, pp + 1);
}

Placement RankLayout::worstStagePair(int dp, int from_pp, int to_pp) const {
  Placement worst = stagePair(0, dp, from_pp, to_pp);
  for (int t = 0; t < tp_; ++t) {
    for (int x = 0; x < cp_; ++x) {
      Placement p = stagePair(t, dp, from_pp, to_pp, x);
      if (worse(p, worst)) worst = p;
    }
  }
  return worst;
}

}  // namespace evsim

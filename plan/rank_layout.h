#pragma once
// Megatron-LM rank placement, order tp-cp-ep-dp-pp: TP innermost, then CP, then DP (whose first
// factor E is expert parallelism), then PP.
//   rank(tp, dp, pp, cp) = tp + M * (cp + C * (dp + D * pp)),  node = rank / gpus_per_node
// so a TP group is M consecutive ranks, a CP group strides by M, a DP group by M*C and pipeline
// neighbours by M*C*D. The expert layers regroup the M x D ranks of each (stage, CP rank), taken
// in the order i = tp + M * dp, as ETP x E x (expert DP) with ETP innermost (Megatron's expert
// rank generator, order tp-ep-dp): i's expert-TP index is i % ETP, its EP index (i / ETP) % E,
// its expert-DP index i / (ETP E). The EP group holds the E ranks of one expert-TP and expert-DP
// index (with ETP = M: the E consecutive DP indices around dp, same tp); the ETP group the ETP
// consecutive i; the expert-data-parallel group (replicas of one expert shard) the ranks of one
// expert-TP and EP index, over every CP rank: M D C / (ETP E) ranks.

#include <cstdint>
#include <vector>

#include "events/event.h"
#include "plan/strategy.h"

namespace evsim {

struct RankCoord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  int cp = 0;
};

class RankLayout {
 public:
  RankLayout(const Strategy& strategy, int gpus_per_node);

  int64_t rank(int tp, int dp, int pp, int cp = 0) const {
    return tp + int64_t{tp_} * (cp + int64_t{cp_} * (dp + int64_t{dp_} * pp));
  }
  RankCoord coord(int64_t rank) const;
  int node(int64_t rank) const { return static_cast<int>(rank / gpus_per_node_); }
  int gpuInNode(int64_t rank) const { return static_cast<int>(rank % gpus_per_node_); }

  // How a set of ranks sits on nodes.
  Placement placementOf(const std::vector<int64_t>& ranks) const;
  Placement tpGroup(int dp, int pp, int cp = 0) const;
  // The ranks that reduce dense gradients: every DP and CP index of (tp, pp), D*C ranks.
  Placement dpGroup(int tp, int pp) const;
  Placement cpGroup(int tp, int dp, int pp) const;
  // The E ranks that exchange tokens with (tp, dp).
  Placement epGroup(int tp, int dp, int pp, int cp) const;
  // The ETP ranks that split the experts of (tp, dp) (all-gather the dispatched tokens).
  Placement etpGroup(int tp, int dp, int pp, int cp) const;
  // The ranks that hold the same expert shards as (tp, dp) and reduce their gradients.
  Placement expertDpGroup(int tp, int dp, int pp) const;
  // The members of the same groups, as world ranks (ascending), for executors.
  std::vector<int64_t> tpRanks(const RankCoord& c) const;
  std::vector<int64_t> dpRanks(const RankCoord& c) const;
  std::vector<int64_t> cpRanks(const RankCoord& c) const;
  std::vector<int64_t> epRanks(const RankCoord& c) const;
  std::vector<int64_t> etpRanks(const RankCoord& c) const;
  std::vector<int64_t> expertDpRanks(const RankCoord& c) const;
  // The send/recv pair between (tp, dp, pp) and (tp, dp, pp + 1).
  Placement pipelinePair(int tp, int dp, int pp) const;
  // The send/recv pair between (tp, dp, from_pp) and (tp, dp, to_pp), any two stages (the
  // interleaved schedule's wrap from the last device stage back to the first is not adjacent).
  Placement stagePair(int tp, int dp, int from_pp, int to_pp, int cp = 0) const;

  // Worst (most nodes, then fewest ranks per node) over the TP groups of stage `pp`, the DP groups
  // of stage `pp`, and the TP ranks of pipeline replica `dp` at boundary pp -> pp+1. The modeler
  // simulates the M ranks of a stage in lockstep, so the slowest placement decides.
  Placement worstTpGroup(int pp) const;
  Placement worstDpGroup(int pp) const;
  Placement worstCpGroup(int pp) const;
  Placement worstEpGroup(int pp) const;
  Placement worstEtpGroup(int pp) const;
  Placement worstExpertDpGroup(int pp) const;
  // A ring neighbour pair of the CP group: between nodes when any CP group spans nodes (the ring
  // runs at its slowest link).
  Placement worstCpRingPair(int pp) const;
  // The same for the rings of a2a+p2p (the CP ranks whose index differs by multiples of
  // `stride`, Transformer Engine's p2p group: cp_global_ranks[j * stride + rank_a2a]).
  Placement worstCpRingPair(int pp, int stride) const;
  // Worst over the blocks of `size` consecutive CP ranks of every (tp, dp) at stage pp (the a2a
  // group of a2a+p2p; `size` = C: the CP group).
  Placement worstCpBlock(int pp, int size) const;
  Placement worstPipelinePair(int dp, int pp) const;
  // Worst over the TP ranks of replica `dp` of the pair from_pp -> to_pp (any two stages).
  Placement worstStagePair(int dp, int from_pp, int to_pp) const;

 private:
  // The group members above written into `ranks` (emptied first; its storage reused): the worst*
  // searches fill one vector for all the groups they compare instead of a vector per group
  // (stagePlacements runs them per stage of every placement key of a search).
  void tpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const;
  void dpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const;
  void cpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const;
  void epRanks(const RankCoord& c, std::vector<int64_t>& ranks) const;
  void etpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const;
  void expertDpRanks(const RankCoord& c, std::vector<int64_t>& ranks) const;
  // placementOf, sorting `ranks` in place when they are not sorted (no copy); of sorted ranks.
  Placement placementOfSorting(std::vector<int64_t>& ranks) const;
  Placement placementOfSorted(const std::vector<int64_t>& ranks) const;
  // The rank of expert index (etp, ep, edp) at stage pp and CP rank cp (the header's regrouping).
  int64_t expertRank(int64_t etp, int64_t ep, int64_t edp, int pp, int cp) const;
  // Expert index i = tp + M dp of a coordinate.
  int64_t expertIndex(const RankCoord& c) const { return c.tp + int64_t{tp_} * c.dp; }

  int tp_, pp_, dp_, cp_, ep_, etp_;
  int gpus_per_node_;
};

}  // namespace evsim

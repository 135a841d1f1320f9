#pragma once
// Megatron-LM rank placement, order tp-cp-ep-dp-pp: TP innermost, then CP, then DP (whose first
// factor E is expert parallelism), then PP.
//   rank(tp, dp, pp, cp) = tp + M * (cp + C * (dp + D * pp)),  node = rank / gpus_per_node
// so a TP group is M consecutive ranks, a CP group strides by M, a DP group by M*C and pipeline
// neighbours by M*C*D. The EP group of DP index dp is the E consecutive DP indices containing it;
// the expert-data-parallel group (replicas of one expert) the DP indices with the same dp % E,
// over every CP rank.

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
  // The E ranks that exchange tokens with DP index dp (its block of E consecutive DP indices).
  Placement epGroup(int tp, int dp, int pp, int cp) const;
  // The ranks that hold the same experts as DP index dp and reduce their gradients: D*C/E ranks.
  Placement expertDpGroup(int tp, int dp, int pp) const;
  // The members of the same groups, as world ranks (ascending), for executors.
  std::vector<int64_t> tpRanks(const RankCoord& c) const;
  std::vector<int64_t> dpRanks(const RankCoord& c) const;
  std::vector<int64_t> cpRanks(const RankCoord& c) const;
  std::vector<int64_t> epRanks(const RankCoord& c) const;
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
  Placement worstExpertDpGroup(int pp) const;
  // A ring neighbour pair of the CP group: between nodes when any CP group spans nodes (the ring
  // runs at its slowest link).
  Placement worstCpRingPair(int pp) const;
  Placement worstPipelinePair(int dp, int pp) const;
  // Worst over the TP ranks of replica `dp` of the pair from_pp -> to_pp (any two stages).
  Placement worstStagePair(int dp, int from_pp, int to_pp) const;

 private:
  int tp_, pp_, dp_, cp_, ep_;
  int gpus_per_node_;
};

}  // namespace evsim

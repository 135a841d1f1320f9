#pragma once
// Megatron-LM rank placement: TP innermost, then DP, then PP.
//   rank(tp, dp, pp) = tp + M * (dp + D * pp),  node = rank / gpus_per_node
// so a TP group is M consecutive ranks, a DP group strides by M and pipeline neighbours by M*D.

#include <cstdint>
#include <vector>

#include "events/event.h"
#include "events/strategy.h"

namespace evsim {

struct RankCoord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};

class RankLayout {
 public:
  RankLayout(const Strategy& strategy, int gpus_per_node);

  int64_t rank(int tp, int dp, int pp) const {
    return tp + int64_t{tp_} * (dp + int64_t{dp_} * pp);
  }
  RankCoord coord(int64_t rank) const;
  int node(int64_t rank) const { return static_cast<int>(rank / gpus_per_node_); }
  int gpuInNode(int64_t rank) const { return static_cast<int>(rank % gpus_per_node_); }

  // How a set of ranks sits on nodes.
  Placement placementOf(const std::vector<int64_t>& ranks) const;
  Placement tpGroup(int dp, int pp) const;
  Placement dpGroup(int tp, int pp) const;
  // The send/recv pair between (tp, dp, pp) and (tp, dp, pp + 1).
  Placement pipelinePair(int tp, int dp, int pp) const;
  // The send/recv pair between (tp, dp, from_pp) and (tp, dp, to_pp), any two stages (the
  // interleaved schedule's wrap from the last device stage back to the first is not adjacent).
  Placement stagePair(int tp, int dp, int from_pp, int to_pp) const;

  // Worst (most nodes, then fewest ranks per node) over the TP groups of stage `pp`, the DP groups
  // of stage `pp`, and the TP ranks of pipeline replica `dp` at boundary pp -> pp+1. The modeler
  // simulates the M ranks of a stage in lockstep, so the slowest placement decides.
  Placement worstTpGroup(int pp) const;
  Placement worstDpGroup(int pp) const;
  Placement worstPipelinePair(int dp, int pp) const;
  // Worst over the TP ranks of replica `dp` of the pair from_pp -> to_pp (any two stages).
  Placement worstStagePair(int dp, int from_pp, int to_pp) const;

 private:
  int tp_, pp_, dp_;
  int gpus_per_node_;
};

}  // namespace evsim

// Megatron rank placement: rank = tp + M * (dp + D * pp), node = rank / gpus_per_node, and how
// TP, DP and pipeline groups sit on nodes.

#include "plan/rank_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

Placement placement(int group, int nodes, int rpn) { return Placement{group, nodes, rpn}; }

TEST(RankLayout, MegatronOrderTpInnermostThenDpThenPp) {
  Strategy s = test::strategy("2M2P4D", 4, 64);
  RankLayout layout(s, 4);
  // rank(tp, dp, pp) = tp + 2 * (dp + 4 * pp)
  EXPECT_EQ(layout.rank(0, 0, 0), 0);
  EXPECT_EQ(layout.rank(1, 0, 0), 1);
  EXPECT_EQ(layout.rank(0, 1, 0), 2);
  EXPECT_EQ(layout.rank(0, 3, 0), 6);
  EXPECT_EQ(layout.rank(0, 0, 1), 8);
  EXPECT_EQ(layout.rank(1, 3, 1), 15);
  std::set<int64_t> seen;
  for (int pp = 0; pp < 2; ++pp) {
    for (int dp = 0; dp < 4; ++dp) {
      for (int tp = 0; tp < 2; ++tp) {
        int64_t r = layout.rank(tp, dp, pp);
        seen.insert(r);
        RankCoord c = layout.coord(r);
        EXPECT_EQ(c.tp, tp);
        EXPECT_EQ(c.dp, dp);
        EXPECT_EQ(c.pp, pp);
      }
    }
  }
  EXPECT_EQ(seen.size(), 16u);  // a bijection onto 0..15
  EXPECT_EQ(*seen.rbegin(), 15);
  EXPECT_EQ(layout.node(7), 1);
  EXPECT_EQ(layout.gpuInNode(7), 3);
  EXPECT_EQ(layout.node(8), 2);
}

TEST(RankLayout, BertLargeOnFourNodesOfFour) {
  // 2M2P4D on 4 nodes x 4 GPUs: TP pairs {2k, 2k+1} share a node; the DP group of stage 0, tp 0
  // is ranks 0,2,4,6 on nodes 0,0,1,1; stage 0 (ranks 0..7, nodes 0-1) talks to stage 1 (ranks
  // 8..15, nodes 2-3).
  RankLayout layout(test::strategy("2M2P4D", 4, 64), 4);
  for (int pp = 0; pp < 2; ++pp) {
    for (int dp = 0; dp < 4; ++dp) EXPECT_EQ(layout.tpGroup(dp, pp), placement(2, 1, 2));
    for (int tp = 0; tp < 2; ++tp) EXPECT_EQ(layout.dpGroup(tp, pp), placement(4, 2, 2));
  }
  for (int dp = 0; dp < 4; ++dp) {
    for (int tp = 0; tp < 2; ++tp) EXPECT_EQ(layout.pipelinePair(tp, dp, 0), placement(2, 2, 1));
  }
  EXPECT_EQ(layout.placementOf({0, 2, 4, 6}), placement(4, 2, 2));
  EXPECT_TRUE(layout.dpGroup(0, 0).interNode());
  EXPECT_FALSE(layout.tpGroup(0, 0).interNode());

  ModelConfig model = loadModelConfig(test::configPath("models", "bert-large"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "a40-4x4"));
  IterationPlan plan = buildIterationPlan(model, cluster, test::strategy("2M2P4D", 4, 64));
  for (const StagePlan& s : plan.stages) {
    EXPECT_EQ(s.tp_group, placement(2, 1, 2));
    EXPECT_EQ(s.dp_group, placement(4, 2, 2));
  }
  // Every replica's transfers look alike: one pipeline class with all four replicas.
  ASSERT_EQ(plan.pipelines.size(), 1u);
  EXPECT_EQ(plan.pipelines[0].replicas, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.events[plan.pipelines[0].forward_p2p[0]].event.placement, placement(2, 2, 1));
}

TEST(RankLayout, OneNodeKeepsEveryGroupIntraNode) {
  // BERT-Large 2M2P2D on one node of 8 GPUs: all 8 ranks on node 0.
  ModelConfig model = loadModelConfig(test::configPath("models", "bert-large"));
  ClusterConfig cluster = loadClusterConfig(test::dataPath("clusters/one-node-8.yaml"));
  IterationPlan plan = buildIterationPlan(model, cluster, test::strategy("2M2P2D", 4, 64));
  int comm = 0;
  for (const UniqueEvent& u : plan.events.events()) {
    if (!isCommunication(u.event.kind)) continue;
    ++comm;
    EXPECT_EQ(u.event.placement.nodes, 1) << u.signature;
    EXPECT_FALSE(u.event.placement.interNode()) << u.signature;
    // Every rank of the group on the one node.
    EXPECT_EQ(u.event.placement.ranks_per_node, u.event.placement.group_size) << u.signature;
  }
  EXPECT_EQ(comm, 5);  // TP, cross-entropy, DP x 2 stages, P2P
}

TEST(RankLayout, WorstGroupDecidesWhenGroupsStraddleNodes) {
  // 2M1P3D on nodes of 3 GPUs: TP groups {0,1} (node 0), {2,3} (nodes 0 and 1), {4,5} (node 1).
  RankLayout layout(test::strategy("2M1P3D", 1, 3), 3);
  EXPECT_EQ(layout.tpGroup(0, 0), placement(2, 1, 2));
  EXPECT_EQ(layout.tpGroup(1, 0), placement(2, 2, 1));
  EXPECT_EQ(layout.tpGroup(2, 0), placement(2, 1, 2));
  EXPECT_EQ(layout.worstTpGroup(0), placement(2, 2, 1));
  // DP groups: tp 0 -> {0,2,4} on nodes 0,0,1 (rpn 2); tp 1 -> {1,3,5} on nodes 0,1,1 (rpn 2).
  EXPECT_EQ(layout.worstDpGroup(0), placement(3, 2, 2));
  // {0,3,6}: one rank on each of nodes 0, 1, 2.
  EXPECT_EQ(layout.placementOf({0, 3, 6}), placement(3, 3, 1));
}

TEST(RankLayout, PipelineClassesSplitReplicasByTransferPlacement) {
  // 1M2P3D on nodes of 4 GPUs: rank = dp + 3*pp. Replica 0 sends 0 -> 3 (both node 0, intra);
  // replicas 1 and 2 send 1 -> 4 and 2 -> 5 (node 0 -> node 1, inter). Two classes.
  ModelConfig model = test::model(64, 4, 256, 32, 512, 2);
  IterationPlan plan = buildIterationPlan(model, test::cluster(4), test::strategy("1M2P3D", 1, 3));
  ASSERT_EQ(plan.pipelines.size(), 2u);
  EXPECT_EQ(plan.pipelines[0].replicas, (std::vector<int>{0}));
  EXPECT_EQ(plan.pipelines[1].replicas, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan.pipelineOf(0), 0);
  EXPECT_EQ(plan.pipelineOf(2), 1);
  const Event& intra = plan.events[plan.pipelines[0].forward_p2p[0]].event;
  const Event& inter = plan.events[plan.pipelines[1].forward_p2p[0]].event;
  EXPECT_EQ(intra.placement, placement(2, 1, 2));
  EXPECT_EQ(inter.placement, placement(2, 2, 1));
  // T*h fp16 = 32*64*2 = 4096 B. m = 1, M = 1: replica 0 makes 1 transfer each way (count 2 + 2);
  // replicas 1 and 2 make 2 each way (count 4 + 4).
  EXPECT_EQ(test::countOf(plan.events, "p2p bytes=4096 group=2 nodes=1 rpn=2 dtype=fp16"), 4);
  EXPECT_EQ(test::countOf(plan.events, "p2p bytes=4096 group=2 nodes=2 rpn=1 dtype=fp16"), 8);
}

}  // namespace
}  // namespace evsim

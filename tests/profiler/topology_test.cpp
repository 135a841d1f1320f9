// Node grouping (real and emulated) and the choice of ranks for communication events.
#include "mpi/topology.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "profiler/group_planner.h"
#include "topology_fixture.h"

namespace evsim {
namespace {

using test::hosts;

TEST(Topology, EmulatedNodesOfOneHost) {
  Topology t = buildTopology({0, 0, 0, 0}, {"vm", "vm", "vm", "vm"}, 2);
  ASSERT_EQ(t.nodes(), 2);
  EXPECT_EQ(t.node_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t.ranks_of_node[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(t.node_names, (std::vector<std::string>{"vm/0", "vm/1"}));
  EXPECT_EQ(t.ranksPerNode(), 2);
  EXPECT_TRUE(t.emulated);
}

TEST(Topology, RealHostsMappedRoundRobin) {
  // mpirun --map-by node: ranks alternate between hosts a and b.
  Topology t = buildTopology({0, 1, 0, 1}, {"a", "b", "a", "b"}, 0);
  ASSERT_EQ(t.nodes(), 2);
  EXPECT_EQ(t.node_of_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(t.ranks_of_node[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(t.node_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(t.uniform());
}

TEST(Topology, EmulationSplitsEachHost) {
  Topology t = buildTopology({0, 1, 0, 1}, {"a", "b", "a", "b"}, 1);
  ASSERT_EQ(t.nodes(), 4);
  // Host a's ranks first (a/0 = {0}, a/1 = {2}), then b's.
  EXPECT_EQ(t.node_of_rank, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(t.ranksPerNode(), 1);
}

TEST(Topology, RanksPerNodeMustDivideEachHost) {
  EXPECT_THROW(buildTopology({0, 0, 0, 0}, {"vm", "vm", "vm", "vm"}, 3), InputError);
}

TEST(GroupPlanner, FillNodes) {
  EXPECT_EQ(fillNodes(4, 2, 2), (std::vector<int>{2, 2}));
  EXPECT_EQ(fillNodes(3, 2, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(fillNodes(6, 3, 4), (std::vector<int>{4, 1, 1}));
  EXPECT_EQ(fillNodes(4, 3, 2), (std::vector<int>{2, 1, 1}));
}

TEST(GroupPlanner, Group4Nodes2Rpn2) {
  Placement target{4, 2, 2};
  GroupPlan on2x2 = planGroup(hosts(2, 2), target);
  EXPECT_EQ(on2x2.ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(on2x2.exact);
  EXPECT_FALSE(on2x2.scaled(target));
  // Two nodes of four: the first two ranks of each.
  EXPECT_EQ(planGroup(hosts(2, 4), target).ranks, (std::vector<int>{0, 1, 4, 5}));
  // Four nodes of two: nodes 0 and 1.
  EXPECT_EQ(planGroup(hosts(4, 2), target).ranks, (std::vector<int>{0, 1, 2, 3}));
}

TEST(GroupPlanner, PointToPoint) {
  Topology t = hosts(2, 2);
  EXPECT_EQ(planGroup(t, {2, 1, 2}).ranks, (std::vector<int>{0, 1}));  // intra-node
  EXPECT_EQ(planGroup(t, {2, 2, 1}).ranks, (std::vector<int>{0, 2}));  // inter-node
}

TEST(GroupPlanner, LargeGroupScaledFromSameLinkType) {
  Placement target{16, 2, 8};
  GroupPlan plan = planGroup(hosts(2, 2), target);
  EXPECT_EQ(plan.ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.measured, (Placement{4, 2, 2}));
  EXPECT_TRUE(plan.scaled(target));
  EXPECT_FALSE(plan.exact);
}

TEST(GroupPlanner, IntraNodeStaysIntraNode) {
  // rpn=4 on nodes of 2: measure 2 ranks of one node and scale, rather than cross nodes.
  Placement target{4, 1, 4};
  GroupPlan plan = planGroup(hosts(2, 2), target);
  EXPECT_EQ(plan.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.measured, (Placement{2, 1, 2}));
  EXPECT_TRUE(plan.scaled(target));
}

TEST(GroupPlanner, DirectUpToEightThenCapped) {
  EXPECT_TRUE(planGroup(hosts(1, 8), {8, 1, 8}).exact);
  GroupPlan capped = planGroup(hosts(1, 16), {16, 1, 16});
  EXPECT_EQ(capped.measured, (Placement{8, 1, 8}));
  EXPECT_EQ(capped.ranks.size(), 8u);
  // Beyond the world size: measured at the 4 ranks there are.
  EXPECT_EQ(planGroup(hosts(2, 2), {8, 2, 4}).measured, (Placement{4, 2, 2}));
}

TEST(GroupPlanner, PrefersMoreRanksPerNodeAtEqualSize) {
  // 32 = 4 nodes x 8, capped at 8: 2 nodes x 4 and 4 nodes x 2 both give 8; 2 x 4 is closer.
  GroupPlan plan = planGroup(hosts(4, 8), {32, 4, 8});
  EXPECT_EQ(plan.measured, (Placement{8, 2, 4}));
  EXPECT_EQ(plan.ranks, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
}

TEST(GroupPlanner, UnevenPlacementAndClosestShape) {
  EXPECT_EQ(planGroup(hosts(2, 2), {3, 2, 2}).ranks, (std::vector<int>{0, 1, 2}));
  // 3+1 cannot be built on nodes of 2: 2+2 keeps the size, so nothing is scaled.
  GroupPlan plan = planGroup(hosts(2, 2), {4, 2, 3});
  EXPECT_EQ(plan.measured, (Placement{4, 2, 2}));
  EXPECT_FALSE(plan.exact);
  EXPECT_FALSE(plan.scaled({4, 2, 3}));
}

TEST(GroupPlanner, Unmeasurable) {
  EXPECT_FALSE(planGroup(hosts(1, 4), {2, 2, 1}).unmeasurable.empty());  // inter on one node
  EXPECT_FALSE(planGroup(hosts(4, 1), {2, 1, 2}).unmeasurable.empty());  // intra, 1 per node
  EXPECT_TRUE(planGroup(hosts(1, 4), {2, 2, 1}).ranks.empty());
}

}  // namespace
}  // namespace evsim

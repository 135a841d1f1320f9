// The task graph (plan/task_graph.h): nodes, edges, sends and device orders of small pipelines
// counted by hand from the edge rules, and the helpers the simulator and eventrun share.
#include "plan/task_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"

namespace evsim {
namespace {

int nodeOf(const TaskGraph& g, Phase phase, int k, int mb) {
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const TaskNode& node = g.nodes[n];
    if (node.task.phase == phase && node.virtual_stage == k && node.task.micro_batch == mb) {
      return static_cast<int>(n);
    }
  }
  return -1;
}

// 1F1B, P = 2, m = 2: per micro-batch F(0) (no input), F(1) <- F(0) transfer, B(1) <- F(1) same
// device, B(0) <- B(1) transfer and F(0) same device: 4 nodes and 4 edges per micro-batch.
// F(0) sends its activation over link 0, B(1) its gradient over link 0; the rest send nothing.
TEST(TaskGraph, OneFOneBTwoStagesByHand) {
  const TaskGraph g = buildTaskGraph(Schedule::kDapple, 2, 1, 2);
  EXPECT_FALSE(g.split_backward);
  ASSERT_EQ(g.nodes.size(), 8u);
  EXPECT_EQ(g.edges.size(), 8u);
  for (int i = 0; i < 2; ++i) {
    const int f0 = nodeOf(g, Phase::kForward, 0, i), f1 = nodeOf(g, Phase::kForward, 1, i);
    const int b0 = nodeOf(g, Phase::kBackward, 0, i), b1 = nodeOf(g, Phase::kBackward, 1, i);
    ASSERT_GE(std::min({f0, f1, b0, b1}), 0);
    EXPECT_TRUE(g.inputs(f0).empty());
    ASSERT_EQ(g.inputs(f1).size(), 1u);
    EXPECT_EQ(g.inputs(f1)[0].from, f0);
    EXPECT_TRUE(g.inputs(f1)[0].transfer);
    ASSERT_EQ(g.inputs(b1).size(), 1u);
    EXPECT_EQ(g.inputs(b1)[0].from, f1);
    EXPECT_FALSE(g.inputs(b1)[0].transfer);
    ASSERT_EQ(g.inputs(b0).size(), 2u);
    EXPECT_EQ(g.inputs(b0)[0].from, b1);
    EXPECT_TRUE(g.inputs(b0)[0].transfer);
    EXPECT_EQ(g.inputs(b0)[1].from, f0);
    EXPECT_FALSE(g.inputs(b0)[1].transfer);
    EXPECT_EQ(g.nodes[f0].send, Send::kActivation);
    EXPECT_EQ(linkOf(g.nodes[f0]), 0);
    EXPECT_EQ(g.nodes[b1].send, Send::kGradient);
    EXPECT_EQ(linkOf(g.nodes[b1]), 0);
    EXPECT_EQ(g.nodes[f1].send, Send::kNone);
    EXPECT_EQ(g.nodes[b0].send, Send::kNone);
  }
  // Device orders are the schedule's: stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1.
  const std::vector<int> order0 = {
      nodeOf(g, Phase::kForward, 0, 0), nodeOf(g, Phase::kForward, 0, 1),
      nodeOf(g, Phase::kBackward, 0, 0), nodeOf(g, Phase::kBackward, 0, 1)};
  for (size_t p = 0; p < order0.size(); ++p) EXPECT_EQ(g.nodeAt(0, p), order0[p]) << p;
  const std::vector<int> order1 = {
      nodeOf(g, Phase::kForward, 1, 0), nodeOf(g, Phase::kBackward, 1, 0),
      nodeOf(g, Phase::kForward, 1, 1), nodeOf(g, Phase::kBackward, 1, 1)};
  for (size_t p = 0; p < order1.size(); ++p) EXPECT_EQ(g.nodeAt(1, p), order1[p]) << p;
}

// Interleaved P = 2, v = 2, m = 2: virtual stage k = chunk*2 + device. The forward of k = 2 (chunk
// 1 on device 0) takes the activation that k = 1 (device 1) sends over link 1, the wrap-around;
// the gradient of k = 1 comes from k = 2 over link 1 too.
TEST(TaskGraph, InterleavedWrapAroundLink) {
  const TaskGraph g = buildTaskGraph(Schedule::kInterleaved, 2, 2, 2);
  ASSERT_EQ(g.nodes.size(), 2u * 4 * 2);
  const int f1 = nodeOf(g, Phase::kForward, 1, 0), f2 = nodeOf(g, Phase::kForward, 2, 0);
  const int b1 = nodeOf(g, Phase::kBackward, 1, 0), b2 = nodeOf(g, Phase::kBackward, 2, 0);
  EXPECT_EQ(g.deviceOf(f1), 1);
  EXPECT_EQ(g.deviceOf(f2), 0);
  EXPECT_EQ(g.nodes[f2].task.chunk, 1);
  ASSERT_EQ(g.inputs(f2).size(), 1u);
  EXPECT_EQ(g.inputs(f2)[0].from, f1);
  EXPECT_EQ(linkOf(g.nodes[f1]), 1);
  EXPECT_EQ(g.nodes[b2].send, Send::kGradient);
  EXPECT_EQ(linkOf(g.nodes[b2]), 1);
  EXPECT_EQ(g.inputs(b1)[0].from, b2);
}

// ZB-H1 P = 2, m = 2: F, B and W of each (k, i): 12 nodes; W(k, i) <- B(k, i) on the same device
// and sends nothing; the edges are 1F1B's 8 plus one per W.
TEST(TaskGraph, SplitBackwardAddsWeightGradientNodes) {
  const TaskGraph g = buildTaskGraph(Schedule::kZbh1, 2, 1, 2);
  EXPECT_TRUE(g.split_backward);
  ASSERT_EQ(g.nodes.size(), 12u);
  EXPECT_EQ(g.edges.size(), 8u + 4u);
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 2; ++i) {
      const int w = nodeOf(g, Phase::kWeightGrad, k, i);
      ASSERT_GE(w, 0);
      ASSERT_EQ(g.inputs(w).size(), 1u);
      EXPECT_EQ(g.inputs(w)[0].from, nodeOf(g, Phase::kBackward, k, i));
      EXPECT_FALSE(g.inputs(w)[0].transfer);
      EXPECT_EQ(g.nodes[w].send, Send::kNone);
    }
  }
  EXPECT_THROW(buildTaskGraph(Schedule::kDapple, 2, 2, 2), Error);  // chunks need interleaving
}

// What the build records once (issue 34 item 3) against walks written here: each device's peak of
// micro-batch chunks in flight (F +1, the task that frees -1: B, or W when split) and whether any
// task is fused. By hand, DAPPLE P = 4, m = 8: device s holds P - s.
TEST(TaskGraph, RecordedPeaksAndFusionMatchTheWalk) {
  const TaskGraph dapple = buildTaskGraph(Schedule::kDapple, 4, 1, 8);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(peakInFlight(dapple, s), 4 - s);
  EXPECT_FALSE(dapple.fused);
  struct Shape {
    Schedule schedule;
    int P, v;
    int64_t m;
  };
  for (const Shape& shape :
       {Shape{Schedule::kGpipe, 3, 1, 5}, Shape{Schedule::kInterleaved, 2, 3, 4},
        Shape{Schedule::kZbh1, 3, 1, 6}, Shape{Schedule::kZbv, 3, 2, 6},
        Shape{Schedule::kDualPipeV, 4, 2, 8}}) {
    const TaskGraph g = buildTaskGraph(shape.schedule, shape.P, shape.v, shape.m);
    const Phase frees = g.split_backward ? Phase::kWeightGrad : Phase::kBackward;
    for (int s = 0; s < shape.P; ++s) {
      int in_flight = 0, peak = 0;
      for (size_t p = 0; p < static_cast<size_t>(g.tasks_per_device); ++p) {
        const Phase phase = g.nodes[g.nodeAt(s, p)].task.phase;
        if (phase == Phase::kForward) peak = std::max(peak, ++in_flight);
        if (phase == frees) --in_flight;
      }
      EXPECT_EQ(peakInFlight(g, s), peak) << scheduleName(shape.schedule) << " device " << s;
    }
    const bool fused = std::any_of(g.nodes.begin(), g.nodes.end(),
                                   [](const TaskNode& n) { return n.fused_size > 1; });
    EXPECT_EQ(g.fused, fused) << scheduleName(shape.schedule);
    EXPECT_EQ(g.fused, shape.schedule == Schedule::kDualPipeV);
    // Edges by the rules (task_graph.h): per micro-batch K-1 forward inputs, 2K-1 backward ones
    // and K for the Ws.
    const int64_t K = shape.P * shape.v;
    EXPECT_EQ(static_cast<int64_t>(g.edges.size()),
              shape.m * (3 * K - 2 + (g.split_backward ? K : 0)));
  }
}

TEST(TaskGraph, BucketIssueOpFollowsTheTaskThatCompletesIt) {
  // Backward ops B W B B W B (W = weight_grad).
  OpList ops(6);
  ops[1].weight_grad = ops[4].weight_grad = true;
  EXPECT_EQ(bucketIssueOp(ops, 3, false), 3);  // unsplit: after the op itself
  EXPECT_EQ(bucketIssueOp(ops, 3, true), 1);   // split: after the last W op at or before it
  EXPECT_EQ(bucketIssueOp(ops, 5, true), 4);
  EXPECT_EQ(bucketIssueOp(ops, 0, true), -1);  // no W op yet: at the W task's start
  EXPECT_TRUE(runsIn(ops[1], Phase::kWeightGrad, true));
  EXPECT_FALSE(runsIn(ops[1], Phase::kBackward, true));
  EXPECT_TRUE(runsIn(ops[1], Phase::kBackward, false));
  EXPECT_TRUE(runsIn(ops[0], Phase::kBackward, true));
}

}  // namespace
}  // namespace evsim

namespace evsim {
namespace {

// The invariants the timing engine's fast paths read instead of the nodes (lone_tasks.h reads only
// a node's first edge for its cross-device input; the link report and link sharing read
// send_codes): checked on every bundled schedule, fused or not.
TEST(TaskGraph, SendCodesAndTheTransferEdgeFirstOnEveryBundledSchedule) {
  struct Case {
    Schedule schedule;
    int chunks;
    bool fused;
  };
  const Case cases[] = {{Schedule::kGpipe, 1, false},       {Schedule::kDapple, 1, false},
                        {Schedule::kDapple, 1, true},        {Schedule::kInterleaved, 2, false},
                        {Schedule::kInterleaved, 3, false},  {Schedule::kZbh1, 1, false},
                        {Schedule::kZbh2, 1, false},         {Schedule::kZbv, 2, false},
                        {Schedule::kDualPipeV, 2, false}};
  constexpr int P = 4;
  constexpr int64_t m = 8;
  for (const Case& c : cases) {
    const TaskGraph g = buildTaskGraph(c.schedule, P, c.chunks, m, 0, c.fused);
    const std::string name = std::string(scheduleName(c.schedule)) + " v" +
                             std::to_string(c.chunks) + (c.fused ? " fused" : "");
    ASSERT_EQ(g.send_codes.size(), g.nodes.size()) << name;
    int sends = 0, transfers = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const TaskNode& n = g.nodes[i];
      const int code = g.send_codes[i];
      EXPECT_EQ(code, sendCode(n.send, n.task.chunk)) << name << " node " << i;
      if (code > 0) {
        ++sends;
        EXPECT_EQ(sendCodeChunk(code), n.task.chunk) << name << " node " << i;
        EXPECT_EQ(sendCodeGradient(code), n.send == Send::kGradient) << name << " node " << i;
      }
      const std::span<const TaskEdge> inputs = g.inputs(static_cast<int>(i));
      for (size_t e = 0; e < inputs.size(); ++e) {
        const bool other_device = g.deviceOf(inputs[e].from) != g.deviceOf(static_cast<int>(i));
        EXPECT_EQ(inputs[e].transfer, other_device) << name << " node " << i << " edge " << e;
        if (e > 0) {
          EXPECT_FALSE(inputs[e].transfer) << name << " node " << i << " edge " << e;
        }
        transfers += inputs[e].transfer;
      }
    }
    // Every send is some node's transfer input (P > 1), and the graph has sends.
    EXPECT_GT(sends, 0) << name;
    EXPECT_EQ(transfers, sends) << name;
    for (int d = 0; d < P; ++d) {
      const std::span<const uint8_t> codes = g.deviceSendCodes(d);
      ASSERT_EQ(codes.size(), static_cast<size_t>(g.tasks_per_device)) << name;
      for (size_t pos = 0; pos < codes.size(); ++pos) {
        EXPECT_EQ(codes[pos], g.send_codes[static_cast<size_t>(g.nodeAt(d, pos))]) << name;
      }
    }
  }
}

}  // namespace
}  // namespace evsim

// The list scheduler's lone-task path (modeler/lone_tasks.h) in its jittered and stretched variant,
// placeLoneTasks<true, true>, on a hand-traced GPipe timeline. timePipeline reaches this variant
// only with --jitter and link sharing's send stretch together, whose draws come from a generator:
// here the draws are scripted, so every time below is worked out on paper.
#include "modeler/lone_tasks.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "plan/task_graph.h"

namespace evsim {
namespace {

// GPipe, P = 2 devices, v = 1, m = 2 micro-batches (task_graph.h's ids follow device order):
//   device 0 (virtual stage 0): id 0 F0, 1 F1, 2 B0, 3 B1
//   device 1 (virtual stage 1): id 4 F0, 5 F1, 6 B0, 7 B1
// Inputs: F(1,i) <- F(0,i) over link 0; B(1,i) <- F(1,i) on device 1; B(0,i) <- B(1,i) over link 0
// (listed first), F(0,i) on device 0. Sends: stage 0's forwards (activation, 1 µs), stage 1's
// backwards (gradient, 0.5 µs); the others send nothing.
// Costs: stage 0 F 2, B 4; stage 1 F 3, B 5. Device 1 is a straggler, slowdown 2 (its task times
// (body + jitter) x 2; sends unscaled). Link sharing's stretch per position: device 0
// {0.25, 0.5, 0, 0} (its two activation sends), device 1 {0, 0, 0.75, 0.25} (its two gradients).
// Jitter draws in call order: 0.5, 1, 0.25, 0.75, 0.5, 1.5, 2, 0.125.
//
// The sweep as timePipeline's: device 0, device 1, then device 0 again.
// Pass 1, device 0 (free 0):
//   F0: no input; start 0, end 0 + (2 + 0.5) x 1 = 2.5; send 2.5 -> 2.5 + 1 + 0.25 = 3.75.
//   F1: start 3.75 (after the send), end 3.75 + (2 + 1) = 6.75; send -> 6.75 + 1 + 0.5 = 8.25.
//   B0: needs B0 of device 1 (id 6), not placed: stops there, returns 6 (no draw taken).
//   busy: (2.5 + 1.25) + (3 + 1.5) = 8.25.
// Pass 1, device 1 (free 0):
//   F0: input F0's send ends 3.75; start 3.75, end 3.75 + (3 + 0.25) x 2 = 10.25; no send.
//   F1: input at 8.25, device free at 10.25; end 10.25 + (3 + 0.75) x 2 = 17.75.
//   B0: input F0's run end 10.25 (same device: not a transfer); start 17.75,
//       end 17.75 + (5 + 0.5) x 2 = 28.75; send -> 28.75 + 0.5 + 0.75 = 30.
//   B1: input 17.75; start 30, end 30 + (5 + 1.5) x 2 = 43; send -> 43 + 0.5 + 0.25 = 43.75.
//   busy: 6.5 + 7.5 + (11 + 1.25) + (13 + 0.75) = 40; free 43.75.
// Pass 2, device 0 (free 8.25):
//   B0: inputs B0's send (30) and F0's run (2.5): start 30, end 30 + (4 + 2) = 36; no send.
//   B1: inputs 43.75 and 6.75: start 43.75, end 43.75 + (4 + 0.125) = 47.875.
//   busy: 8.25 + 6 + 4.125 = 18.375; free 47.875.
// Every number is a multiple of 1/8: exact in binary, compared exactly.
TEST(LoneTasksTest, JitteredAndStretchedGpipeByHand) {
  const TaskGraph graph = buildTaskGraph(Schedule::kGpipe, 2, 1, 2);
  ASSERT_EQ(graph.nodes.size(), 8u);
  for (int s = 0; s < 2; ++s) {
    for (int p = 0; p < 4; ++p) {
      const TaskNode& n = graph.nodes[graph.nodeAt(s, p)];
      EXPECT_EQ(graph.nodeAt(s, p), 4 * s + p);
      EXPECT_EQ(graph.deviceOf(4 * s + p), s);
      EXPECT_EQ(graph.positionOf(4 * s + p), static_cast<size_t>(p));
      EXPECT_EQ(n.task.phase, p < 2 ? Phase::kForward : Phase::kBackward);
      EXPECT_EQ(n.task.micro_batch, p % 2);
    }
  }
  std::vector<StageCost> costs(2);
  costs[0].forward_us = 2, costs[0].backward_us = 4;
  costs[1].forward_us = 3, costs[1].backward_us = 5;
  const std::vector<double> forward_us{1.0}, backward_us{0.5};
  std::vector<lone::Output> outputs(graph.nodes.size());
  const lone::LoneGraph g{graph.nodes.data(), graph.edges.data(), forward_us.data(),
                          backward_us.data(), costs.data(),       outputs.data()};
  const std::vector<std::vector<double>> stretch{{0.25, 0.5, 0, 0}, {0, 0, 0.75, 0.25}};
  const std::vector<double> slow{1, 2};
  std::vector<std::vector<TaskTiming>> timings(2, std::vector<TaskTiming>(4));
  std::vector<lone::LoneDevice> devices;
  for (int s = 0; s < 2; ++s) {
    devices.push_back({graph.nodeAt(s, 0), 4, timings[s].data(), stretch[s].data(), 0, 0.0, 0.0,
                       slow[s]});
  }
  const std::vector<double> script{0.5, 1, 0.25, 0.75, 0.5, 1.5, 2, 0.125};
  std::vector<std::pair<int, Phase>> drawn;  // (virtual stage, phase) of each draw
  auto draw = [&](int vs, Phase phase) {
    drawn.emplace_back(vs, phase);
    return script.at(drawn.size() - 1);
  };
  // The variant under test (the comma inside its template arguments would split EXPECT_EQ's).
  auto place = [&](lone::LoneDevice& d) { return lone::placeLoneTasks<true, true>(g, d, draw); };

  EXPECT_EQ(place(devices[0]), 6);
  EXPECT_EQ(devices[0].at, 2u);
  EXPECT_EQ(devices[0].free_us, 8.25);
  EXPECT_EQ(devices[0].busy_us, 8.25);
  EXPECT_EQ(place(devices[1]), -1);
  EXPECT_EQ(devices[1].at, 4u);
  EXPECT_EQ(devices[1].free_us, 43.75);
  EXPECT_EQ(devices[1].busy_us, 40.0);
  EXPECT_EQ(place(devices[0]), -1);
  EXPECT_EQ(devices[0].at, 4u);
  EXPECT_EQ(devices[0].free_us, 47.875);
  EXPECT_EQ(devices[0].busy_us, 18.375);

  const std::vector<std::pair<int, Phase>> order{
      {0, Phase::kForward},  {0, Phase::kForward},  {1, Phase::kForward},  {1, Phase::kForward},
      {1, Phase::kBackward}, {1, Phase::kBackward}, {0, Phase::kBackward}, {0, Phase::kBackward}};
  EXPECT_EQ(drawn, order);

  struct Row {
    double run_start, run_end, send_end;
  };
  const std::vector<std::vector<Row>> rows{
      {{0, 2.5, 3.75}, {3.75, 6.75, 8.25}, {30, 36, 36}, {43.75, 47.875, 47.875}},
      {{3.75, 10.25, 10.25}, {10.25, 17.75, 17.75}, {17.75, 28.75, 30}, {30, 43, 43.75}}};
  for (int s = 0; s < 2; ++s) {
    for (int p = 0; p < 4; ++p) {
      SCOPED_TRACE(::testing::Message() << "device " << s << " position " << p);
      const TaskTiming& t = timings[s][p];
      const Row& r = rows[s][p];
      const int id = 4 * s + p;
      EXPECT_EQ(t.run.start_us, r.run_start);
      EXPECT_EQ(t.run.end_us, r.run_end);
      EXPECT_EQ(t.send().start_us, r.run_end);  // a send follows its task
      EXPECT_EQ(t.send().end_us, r.send_end);
      EXPECT_EQ(outputs[id].run_end_us, r.run_end);
      EXPECT_EQ(outputs[id].send_end_us, r.send_end);
    }
  }
}

}  // namespace
}  // namespace evsim

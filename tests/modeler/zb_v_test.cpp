// ZB-V (plan/schedules/zb_v.cpp) on the V layout: its published order (torch.distributed.
// pipelining's ScheduleZBVZeroBubble, written out by hand below for P = 4, m = 8), the turn at the
// last device handed over in memory, a P = 4 unit-cost timeline traced by hand, the zero bubble of
// the paper against 1F1B, and 1F1B's activation memory.
//
// Notation: "F3a" is the forward of micro-batch 3 on the device's chunk 0 (virtual stage s), "B3b"
// the input gradient of chunk 1 (virtual stage 2P-1-s), "W" the weight gradient.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "modeler/memory_model.h"
#include "modeler/timing_engine.h"
#include "plan/task_graph.h"
#include "support/test_support.h"

namespace evsim {
namespace {

std::string orderText(const std::vector<StageTask>& order) {
  std::string out;
  for (const StageTask& t : order) {
    if (!out.empty()) out += ' ';
    out += t.phase == Phase::kForward ? 'F' : t.phase == Phase::kBackward ? 'B' : 'W';
    out += std::to_string(t.micro_batch);
    out += t.chunk == 0 ? 'a' : 'b';
  }
  return out;
}

// Every virtual stage (2P of them) costs f, b, w; every send `send`.
TimingInput vInput(int P, int64_t m, double f, double b, double w, double send = 0) {
  TimingInput in;
  in.schedule = Schedule::kZbv;
  in.micro_batches = m;
  in.virtual_stages = 2;
  StageCost cost;
  cost.forward_us = f;
  cost.backward_us = b;
  cost.weight_grad_us = w;
  in.stages.assign(2 * static_cast<size_t>(P), cost);
  const size_t links = 2 * static_cast<size_t>(P) - 1;
  in.pipelines.push_back(
      PipelineCost{std::vector<double>(links, send), std::vector<double>(links, send), {}});
  return in;
}

// P = 4, m = 8. Device s: 2(P-s)-1 forwards of chunk 0; s pairs F(chunk 1) F(chunk 0); P-s triples
// F B W of chunk 1; then F(chunk 0) B W of chunk 0, F B W of chunk 1 while chunk 1 has forwards;
// then s pairs B(chunk 0) B(chunk 1), P-s pairs B W of chunk 0, the W's left of chunk 1, chunk 0.
const std::vector<std::string> kOrdersP4M8 = {
    "F0a F1a F2a F3a F4a F5a F6a F0b B0b W0b F1b B1b W1b F2b B2b W2b F3b B3b W3b F7a B0a W0a F4b "
    "B4b W4b B1a W1a F5b B5b W5b B2a W2a F6b B6b W6b B3a W3a F7b B7b W7b B4a W4a B5a W5a B6a W6a "
    "B7a W7a",
    "F0a F1a F2a F3a F4a F0b F5a F1b B0b W0b F2b B1b W1b F3b B2b W2b F6a B0a W0a F4b B3b W3b F7a "
    "B1a W1a F5b B4b W4b B2a W2a F6b B5b W5b B3a W3a F7b B6b W6b B4a B7b B5a W4a B6a W5a B7a W6a "
    "W7b W7a",
    "F0a F1a F2a F0b F3a F1b F4a F2b B0b W0b F3b B1b W1b F5a B0a W0a F4b B2b W2b F6a B1a W1a F5b "
    "B3b W3b F7a B2a W2a F6b B4b W4b B3a W3a F7b B5b W5b B4a B6b B5a B7b B6a W4a B7a W5a W6b W7b "
    "W6a W7a",
    "F0a F0b F1a F1b F2a F2b F3a F3b B0b W0b F4a B0a W0a F4b B1b W1b F5a B1a W1a F5b B2b W2b F6a "
    "B2a W2a F6b B3b W3b F7a B3a W3a F7b B4b W4b B4a B5b B5a B6b B6a B7b B7a W4a W5b W6b W7b W5a "
    "W6a W7a"};

TEST(ZbVSchedule, OrdersArePublishedOnes) {
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbv, s, 4, 8, 2)), kOrdersP4M8[s]) << "s=" << s;
  }
  // m < 2P-1: the same construction with the missing micro-batches' tasks left out (P = 2, m = 2).
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbv, 0, 2, 2, 2)),
            "F0a F1a F0b B0b W0b F1b B1b W1b B0a W0a B1a W1a");
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbv, 1, 2, 2, 2)),
            "F0a F0b F1a F1b B0b W0b B0a W0a B1b W1b B1a W1a");
  EXPECT_THROW(stageTaskOrder(Schedule::kZbv, 0, 4, 8), Error);  // one chunk
  EXPECT_EQ(parseSchedule("ZBV"), Schedule::kZbv);
  EXPECT_EQ(scheduleName(Schedule::kZbv), "zbv");
}

TEST(ZbVSchedule, LinksAtTwoDevicesCrossTheOnePair) {
  // P = 2: stages 0 1 2 3 on devices 0 1 1 0; links 0 and 2 cross pair (0, 1), link 1 is local.
  const PipelineLayout v(LayoutKind::kV, 2, 2);
  EXPECT_EQ(v.linkPair(0), 0);
  EXPECT_EQ(v.linkPair(1), -1);
  EXPECT_EQ(v.linkPair(2), 0);
}

TEST(ZbVSchedule, TaskGraphTurnsAtTheLastDeviceInMemory) {
  // P = 3: virtual stages 0 1 2 on devices 0 1 2, stages 3 4 5 on devices 2 1 0.
  const TaskGraph g = buildTaskGraph(Schedule::kZbv, 3, 2, 5);
  ASSERT_EQ(g.nodes.size(), size_t{3 * 2 * 3 * 5});
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const TaskNode& n = g.nodes[id];
    const int k = n.virtual_stage;
    EXPECT_EQ(g.deviceOf(static_cast<int>(id)), k < 3 ? k : 5 - k);
    if (n.task.phase == Phase::kForward) {
      // Stage 2 -> 3 is on device 2 (no send); the last stage sends nothing.
      EXPECT_EQ(n.send, k == 2 || k == 5 ? Send::kNone : Send::kActivation) << "k=" << k;
      for (const TaskEdge& e : g.inputs(static_cast<int>(&n - g.nodes.data()))) {
        EXPECT_EQ(e.transfer, k != 3);
      }
    }
    if (n.task.phase == Phase::kBackward) {
      EXPECT_EQ(n.send, k == 3 || k == 0 ? Send::kNone : Send::kGradient) << "k=" << k;
    }
  }
}

// Hand trace, P = 4, m = 8, F = B = W = 1 per chunk, free sends. Device 0 runs F0a..F6a at 0..6;
// each forward of chunk 0 reaches device s one unit later, so device s starts at s. The first
// chunk-1 forward F0b of device 3 (virtual stage 4) follows its own F0a (stage 3) at 4; device 2's
// F0b (stage 5) at 5 after it, device 1's at 6, device 0's (stage 7) at 7, whose B0b at 8 then
// sends the gradient back up: B0b on devices 1, 2, 3 at 9, 10, 11, each just after the device's
// last warm-up task (positions 8 of devices 1-3 start at 9, 10, 11). From there every input
// arrives one unit before the device needs it (the orders interleave the two chunks so that each
// B's gradient comes from the neighbour's task one position earlier): device s runs the task at
// position j at s + j without a gap, 6m = 48 tasks, and ends at 48 + s. Iteration: 6m + P - 1 = 51.
TEST(ZbVTiming, FourDeviceTimelineByHand) {
  const IterationTimeline tl = computeTimeline(vInput(4, 8, 1, 1, 1));
  const PipelineTimeline& p = tl.pipelines[0];
  for (int s = 0; s < 4; ++s) {
    const StageTimeline& st = p.stages[s];
    ASSERT_EQ(st.tasks.size(), size_t{48});
    std::vector<StageTask> order;
    for (size_t j = 0; j < st.tasks.size(); ++j) {
      order.push_back(tl.graph.nodes[st.node(j)].task);
      EXPECT_DOUBLE_EQ(st.tasks[j].run.start_us, s + static_cast<double>(j))
          << "s=" << s << " j=" << j;
    }
    EXPECT_EQ(orderText(order), kOrdersP4M8[s]);
    EXPECT_DOUBLE_EQ(st.pipeline_end_us, 48.0 + s);
    EXPECT_EQ(st.peak_activations, 8);  // 2P chunks: P micro-batches of the device's two chunks
  }
  EXPECT_DOUBLE_EQ(tl.iteration_us, 51);
}

// The paper's claim at T_F = T_B = T_W (per chunk) and m >= 2P-1: no bubble inside any device
// (each busy 6m from its first task to its last), so the iteration is 6m + (P-1)T_F, the stagger
// of the first forwards. 1F1B on the same P devices, each running both chunks' layers as one stage
// (F = 2, B+W = 4), takes (m + P - 1) 6: a bubble of 6(P-1) against ZB-V's P-1. Every ZB-V device
// holds 2P chunks = P device-stage micro-batches, 1F1B's device 0.
TEST(ZbVTiming, ZeroBubbleAtOneFOneBMemory) {
  for (int P : {2, 3, 4, 6}) {
    for (int64_t m : {2 * int64_t{P} - 1, 2 * int64_t{P}, 3 * int64_t{P} + 2}) {
      SCOPED_TRACE(::testing::Message() << "P=" << P << " m=" << m);
      const IterationTimeline zbv = computeTimeline(vInput(P, m, 1, 1, 1));
      for (int s = 0; s < P; ++s) {
        const StageTimeline& st = zbv.pipelines[0].stages[s];
        EXPECT_DOUBLE_EQ(st.tasks.front().run.start_us, s);
        EXPECT_DOUBLE_EQ(st.pipeline_end_us - st.tasks.front().run.start_us, 6.0 * m);
        EXPECT_EQ(st.peak_activations, 2 * P);
      }
      EXPECT_DOUBLE_EQ(zbv.iteration_us, 6.0 * m + P - 1);

      TimingInput one;
      one.schedule = Schedule::kDapple;
      one.micro_batches = m;
      StageCost cost;
      cost.forward_us = 2;
      cost.backward_us = 4;
      one.stages.assign(P, cost);
      one.pipelines.push_back(
          PipelineCost{std::vector<double>(P - 1, 0.0), std::vector<double>(P - 1, 0.0), {}});
      const IterationTimeline dapple = computeTimeline(one);
      EXPECT_DOUBLE_EQ(dapple.iteration_us, 6.0 * (m + P - 1));
      EXPECT_EQ(dapple.pipelines[0].stages[0].peak_activations, P);
    }
  }
}

// The memory model on the same model cut in 2P equal chunks (ZB-V) or P equal stages (1F1B): every
// ZB-V device holds P x (its two chunks' activations) = 1F1B's device 0, and the same parameters.
TEST(ZbVMemory, ActivationsOfOneFOneBsFirstDevice) {
  const ModelConfig model = test::model(64, 4, 256, 32, 128, 8);
  const int P = 4;
  const int64_t m = 8, A = 1000, params = 64;
  Strategy zbv = Strategy::of(1, P, 1, 1, m, Schedule::kZbv);
  Strategy one = Strategy::of(1, P, 1, 1, m, Schedule::kDapple);
  std::vector<ChunkMemoryInput> halves(2 * P), wholes(P);
  for (ChunkMemoryInput& c : halves) c.parameters = params / 2, c.activation_bytes = A / 2;
  for (ChunkMemoryInput& c : wholes) c.parameters = params, c.activation_bytes = A;
  const int64_t capacity = int64_t{1} << 40;
  const MemoryEstimate v = estimateMemory(model, zbv, m, capacity, halves);
  const MemoryEstimate d = estimateMemory(model, one, m, capacity, wholes);
  ASSERT_EQ(v.stages.size(), size_t{P});
  for (int s = 0; s < P; ++s) {
    EXPECT_EQ(v.stages[s].activation_bytes, P * A) << s;
    EXPECT_EQ(v.stages[s].parameters, params);
  }
  EXPECT_EQ(d.stages[0].activation_bytes, P * A);
  EXPECT_EQ(d.stages[P - 1].activation_bytes, A);
}

}  // namespace
}  // namespace evsim

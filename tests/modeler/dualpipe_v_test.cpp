// DualPipeV (plan/schedules/dualpipe_v.cpp) on the V layout: its orders against the reference's
// eight steps, the fused F&B task's duration rule (timing_engine.h), a P = 4 timeline traced by
// hand, the bubble of DualPipe's README, and its activation memory (PP + 1 chunks).
//
// Notation: "F3a" is the forward of micro-batch 3 on the device's chunk 0 (virtual stage s), "B3b"
// the input gradient of chunk 1 (virtual stage 2P-1-s), "W" a weight gradient, and "[..]" a fused
// task (its members overlapped).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
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
  bool open = false;
  for (size_t i = 0; i < order.size(); ++i) {
    const StageTask& t = order[i];
    const bool fused_next = i + 1 < order.size() && order[i + 1].overlapped;
    if (!t.overlapped && !out.empty()) out += ' ';
    if (t.overlapped) out += ' ';
    if (!t.overlapped && fused_next) out += '[', open = true;
    out += t.phase == Phase::kForward ? 'F' : t.phase == Phase::kBackward ? 'B' : 'W';
    out += std::to_string(t.micro_batch);
    out += t.chunk == 0 ? 'a' : 'b';
    if (open && !fused_next) out += ']', open = false;
  }
  return out;
}

// Every virtual stage (2P of them) costs f, b, w with fa / ba of F / B an expert all-to-all (what
// a fused partner hides); every send `send`.
TimingInput dpvInput(int P, int64_t m, double f, double b, double w, double fa = 0, double ba = 0,
                     double send = 0) {
  TimingInput in;
  in.schedule = Schedule::kDualPipeV;
  in.micro_batches = m;
  in.virtual_stages = 2;
  StageCost cost;
  cost.forward_us = f;
  cost.backward_us = b;
  cost.weight_grad_us = w;
  cost.forward_overlap_us = fa;
  cost.backward_overlap_us = ba;
  in.stages.assign(2 * static_cast<size_t>(P), cost);
  const size_t links = 2 * static_cast<size_t>(P) - 1;
  in.pipelines.push_back(
      PipelineCost{std::vector<double>(links, send), std::vector<double>(links, send), {}});
  return in;
}

// P = 4, m = 8, written out by hand from dualpipev.py's eight steps (dualpipe_v.cpp's header).
// Device 0: step 1 is 2(P-1) = 6 F0, step 2 one pair F0 F1, step 3 three B1 W F1 (W of the B just
// before), step 4 m-2P+1 = 1 round [F0 B1] [F1 B0], step 5 three B1 [F1 B0], step 6 one B1 B0
// with the split turned on before B0 (device 0 is even, i = (0+1)/2 = 0 after B1), step 7 three
// W B0, step 8 one W. Device 3 (the last): step 4's first F0 and B1 are not fused.
const std::vector<std::string> kOrdersP4M8 = {
    "F0a F1a F2a F3a F4a F5a F6a F0b B0b W0b F1b B1b W1b F2b B2b W2b F3b [F7a B3b W3b] "
    "[F4b B0a W0a] B4b W4b [F5b B1a W1a] B5b W5b [F6b B2a W2a] B6b W6b [F7b B3a W3a] B7b W7b "
    "B4a W4a B5a W5a B6a W6a B7a W7a",
    "F0a F1a F2a F3a F4a F0b F5a F1b B0b W0b F2b B1b W1b F3b [F6a B2b W2b] [F4b B0a W0a] "
    "[F7a B3b W3b] [F5b B1a W1a] B4b W4b [F6b B2a W2a] B5b W5b [F7b B3a W3a] B6b W6b B4a W4a "
    "B7b B5a W7b B6a W5a B7a W6a W7a",
    "F0a F1a F2a F0b F3a F1b F4a F2b B0b W0b F3b [F5a B1b W1b] [F4b B0a W0a] [F6a B2b W2b] "
    "[F5b B1a W1a] [F7a B3b W3b] [F6b B2a W2a] B4b W4b [F7b B3a W3a] B5b W5b B4a W4a B6b W6b "
    "B5a B7b B6a W5a B7a W7b W6a W7a",
    "F0a F0b F1a F1b F2a F2b F3a F3b F4a B0b W0b [F4b B0a W0a] [F5a B1b W1b] [F5b B1a W1a] "
    "[F6a B2b W2b] [F6b B2a W2a] [F7a B3b W3b] [F7b B3a W3a] B4b W4b B4a W4a B5b W5b B5a W5a "
    "B6b B6a B7b B7a W6b W6a W7b W7a"};

TEST(DualPipeVOrder, ReferenceStepsAtP4M8) {
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(orderText(stageTaskOrder(Schedule::kDualPipeV, s, 4, 8, 2)), kOrdersP4M8[s])
        << "s=" << s;
  }
  EXPECT_EQ(parseSchedule("DualPipeV"), Schedule::kDualPipeV);
  EXPECT_EQ(scheduleName(Schedule::kDualPipeV), "dualpipev");
  EXPECT_TRUE(pipelineSchedule(Schedule::kDualPipeV).fusesTasks());
  EXPECT_EQ(pipelineLayout(Schedule::kDualPipeV, 4, 2).kind(), LayoutKind::kV);
  EXPECT_THROW(stageTaskOrder(Schedule::kDualPipeV, 0, 4, 7, 2), Error);  // m < 2P
  EXPECT_THROW(parseSchedule("dualpipe"), InputError);  // two directions: not modelled
}

// The graph: a fused task is one head and its overlapped members (fused_size), the V turn on the
// last device is local, and every task appears once.
TEST(DualPipeVGraph, FusedTasksAndTheTurn) {
  const TaskGraph g = buildTaskGraph(Schedule::kDualPipeV, 4, 2, 8);
  int heads = 0;
  for (const TaskNode& n : g.nodes) heads += n.fused_size == 3;
  // Fused pairs per device: 2 (m-2P+s+1) + (P-s-1) less the last device's unfused first: device
  // 0: 2 + 3 = 5, device 1: 4 + 2 = 6, device 2: 6 + 1 = 7, device 3: 8 - 1 = 7; 25 in all.
  EXPECT_EQ(heads, 25);
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const TaskNode& n = g.nodes[id];
    if (g.deviceOf(static_cast<int>(id)) == 3 && n.virtual_stage == 3 &&
        n.task.phase == Phase::kForward) {
      EXPECT_EQ(n.send, Send::kNone);  // stage 3 -> 4 stays on device 3
    }
  }
}

// P = 4, m = 8, F = B = W = 1, no all-to-all, free sends: a fused task [F B W] lasts
// max(1 + 1 + 1, 0) = 3. Traced by hand (F(k) waits for F(k-1) of the same micro-batch, B(k) for
// B(k+1); stage k runs on device k for k < 4 and on device 7-k after the turn):
//   device 0: F0a..F6a at 0..6; F0b (stage 7) waits for F0 of stage 6 (device 1, 6-7): 7; B0b 8,
//             W0b 9, F1b 10 (stage 6's F1 ends 9), B1b 11, W1b 12.
//   device 1: F0a at 1 (after stage 0), F1a..F4a at 2..5; F0b (stage 6) waits for stage 5's F0
//             (device 2, 5-6): 6; F5a 7; F1b 8; B0b waits for stage 7's B0 (ends 9): 9; W0b 10.
//   device 2: F0a 2, F1a 3, F2a 4; F0b (stage 5) after stage 4 (device 3, 4-5): 5; F3a 6, F1b 7,
//             F4a 8, F2b 9; B0b after stage 6's (ends 10): 10; W0b 11; F3b 12; [F5a B1b W1b]
//             waits for stage 6's B1 (device 1, 12-13): 13-16.
//   device 3: F0a 3, F0b 4 (the turn, in memory), F1a 5, F1b 6, F2a 7, F2b 8, F3a 9, F3b 10,
//             F4a 11; B0b after stage 5's (10-11): 12; W0b 13; [F4b B0a W0a] 14-17; [F5a B1b W1b]
//             waits for F5 of stage 2 and B1 of stage 5 (device 2's fused task, ends 16): 17-20.
// With no all-to-all a fused task lasts F + B + W, so every device is busy 2m(F + B + W) = 48;
// past the traced prefix the end is the README's closed form, not a trace: device 0 (start 0)
// ends at 48 + (P-1)(F&B + B - 3W) = 48 + 3 (3 + 2 - 3) = 54.
TEST(DualPipeVTiming, HandTracedP4) {
  const IterationTimeline tl = computeTimeline(dpvInput(4, 8, 1, 1, 1));
  const std::vector<std::vector<double>> starts = {
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
      {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 13, 13},
      {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 14, 14, 17, 17, 17}};
  for (int s = 0; s < 4; ++s) {
    const StageTimeline& st = tl.pipelines[0].stages[s];
    for (size_t j = 0; j < starts[s].size(); ++j) {
      EXPECT_DOUBLE_EQ(st.tasks[j].run.start_us, starts[s][j]) << "s=" << s << " j=" << j;
    }
    EXPECT_EQ(st.peak_activations, 9) << s;  // 2P + 1 = PP + 1 chunks (README's table)
  }
  // A fused task's members share its interval: [F5a B1b W1b] on device 3 runs 17-20.
  for (int j : {14, 15, 16}) {
    EXPECT_DOUBLE_EQ(tl.pipelines[0].stages[3].tasks[j].run.end_us, 20);
  }
  EXPECT_DOUBLE_EQ(tl.pipelines[0].stages[0].busy_in_pipeline_us, 48);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 54);
}

// The fused rule (timing_engine.h): max(compute, all-to-all), not F + B + W. P = 2, m = 4, F = B =
// 2 with 1 of each an all-to-all, W = 1: a fused [F B W] lasts max(1 + 1 + 1, 1 + 1) = 3 (not 5);
// with 1.5 of each an all-to-all and W = 0.5, max(0.5 + 0.5 + 0.5, 1.5 + 1.5) = 3 (communication
// bound). Lone tasks keep their whole time.
TEST(DualPipeVTiming, FusedDurationIsTheLongerStream) {
  for (auto [w, a, fused] : {std::array<double, 3>{1, 1, 3}, std::array<double, 3>{0.5, 1.5, 3}}) {
    const IterationTimeline tl = computeTimeline(dpvInput(2, 4, 2, 2, w, a, a));
    int checked = 0;
    for (const StageTimeline& st : tl.pipelines[0].stages) {
      for (size_t i = 0; i < st.tasks.size(); ++i) {
        const TaskTiming& t = st.tasks[i];
        const TaskNode& node = tl.graph.nodes[st.node(i)];
        const double expected = node.task.overlapped || node.fused_size > 1 ? fused
                                : node.task.phase == Phase::kWeightGrad     ? w
                                                                            : 2.0;
        EXPECT_DOUBLE_EQ(t.run.duration(), expected);
        ++checked;
      }
    }
    EXPECT_EQ(checked, 2 * 2 * 3 * 4);
  }
}

// A fused task's sends go out when it ends without holding its device: with sends of 0.5 the
// device's next task starts at the fused task's end, its data reaches the peer 0.5 later.
TEST(DualPipeVTiming, FusedSendsDoNotHoldTheDevice) {
  const IterationTimeline tl = computeTimeline(dpvInput(2, 4, 1, 1, 1, 0, 0, 0.5));
  int fused_sends = 0;
  for (const StageTimeline& st : tl.pipelines[0].stages) {
    for (size_t j = 0; j + 1 < st.tasks.size(); ++j) {
      const TaskTiming& t = st.tasks[j];
      const TaskNode& node = tl.graph.nodes[st.node(j)];
      const bool fused = node.task.overlapped || node.fused_size > 1;
      const bool last_member = !tl.graph.nodes[st.node(j + 1)].task.overlapped;
      if (!fused || !last_member) continue;
      EXPECT_GE(st.tasks[j + 1].run.start_us, t.run.end_us);
      for (size_t i = j; i + 3 > j + 1 && i <= j; --i) {
        if (st.tasks[i].send().duration() > 0) {
          EXPECT_DOUBLE_EQ(st.tasks[i].send().start_us, t.run.end_us);
          EXPECT_DOUBLE_EQ(st.tasks[i].send().duration(), 0.5);
          ++fused_sends;
        }
        if (i == 0) break;
      }
    }
  }
  EXPECT_GT(fused_sends, 0);
}

// DualPipe's README: bubble (PP/2 - 1)(F&B + B - 3W) with PP = 2P stages, B the whole backward
// (B + W here) and F&B a fused task. Measured as the largest idle time of a device (the iteration
// less the device's busy time, a fused task counted once) with free sends: F&B = max(compute,
// all-to-all) of F + B + W. Exact for the README figure's F = B = W and for F = B = 2W with half
// of F and B an all-to-all (hidden: F&B = 3W); not in general (W = 2F, a communication-bound
// F&B, unequal all-to-alls: docs/TECHNIQUES.md has the differences).
TEST(DualPipeVTiming, BubbleOfTheReadme) {
  struct Costs {
    double f, b, w, fa, ba;
  };
  for (const Costs& c : {Costs{1, 1, 1, 0, 0}, Costs{2, 2, 1, 1, 1}}) {
    for (int P : {2, 3, 4, 6}) {
      for (int64_t m : {2 * int64_t{P}, 2 * int64_t{P} + 3, 4 * int64_t{P}}) {
        SCOPED_TRACE(::testing::Message()
                     << "f=" << c.f << " b=" << c.b << " P=" << P << " m=" << m);
        const IterationTimeline tl = computeTimeline(dpvInput(P, m, c.f, c.b, c.w, c.fa, c.ba));
        double bubble = 0;
        for (const StageTimeline& st : tl.pipelines[0].stages) {
          bubble = std::max(bubble, tl.iteration_us - st.busy_in_pipeline_us);
        }
        const double fused = std::max(c.f - c.fa + c.b - c.ba + c.w, c.fa + c.ba);
        EXPECT_DOUBLE_EQ(bubble, (P - 1) * (fused + (c.b + c.w) - 3 * c.w));
      }
    }
  }
}

// The README's memory columns, against a pipeline of the same 2P stages (each chunk a stage of
// parameters p/2 and activations A/2 per micro-batch): every DualPipeV device holds two stages'
// parameters (2x, p) and at its peak PP + 1 = 2P + 1 stage activations. By hand on device 0: the
// warm-up runs 2(P-1) + 2 = 2P forwards before any backward (2P held); step 3's B1 W F1 frees one
// and holds one; step 4's fused [F0 B1 W] takes the next forward before its backward frees one:
// 2P + 1. The last device: its warm-up holds 2P, step 4's unfused F0 makes 2P + 1.
TEST(DualPipeVMemory, TwoStagesOfParametersAndPpPlusOneActivations) {
  const ModelConfig model = test::model(64, 4, 256, 32, 128, 8);
  const int P = 4;
  const int64_t m = 8, A = 1000, params = 64;
  const Strategy dpv = Strategy::of(1, P, 1, 1, m, Schedule::kDualPipeV);
  std::vector<ChunkMemoryInput> halves(2 * P);
  for (ChunkMemoryInput& c : halves) c.parameters = params / 2, c.activation_bytes = A / 2;
  const MemoryEstimate v = estimateMemory(model, dpv, m, int64_t{1} << 40, halves);
  ASSERT_EQ(v.stages.size(), size_t{P});
  EXPECT_EQ(v.stages[0].activation_bytes, (2 * P + 1) * A / 2);
  EXPECT_EQ(v.stages[P - 1].activation_bytes, (2 * P + 1) * A / 2);
  for (int s = 0; s < P; ++s) EXPECT_EQ(v.stages[s].parameters, 2 * (params / 2)) << s;
}

}  // namespace
}  // namespace evsim

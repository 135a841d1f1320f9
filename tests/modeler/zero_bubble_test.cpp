// Zero-bubble schedules (Qi et al., ICLR'24) on the task graph: their orders written out by hand,
// a 3-stage ZB-H1 timeline traced on paper, the paper's bubble closed forms against 1F1B, ZB-H2's
// gap-free stages, the memory W keeps alive, and a simulated GPT with its B and W ops.
//
// Hand rules (timing_engine.h): a task starts at max(device free, inputs); a send occupies the
// sender right after its task and the data arrives when it ends; W waits for its own B (same
// device). ZB-H1 order of stage s (zb_h1.cpp): w = P-s-1 warm-up forwards, then for j = 0..m-1:
// F(w+j) while forwards remain, B(j), W(j-s) when j >= s; then the W's left.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "plan/iteration_plan.h"
#include "modeler/device_events.h"
#include "modeler/memory_model.h"
#include "modeler/simulation.h"
#include "plan/task_graph.h"
#include "modeler/timing_engine.h"
#include "support/test_support.h"

namespace evsim {
namespace {

std::string orderText(const std::vector<StageTask>& order) {
  std::string out;
  for (const StageTask& t : order) {
    if (!out.empty()) out += ' ';
    out += t.phase == Phase::kForward ? 'F' : t.phase == Phase::kBackward ? 'B' : 'W';
    out += std::to_string(t.micro_batch);
  }
  return out;
}

TimingInput uniformInput(Schedule schedule, int P, int64_t m, double f, double b, double w,
                         double send = 0) {
  TimingInput in;
  in.schedule = schedule;
  in.micro_batches = m;
  StageCost cost;
  cost.forward_us = f;
  cost.backward_us = b;
  cost.weight_grad_us = w;
  in.stages.assign(P, cost);
  in.pipelines.push_back(
      PipelineCost{std::vector<double>(P - 1, send), std::vector<double>(P - 1, send), {}});
  return in;
}

TEST(ZeroBubbleSchedule, ZbH1OrdersByHand) {
  // P = 3, m = 4. Stage 0: w = 2, W right after its B; stage 1: w = 1, W one micro-batch late;
  // stage 2: w = 0, W two late.
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbh1, 0, 3, 4)),
            "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3");
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbh1, 1, 3, 4)),
            "F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3");
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbh1, 2, 3, 4)),
            "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3");
  EXPECT_THROW(stageTaskOrder(Schedule::kZbh1, 0, 3, 2), Error);     // m < P
  EXPECT_THROW(stageTaskOrder(Schedule::kZbh1, 0, 3, 3, 2), Error);  // no model chunks
}

TEST(ZeroBubbleSchedule, ZbH2OrdersByHand) {
  // P = 3, m = 5, the heuristic on unit times: stage s fills its wait for the first gradient
  // (which arrives 2(P-s)-1 units after its first forward starts) with 5, 3, 1 forwards; B goes
  // first whenever its gradient is there, W fills what is left: stage 2 keeps every W to the end.
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbh2, 0, 3, 5)),
            "F0 F1 F2 F3 F4 B0 W0 B1 W1 B2 W2 B3 W3 B4 W4");
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbh2, 1, 3, 5)),
            "F0 F1 F2 B0 F3 B1 F4 B2 W0 B3 W1 B4 W2 W3 W4");
  EXPECT_EQ(orderText(stageTaskOrder(Schedule::kZbh2, 2, 3, 5)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 W0 W1 W2 W3 W4");
}

// P = 3, m = 3, F = 1, B = 2, W = 1, every send 0.5.
//   s0: F0 [0,1] send ->1.5; F1 [1.5,2.5] ->3; F2 [3,4] ->4.5
//   s1: F0 [1.5,2.5] ->3; F1 [3,4] ->4.5
//   s2: F0 [3,4]; B0 [4,6] ->6.5; F1 (ready 4.5, free 6.5) [6.5,7.5]; B1 [7.5,9.5] ->10
//   s1: B0 (ready 6.5) [6.5,8.5] ->9; F2 [9,10] ->10.5; B1 (ready 10) [10.5,12.5] ->13; W0 [13,14]
//   s2: F2 (ready 10.5) [10.5,11.5]; B2 [11.5,13.5] ->14; W0 [14,15]; W1 [15,16]; W2 [16,17]
//   s1: B2 (ready 14) [14,16] ->16.5; W1 [16.5,17.5]; W2 [17.5,18.5]
//   s0: B0 (ready 9) [9,11]; W0 [11,12]; B1 (ready 13) [13,15]; W1 [15,16]; B2 (ready 16.5)
//       [16.5,18.5]; W2 [18.5,19.5]
// flush = iteration = 19.5 (no DP, no optimizer).
TEST(ZeroBubbleTiming, ThreeStageZbH1TimelineByHand) {
  IterationTimeline tl = computeTimeline(uniformInput(Schedule::kZbh1, 3, 3, 1, 2, 1, 0.5));
  struct Row {
    const char* task;
    double start, end, send_end;
  };
  const std::vector<std::vector<Row>> expected = {{{"F0", 0, 1, 1.5},
                                                   {"F1", 1.5, 2.5, 3},
                                                   {"F2", 3, 4, 4.5},
                                                   {"B0", 9, 11, 11},
                                                   {"W0", 11, 12, 12},
                                                   {"B1", 13, 15, 15},
                                                   {"W1", 15, 16, 16},
                                                   {"B2", 16.5, 18.5, 18.5},
                                                   {"W2", 18.5, 19.5, 19.5}},
                                                  {{"F0", 1.5, 2.5, 3},
                                                   {"F1", 3, 4, 4.5},
                                                   {"B0", 6.5, 8.5, 9},
                                                   {"F2", 9, 10, 10.5},
                                                   {"B1", 10.5, 12.5, 13},
                                                   {"W0", 13, 14, 14},
                                                   {"B2", 14, 16, 16.5},
                                                   {"W1", 16.5, 17.5, 17.5},
                                                   {"W2", 17.5, 18.5, 18.5}},
                                                  {{"F0", 3, 4, 4},
                                                   {"B0", 4, 6, 6.5},
                                                   {"F1", 6.5, 7.5, 7.5},
                                                   {"B1", 7.5, 9.5, 10},
                                                   {"F2", 10.5, 11.5, 11.5},
                                                   {"B2", 11.5, 13.5, 14},
                                                   {"W0", 14, 15, 15},
                                                   {"W1", 15, 16, 16},
                                                   {"W2", 16, 17, 17}}};
  const PipelineTimeline& p = tl.pipelines[0];
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(p.stages[s].tasks.size(), expected[s].size());
    for (size_t i = 0; i < expected[s].size(); ++i) {
      const TaskTiming& t = p.stages[s].tasks[i];
      SCOPED_TRACE(::testing::Message() << "stage " << s << " " << expected[s][i].task);
      EXPECT_EQ(orderText({tl.graph.nodes[p.stages[s].node(i)].task}), expected[s][i].task);
      EXPECT_DOUBLE_EQ(t.run.start_us, expected[s][i].start);
      EXPECT_DOUBLE_EQ(t.run.end_us, expected[s][i].end);
      EXPECT_DOUBLE_EQ(t.send().end_us, expected[s][i].send_end);
    }
  }
  EXPECT_DOUBLE_EQ(p.flush_us, 19.5);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 19.5);
}

// Free sends, every stage F, B, W: ZB-H1 takes m(F+B+W) + (P-1)(F+B-W) (the paper's bubble);
// 1F1B with one backward of B+W takes (m+P-1)(F+B+W), a bubble of (P-1)(F+B+W).
TEST(ZeroBubbleTiming, ZbH1BubbleIsThePapersAgainst1F1B) {
  struct Times {
    double f, b, w;
  };
  for (int P : {2, 3, 4}) {
    for (int64_t m : {int64_t{P}, int64_t{P} + 1, 2 * int64_t{P} + 3}) {
      for (Times t : {Times{1, 1, 1}, Times{1, 2, 1}, Times{2, 3, 1}, Times{1, 1, 0.5}}) {
        SCOPED_TRACE(::testing::Message()
                     << "P=" << P << " m=" << m << " F=" << t.f << " B=" << t.b << " W=" << t.w);
        const double work = m * (t.f + t.b + t.w);
        const IterationTimeline zb =
            computeTimeline(uniformInput(Schedule::kZbh1, P, m, t.f, t.b, t.w));
        EXPECT_DOUBLE_EQ(zb.iteration_us - work, (P - 1) * (t.f + t.b - t.w));
        const IterationTimeline one =
            computeTimeline(uniformInput(Schedule::kDapple, P, m, t.f, t.b + t.w, 0));
        EXPECT_DOUBLE_EQ(one.iteration_us - work, (P - 1) * (t.f + t.b + t.w));
        // Memory: every ZB-H1 stage holds up to P micro-batches (1F1B's stage 0), until their W.
        for (int s = 0; s < P; ++s) EXPECT_EQ(zb.pipelines[0].stages[s].peak_activations, P);
      }
    }
  }
}

// Unit F = B = W, free sends, m >= 2P-1: every ZB-H2 stage runs without a gap from its first task
// to its last (3m busy), so the only loss is the last stage starting (P-1) F later:
// iteration 3m + P - 1. Stage 0 holds 2P-1 micro-batches.
TEST(ZeroBubbleTiming, ZbH2StagesHaveNoGapOnceMIsAtLeast2PMinus1) {
  for (int P : {2, 3, 4, 6}) {
    for (int64_t m : {2 * int64_t{P} - 1, 2 * int64_t{P}, 3 * int64_t{P} + 1}) {
      SCOPED_TRACE(::testing::Message() << "P=" << P << " m=" << m);
      const IterationTimeline tl = computeTimeline(uniformInput(Schedule::kZbh2, P, m, 1, 1, 1));
      const PipelineTimeline& p = tl.pipelines[0];
      for (int s = 0; s < P; ++s) {
        const StageTimeline& st = p.stages[s];
        EXPECT_DOUBLE_EQ(st.tasks.front().run.start_us, s);
        EXPECT_DOUBLE_EQ(st.pipeline_end_us - st.tasks.front().run.start_us, 3.0 * m);
        EXPECT_LE(st.peak_activations, 2 * P - 1);
      }
      EXPECT_EQ(p.stages[0].peak_activations, 2 * P - 1);
      EXPECT_DOUBLE_EQ(tl.iteration_us, 3.0 * m + P - 1);
      // Against ZB-H1's m(F+B+W) + (P-1)(F+B-W) = 3m + P - 1 at unit times the iteration is the
      // same; ZB-H2 wins once B > W (below) and its stages' bubbles are 0, not (P-1)(F+B-W).
    }
  }
  // F = 1, B = 2, W = 1, P = 3, m = 5: ZB-H1 m(F+B+W) + (P-1)(F+B-W) = 20 + 4 = 24; ZB-H2's
  // orders above finish in 20 + 2: stage 2 starts at 2 and then never waits (traced by hand from
  // the orders of ZbH2OrdersByHand).
  EXPECT_DOUBLE_EQ(computeTimeline(uniformInput(Schedule::kZbh1, 3, 5, 1, 2, 1)).iteration_us, 24);
  EXPECT_DOUBLE_EQ(computeTimeline(uniformInput(Schedule::kZbh2, 3, 5, 1, 2, 1)).iteration_us, 22);
}

TEST(ZeroBubbleMemory, BKeepsWhatWReadsUntilW) {
  // ZB-H1 P = 2, stage 1: F0 B0 F1 B1 W0 W1. Chunk activations A = 10, W's inputs R = 4.
  // F0 10, B0 10-10+4 = 4, F1 14, B1 8, W0 4, W1 0: peak 14 bytes, 2 micro-batches in flight.
  const std::vector<StageTask> order = stageTaskOrder(Schedule::kZbh1, 1, 2, 2);
  ASSERT_EQ(orderText(order), "F0 B0 F1 B1 W0 W1");
  const ActivationPeak peak = peakActivations(order, {10}, {4});
  EXPECT_EQ(peak.bytes, 14);
  EXPECT_EQ(peak.in_flight, 2);
  // 1F1B's order frees everything at B: peak 10, one in flight.
  const ActivationPeak one = peakActivations(stageTaskOrder(Schedule::kDapple, 1, 2, 2), {10}, {4});
  EXPECT_EQ(one.bytes, 10);
  EXPECT_EQ(one.in_flight, 1);
}

// --- a simulated GPT ----------------------------------------------------------------------------

// h = 64, a = 4, f = 256, s = 32, vocab 512, 4 layers (simulation_test.cpp's model), split 2 + 2.
IterationPlan gptPlan(Schedule schedule, int dp) {
  Strategy s = Strategy::of(1, 2, dp, 1, 2 * dp, schedule);
  s.stage_layers = {2, 2};
  return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                            test::cluster(8, 1, test::kSlowLinks), s);
}

TEST(ZeroBubbleOps, OnlyWgradGemmsAreWeightGradOps) {
  const IterationPlan p = gptPlan(Schedule::kZbh1, 1);
  int weight_grad = 0;
  for (const StagePlan& stage : p.stages) {
    for (const OpInstance& op : stage.backward) {
      const bool wgrad = std::string(op.name).ends_with("_wgrad");
      EXPECT_EQ(op.weight_grad, wgrad) << op.name;
      if (!op.weight_grad) continue;
      ++weight_grad;
      // dW = dY^T X: layout tn, a GEMM event of its own (the dgrad is nn).
      EXPECT_EQ(p.events[op.event].event.layout, "tn") << op.name;
    }
    for (const OpInstance& op : stage.forward) EXPECT_FALSE(op.weight_grad) << op.name;
  }
  // qkv, attn_proj, fc1, fc2 per block (4 blocks) and the LM head's copy of the tied weight.
  EXPECT_EQ(weight_grad, 4 * 4 + 1);
}

// All compute ops 1 us, P2P free, the DP all-reduce 5 us. Stage 0 (embedding + 2 blocks):
// F = 3 + 2*15 = 33, backward 2 + 2*21 = 44 of which W = 2*4 = 8, B = 36. Stage 1 (2 blocks +
// head): F = 30 + 3 = 33, backward 42 + 4 = 46, W = 8 + 1 = 9, B = 37. ZB-H1, m = 2:
//   s0: F0 [0,33] F1 [33,66]          s1: F0 [33,66] B0 [66,103] F1 [103,136] B1 [136,173]
//   s0: B0 [103,139] W0 [139,147]         W0 [173,182] W1 [182,191]
//       B1 [173,209] W1 [209,217]
// D = 2: stage 0's all-reduce [217,222] after its last W, adam [222,223]; iteration 223.
// 1F1B on the same plan: s1 B0 [66,112] F1 [112,145] B1 [145,191]; s0 B0 [112,156], B1 [191,235],
// all-reduce [235,240], adam [240,241].
TEST(ZeroBubbleSimulation, GptTwoStagesByHand) {
  auto costs = [](const IterationPlan& p) {
    std::vector<EventCost> out;
    for (int e = 0; e < p.events.size(); ++e) {
      const EventKind kind = p.events[e].event.kind;
      out.push_back(EventCost{kind == EventKind::kCompute     ? 1.0
                              : kind == EventKind::kAllReduce ? 5.0
                                                              : 0.0,
                              Provenance::kMeasured});
    }
    return out;
  };
  IterationPlan zb = gptPlan(Schedule::kZbh1, 2);
  std::vector<EventCost> c = costs(zb);
  const Simulation sim = simulate(std::move(zb), std::move(c));
  EXPECT_DOUBLE_EQ(sim.input.stages[0].backward_us, 36);
  EXPECT_DOUBLE_EQ(sim.input.stages[0].weight_grad_us, 8);
  EXPECT_DOUBLE_EQ(sim.input.stages[1].backward_us, 37);
  EXPECT_DOUBLE_EQ(sim.input.stages[1].weight_grad_us, 9);
  const StageTimeline& s0 = sim.timeline.pipelines[0].stages[0];
  EXPECT_DOUBLE_EQ(s0.pipeline_end_us, 217);
  ASSERT_EQ(s0.grad_sync.size(), 1u);
  EXPECT_DOUBLE_EQ(s0.grad_sync[0].start_us, 217);
  EXPECT_DOUBLE_EQ(s0.grad_sync[0].end_us, 222);
  EXPECT_DOUBLE_EQ(sim.summary.iteration_us, 223);

  // Rank 0 (stage 0): every op once per micro-batch; the 8 wgrads of each micro-batch in its W
  // task (phase weight-grad), [139,147] and [209,217], one after another.
  int w_events = 0;
  double w0_first = -1, w1_last_end = -1;
  forEachDeviceEvent(sim, 0, [&](const DeviceEvent& e) {
    if (e.phase != Phase::kWeightGrad) return;
    ++w_events;
    EXPECT_TRUE(std::string(e.name).ends_with("_wgrad")) << e.name;
    if (e.micro_batch == 0 && w0_first < 0) w0_first = e.start_us;
    if (e.micro_batch == 1) w1_last_end = e.start_us + e.duration_us;
  });
  EXPECT_EQ(w_events, 2 * 8);
  EXPECT_DOUBLE_EQ(w0_first, 139);
  EXPECT_DOUBLE_EQ(w1_last_end, 217);

  IterationPlan one = gptPlan(Schedule::kDapple, 2);
  c = costs(one);
  EXPECT_DOUBLE_EQ(simulate(std::move(one), std::move(c)).summary.iteration_us, 241);
}

TEST(ZeroBubbleStrategy, RefusesFewerMicroBatchesThanStages) {
  Strategy s = Strategy::of(1, 4, 1, 1, 3, Schedule::kZbh1);
  const auto why = strategyViolation(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                     test::cluster(8, 1, test::kSlowLinks), s);
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(test::containsText(*why,
                                 "--schedule zbh1: m = B/(b*D) = 3 micro-batches, the "
                                 "schedule needs m >= P=4"));
  s.global_batch = 4;
  EXPECT_FALSE(strategyViolation(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                 test::cluster(8, 1, test::kSlowLinks), s)
                   .has_value());
  EXPECT_EQ(parseSchedule("ZBH2"), Schedule::kZbh2);
}

}  // namespace
}  // namespace evsim

// The timing engine on hand-built TimingInputs: closed forms of uniform pipelines, and full
// timelines of small non-uniform pipelines with P2P sends, data-parallel all-reduce (plain and
// bucketed/overlapped) and the optimizer, each worked out on paper in the comment above its test.
//
// Engine rules used by hand (timing_engine.h): a task starts at max(device free, input arrival);
// the send runs on the sender right after the producing task, and its end is the arrival at the
// neighbour; the device is free again after the send. Without overlap a stage's all-reduce starts
// when every pipeline class has finished that stage, and the optimizer follows it. With overlap,
// bucket i starts at max(end of bucket i-1, latest start of the stage's last backward + its ready
// offset); the optimizer starts at max(own pipeline end, end of the last bucket).
#include "modeler/timing_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "support/stage_cost.h"

namespace evsim {
namespace {

using test::stageCost;

TimingInput uniformInput(Schedule schedule, int P, int64_t m, double f, double b) {
  TimingInput in;
  in.schedule = schedule;
  in.micro_batches = m;
  in.stages.assign(P, stageCost(f, b));
  in.pipelines.push_back(
      PipelineCost{std::vector<double>(P - 1, 0.0), std::vector<double>(P - 1, 0.0), {}});
  return in;
}

// One expected row of a stage's timeline, in schedule order.
struct Row {
  Phase phase;
  int micro_batch;
  double run_start, run_end;
  double send_start, send_end;
  double input_ready;
};

void expectTasks(const IterationTimeline& tl, const StageTimeline& stage,
                 const std::vector<Row>& rows, const char* what) {
  ASSERT_EQ(stage.tasks.size(), rows.size()) << what;
  const PipelineTimeline* pipeline = nullptr;  // the class of `stage`
  for (const PipelineTimeline& p : tl.pipelines) {
    for (const StageTimeline& st : p.stages) pipeline = &st == &stage ? &p : pipeline;
  }
  ASSERT_NE(pipeline, nullptr) << what;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TaskTiming& t = stage.tasks[i];
    const Row& r = rows[i];
    SCOPED_TRACE(::testing::Message()
                 << what << " task " << i << " (" << (r.phase == Phase::kForward ? 'F' : 'B')
                 << r.micro_batch << ")");
    const int node = stage.node(i);
    const StageTask task = tl.graph.nodes[node].task;
    EXPECT_EQ(task.phase, r.phase);
    EXPECT_EQ(task.micro_batch, r.micro_batch);
    EXPECT_DOUBLE_EQ(t.run.start_us, r.run_start);
    EXPECT_DOUBLE_EQ(t.run.end_us, r.run_end);
    EXPECT_DOUBLE_EQ(t.send().start_us, r.send_start);
    EXPECT_DOUBLE_EQ(t.send().end_us, r.send_end);
    // When its input arrived: its transfer inputs' latest send end (0: none).
    double input_ready = 0;
    for (const TaskEdge& e : tl.graph.inputs(node)) {
      if (!e.transfer) continue;
      const TaskTiming& from = pipeline->stages[static_cast<size_t>(tl.graph.deviceOf(e.from))]
                                   .tasks[tl.graph.positionOf(e.from)];
      input_ready = std::max(input_ready, from.send_end_us);
    }
    EXPECT_DOUBLE_EQ(input_ready, r.input_ready);
  }
}

constexpr Phase F = Phase::kForward;
constexpr Phase B = Phase::kBackward;

// --- closed forms
// -----------------------------------------------------------------------------------

// Uniform stages (f, b per micro-batch), free sends, one pipeline, no DP: both schedules take
// (m + P - 1)(f + b). GPipe: the last stage's last forward ends at (P - 1 + m) f; the backwards
// then ripple back, stage 0's last ends (m + P - 1) b later. Each stage is busy m (f + b), so the
// bubble is (P - 1)/(m + P - 1) of the flush.
TEST(TimingEngineTest, UniformStagesClosedForm) {
  struct Case {
    int P;
    int64_t m;
    double iteration;  // (m + P - 1)(f + b) with f = 1, b = 2
    double bubble;     // (P - 1)/(m + P - 1)
  };
  const Case cases[] = {
      {4, 8, 11 * 3.0, 3.0 / 11},  // (8 + 3) * 3 = 33
      {3, 3, 5 * 3.0, 2.0 / 5},    // (3 + 2) * 3 = 15
      {1, 5, 5 * 3.0, 0.0},        // one stage: m (f + b) = 15, no bubble
      {2, 1, 2 * 3.0, 1.0 / 2},    // (1 + 1) * 3 = 6
  };
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << scheduleName(schedule) << " P=" << c.P << " m=" << c.m);
      IterationTimeline tl = computeTimeline(uniformInput(schedule, c.P, c.m, 1.0, 2.0));
      ASSERT_EQ(tl.pipelines.size(), 1u);
      const PipelineTimeline& p = tl.pipelines[0];
      EXPECT_DOUBLE_EQ(tl.iteration_us, c.iteration);
      EXPECT_DOUBLE_EQ(p.flush_us, c.iteration);
      ASSERT_EQ(p.stages.size(), static_cast<size_t>(c.P));
      for (const StageTimeline& s : p.stages) {
        EXPECT_EQ(s.tasks.size(), static_cast<size_t>(2 * c.m));
        EXPECT_DOUBLE_EQ(s.busy_in_pipeline_us, c.m * 3.0);  // m (f + b)
        EXPECT_DOUBLE_EQ((p.flush_us - s.busy_in_pipeline_us) / p.flush_us, c.bubble);
        EXPECT_TRUE(s.grad_sync.empty());  // D == 1
        EXPECT_DOUBLE_EQ(s.optimizer.duration(), 0.0);
      }
      // Stage 0 ends last: its final backward closes the flush.
      EXPECT_DOUBLE_EQ(p.stages[0].pipeline_end_us, c.iteration);
    }
  }
}

TEST(TimingEngineTest, PeakActivationsComeFromTheSchedule) {
  // P = 4, m = 8: DAPPLE holds min(P - s, m) = 4, 3, 2, 1; GPipe holds m = 8 everywhere.
  IterationTimeline dapple = computeTimeline(uniformInput(Schedule::kDapple, 4, 8, 1, 2));
  IterationTimeline gpipe = computeTimeline(uniformInput(Schedule::kGpipe, 4, 8, 1, 2));
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(dapple.pipelines[0].stages[s].peak_activations, 4 - s);
    EXPECT_EQ(gpipe.pipelines[0].stages[s].peak_activations, 8);
  }
}

// taskGraphOf: the graph computeTimeline times (link sharing builds it again after letting it go
// while the links are shared, issue 34 session 27): the input's schedule and shape, and timing on
// it gives the same timeline as on the graph computeTimeline builds itself.
TEST(TimingEngineTest, TaskGraphOfIsTheGraphTheTimingBuilds) {
  const TimingInput in = uniformInput(Schedule::kDapple, 4, 8, 1, 2);
  const TaskGraph graph = taskGraphOf(in);
  EXPECT_EQ(graph.devices, 4);
  EXPECT_EQ(graph.chunks, 1);
  EXPECT_EQ(graph.micro_batches, 8);
  ASSERT_EQ(graph.nodes.size(), size_t{2 * 4 * 8});  // F and B of each micro-batch on each stage
  const IterationTimeline built = computeTimeline(in);
  EXPECT_EQ(built.graph.storage, graph.storage);  // one shape, one graph (kept: 64 tasks)
  const IterationTimeline given = computeTimeline(in, taskGraphOf(in));
  // DAPPLE, P = 4, m = 8, F = 1, B = 2, no sends: (m + P - 1)(F + B) = 33.
  EXPECT_DOUBLE_EQ(built.iteration_us, 33.0);
  EXPECT_DOUBLE_EQ(given.iteration_us, built.iteration_us);
}

// --- non-uniform stages and P2P
// ---------------------------------------------------------------------

// P = 2, m = 2, f = (1, 2), b = (2, 4), send forward 0.5 (stage 0 -> 1), send backward 0.25 (1 ->
// 0).
TimingInput twoStageInput(Schedule schedule, int64_t m) {
  TimingInput in;
  in.schedule = schedule;
  in.micro_batches = m;
  in.stages = {stageCost(1, 2), stageCost(2, 4)};
  in.pipelines = {PipelineCost{{0.5}, {0.25}, {}}};
  return in;
}

// Task times below 0 (or NaN) are refused: the lone-task path writes no overlap slowdown for a
// task on that ground (lone_tasks.h), where the general rule would give body * slowdown.
TEST(TimingEngineTest, RefusesNegativeOrNanTaskTimes) {
  EXPECT_NO_THROW(computeTimeline(twoStageInput(Schedule::kGpipe, 2)));
  for (double bad : {-0.5, std::nan("")}) {
    for (int field = 0; field < 3; ++field) {
      TimingInput in = twoStageInput(Schedule::kGpipe, 2);
      double* const times[] = {&in.stages[1].forward_us, &in.stages[1].backward_us,
                               &in.stages[1].weight_grad_us};
      *times[field] = bad;
      EXPECT_THROW(computeTimeline(in), Error) << "field " << field << " = " << bad;
    }
  }
}

// GPipe; both stages run F0 F1 B0 B1.
//   s0 F0: [0, 1],      send [1, 1.5]    -> s1 has act 0 at 1.5
//   s0 F1: [1.5, 2.5],  send [2.5, 3]    -> s1 has act 1 at 3
//   s1 F0: ready 1.5, [1.5, 3.5]          (last stage: no forward send)
//   s1 F1: ready 3, device free 3.5: [3.5, 5.5]
//   s1 B0: [5.5, 9.5],  send [9.5, 9.75] -> s0 has grad 0 at 9.75
//   s1 B1: [9.75, 13.75], send [13.75, 14]  -> s0 has grad 1 at 14
//   s0 B0: ready 9.75, [9.75, 11.75]      (first stage: no backward send)
//   s0 B1: ready 14, [14, 18]
// pipeline end s0 = 18, s1 = 14; flush = iteration = 18.
// busy s0 = 1 + .5 + 1 + .5 + 2 + 2 = 7; s1 = 2 + 2 + (4 + .25) * 2 = 12.5.
TEST(TimingEngineTest, GpipeTwoStagesWithSendsByHand) {
  IterationTimeline tl = computeTimeline(twoStageInput(Schedule::kGpipe, 2));
  const PipelineTimeline& p = tl.pipelines[0];
  expectTasks(tl, p.stages[0],
              {{F, 0, 0, 1, 1, 1.5, 0},
               {F, 1, 1.5, 2.5, 2.5, 3, 0},
               {B, 0, 9.75, 11.75, 11.75, 11.75, 9.75},
               {B, 1, 14, 16, 16, 16, 14}},
              "stage 0");
  expectTasks(tl, p.stages[1],
              {{F, 0, 1.5, 3.5, 3.5, 3.5, 1.5},
               {F, 1, 3.5, 5.5, 5.5, 5.5, 3},
               {B, 0, 5.5, 9.5, 9.5, 9.75, 0},
               {B, 1, 9.75, 13.75, 13.75, 14, 0}},
              "stage 1");
  EXPECT_DOUBLE_EQ(p.stages[0].pipeline_end_us, 16);
  EXPECT_DOUBLE_EQ(p.stages[1].pipeline_end_us, 14);
  EXPECT_DOUBLE_EQ(p.flush_us, 16);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 16);
  EXPECT_DOUBLE_EQ(p.stages[0].busy_in_pipeline_us, 7);
  EXPECT_DOUBLE_EQ(p.stages[1].busy_in_pipeline_us, 12.5);
}

// DAPPLE, P = 2, m = 3. Stage 0: w = 1: F0 F1 B0 F2 B1 B2; stage 1: w = 0: F0 B0 F1 B1 F2 B2.
//   s0 F0: [0, 1],        send [1, 1.5]        -> s1 act 0 at 1.5
//   s0 F1: [1.5, 2.5],    send [2.5, 3]        -> s1 act 1 at 3
//   s1 F0: [1.5, 3.5]
//   s1 B0: [3.5, 7.5],    send [7.5, 7.75]     -> s0 grad 0 at 7.75
//   s1 F1: ready 3, free 7.75: [7.75, 9.75]
//   s1 B1: [9.75, 13.75], send [13.75, 14]     -> s0 grad 1 at 14
//   s0 B0: ready 7.75, free 3: [7.75, 9.75]
//   s0 F2: [9.75, 10.75], send [10.75, 11.25]  -> s1 act 2 at 11.25
//   s0 B1: ready 14: [14, 16]
//   s1 F2: ready 11.25, free 14: [14, 16]
//   s1 B2: [16, 20],      send [20, 20.25]     -> s0 grad 2 at 20.25
//   s0 B2: ready 20.25: [20.25, 22.25]
// flush = iteration = 22.25; s1 ends at 20.25.
TEST(TimingEngineTest, DappleTwoStagesWithSendsByHand) {
  IterationTimeline tl = computeTimeline(twoStageInput(Schedule::kDapple, 3));
  const PipelineTimeline& p = tl.pipelines[0];
  expectTasks(tl, p.stages[0],
              {{F, 0, 0, 1, 1, 1.5, 0},
               {F, 1, 1.5, 2.5, 2.5, 3, 0},
               {B, 0, 7.75, 9.75, 9.75, 9.75, 7.75},
               {F, 2, 9.75, 10.75, 10.75, 11.25, 0},
               {B, 1, 14, 16, 16, 16, 14},
               {B, 2, 20.25, 22.25, 22.25, 22.25, 20.25}},
              "stage 0");
  expectTasks(tl, p.stages[1],
              {{F, 0, 1.5, 3.5, 3.5, 3.5, 1.5},
               {B, 0, 3.5, 7.5, 7.5, 7.75, 0},
               {F, 1, 7.75, 9.75, 9.75, 9.75, 3},
               {B, 1, 9.75, 13.75, 13.75, 14, 0},
               {F, 2, 14, 16, 16, 16, 11.25},
               {B, 2, 16, 20, 20, 20.25, 0}},
              "stage 1");
  EXPECT_DOUBLE_EQ(p.stages[0].pipeline_end_us, 22.25);
  EXPECT_DOUBLE_EQ(p.stages[1].pipeline_end_us, 20.25);
  EXPECT_DOUBLE_EQ(p.flush_us, 22.25);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 22.25);
  // s0: 3 forwards (1 + .5 each) + 3 backwards of 2 = 10.5; s1: 3 * 2 + 3 * (4 + .25) = 18.75.
  EXPECT_DOUBLE_EQ(p.stages[0].busy_in_pipeline_us, 10.5);
  EXPECT_DOUBLE_EQ(p.stages[1].busy_in_pipeline_us, 18.75);
  EXPECT_EQ(p.stages[0].peak_activations, 2);
  EXPECT_EQ(p.stages[1].peak_activations, 1);
}

// P = 3, m = 1, GPipe, each link with its own cost, to pin down which link each send uses:
// f = 1, b = 2 everywhere; forward links (0 -> 1, 1 -> 2) = (0.5, 1.5); backward links (1 -> 0,
// 2 -> 1) = (0.25, 0.75).
//   s0 F0 [0, 1] send [1, 1.5];  s1 F0 [1.5, 2.5] send [2.5, 4];  s2 F0 [4, 5]
//   s2 B0 [5, 7] send (2 -> 1) [7, 7.75];  s1 B0 [7.75, 9.75] send (1 -> 0) [9.75, 10]
//   s0 B0 [10, 12].  Iteration 12.
TEST(TimingEngineTest, EachLinkUsesItsOwnSendCost) {
  TimingInput in;
  in.schedule = Schedule::kGpipe;
  in.micro_batches = 1;
  in.stages.assign(3, stageCost(1, 2));
  in.pipelines = {PipelineCost{{0.5, 1.5}, {0.25, 0.75}, {}}};
  IterationTimeline tl = computeTimeline(in);
  const PipelineTimeline& p = tl.pipelines[0];
  expectTasks(tl, p.stages[0], {{F, 0, 0, 1, 1, 1.5, 0}, {B, 0, 10, 12, 12, 12, 10}}, "stage 0");
  expectTasks(tl, p.stages[1], {{F, 0, 1.5, 2.5, 2.5, 4, 1.5}, {B, 0, 7.75, 9.75, 9.75, 10, 7.75}},
              "stage 1");
  expectTasks(tl, p.stages[2], {{F, 0, 4, 5, 5, 5, 4}, {B, 0, 5, 7, 7, 7.75, 0}}, "stage 2");
  EXPECT_DOUBLE_EQ(tl.iteration_us, 12);
}

// The same pipeline with link sharing's stretch on some sends (TimingInput::send_stretch_us, per
// class, device and position; what the scheduler adds to a lone task's send end, branched on once
// per device rather than per task): s0's F0 send +0.25, s1's F0 +0.5 and B0 +1, s2's B0 +0.125.
//   s0 F0 [0, 1] send [1, 1.75];  s1 F0 [1.75, 2.75] send [2.75, 4.75];  s2 F0 [4.75, 5.75]
//   s2 B0 [5.75, 7.75] send [7.75, 8.625];  s1 B0 [8.625, 10.625] send [10.625, 11.875]
//   s0 B0 [11.875, 13.875].  Iteration 13.875.
TEST(TimingEngineTest, StretchedSendsDelayTheirReceiversByHand) {
  TimingInput in;
  in.schedule = Schedule::kGpipe;
  in.micro_batches = 1;
  in.stages.assign(3, stageCost(1, 2));
  in.pipelines = {PipelineCost{{0.5, 1.5}, {0.25, 0.75}, {}}};
  in.send_stretch_us = {{{0.25, 0}, {0.5, 1.0}, {0, 0.125}}};
  IterationTimeline tl = computeTimeline(in);
  const PipelineTimeline& p = tl.pipelines[0];
  expectTasks(tl, p.stages[0],
              {{F, 0, 0, 1, 1, 1.75, 0}, {B, 0, 11.875, 13.875, 13.875, 13.875, 11.875}},
              "stage 0");
  expectTasks(tl, p.stages[1],
              {{F, 0, 1.75, 2.75, 2.75, 4.75, 1.75}, {B, 0, 8.625, 10.625, 10.625, 11.875, 8.625}},
              "stage 1");
  expectTasks(tl, p.stages[2],
              {{F, 0, 4.75, 5.75, 5.75, 5.75, 4.75}, {B, 0, 5.75, 7.75, 7.75, 8.625, 0}},
              "stage 2");
  EXPECT_DOUBLE_EQ(tl.iteration_us, 13.875);
  // Busy: runs plus sends as they ran. s1: 1 + 2 + 2 + 1.25 = 6.25.
  EXPECT_DOUBLE_EQ(p.stages[1].busy_in_pipeline_us, 6.25);
}

// --- data parallelism
// -------------------------------------------------------------------------------

// The GPipe P = 2, m = 2 pipeline above (stage 0 ends at 16, stage 1 at 14) with optimizer 1 per
// stage.
//   D = 1 (no all-reduce): s0 optimizer [16, 17], s1 [14, 15]; iteration 17.
//   D > 1, all-reduce 3 (stage 0) and 5 (stage 1):
//     s0 all-reduce [16, 19], optimizer [19, 20];  s1 all-reduce [14, 19], optimizer [19, 20].
//     iteration 20 = 17 + 3: the critical stage's all-reduce and nothing else.
TEST(TimingEngineTest, GradientAllReduceThenOptimizer) {
  TimingInput d1 = twoStageInput(Schedule::kGpipe, 2);
  d1.stages[0].optimizer_us = 1;
  d1.stages[1].optimizer_us = 1;
  IterationTimeline one = computeTimeline(d1);
  const PipelineTimeline& p1 = one.pipelines[0];
  EXPECT_TRUE(p1.stages[0].grad_sync.empty());
  EXPECT_TRUE(p1.stages[1].grad_sync.empty());
  EXPECT_DOUBLE_EQ(p1.stages[0].optimizer.start_us, 16);
  EXPECT_DOUBLE_EQ(p1.stages[0].optimizer.end_us, 17);
  EXPECT_DOUBLE_EQ(p1.stages[1].optimizer.start_us, 14);
  EXPECT_DOUBLE_EQ(p1.stages[1].optimizer.end_us, 15);
  EXPECT_DOUBLE_EQ(one.iteration_us, 17);

  TimingInput dn = d1;
  dn.stages[0].grad_allreduce_us = 3;
  dn.stages[1].grad_allreduce_us = 5;
  IterationTimeline many = computeTimeline(dn);
  const PipelineTimeline& pn = many.pipelines[0];
  ASSERT_EQ(pn.stages[0].grad_sync.size(), 1u);
  EXPECT_DOUBLE_EQ(pn.stages[0].grad_sync[0].start_us, 16);
  EXPECT_DOUBLE_EQ(pn.stages[0].grad_sync[0].end_us, 19);
  EXPECT_DOUBLE_EQ(pn.stages[0].optimizer.start_us, 19);
  EXPECT_DOUBLE_EQ(pn.stages[0].optimizer.end_us, 20);
  ASSERT_EQ(pn.stages[1].grad_sync.size(), 1u);
  EXPECT_DOUBLE_EQ(pn.stages[1].grad_sync[0].start_us, 14);
  EXPECT_DOUBLE_EQ(pn.stages[1].grad_sync[0].end_us, 19);
  EXPECT_DOUBLE_EQ(pn.stages[1].optimizer.start_us, 19);
  EXPECT_DOUBLE_EQ(pn.stages[1].optimizer.end_us, 20);
  EXPECT_DOUBLE_EQ(many.iteration_us, 20);
  EXPECT_DOUBLE_EQ(many.iteration_us - one.iteration_us, 3);
  // The pipeline phase itself is untouched.
  EXPECT_DOUBLE_EQ(pn.flush_us, p1.flush_us);
}

// Two pipeline classes: A with sends (0.5, 0.25) — the GPipe timeline above — and B with slower
// sends, forward 1.5 and backward 1.0:
//   B s0 F0 [0, 1] send [1, 2.5];  s0 F1 [2.5, 3.5] send [3.5, 5]
//   B s1 F0 [2.5, 4.5];  F1 ready 5: [5, 7];  B0 [7, 11] send [11, 12];  B1 [12, 16] send [16, 17]
//   B s0 B0 ready 12: [12, 14];  B1 ready 17: [17, 19]        -> B ends s0 = 19, s1 = 17
// A ends s0 = 16, s1 = 14. All-reduce (3, 5) of each stage waits for the slower class:
//   stage 0: [max(16, 19), +3] = [19, 22], optimizer (1) [22, 23] in both classes
//   stage 1: [max(14, 17), +5] = [17, 22], optimizer [22, 23]
// iteration 23.
TEST(TimingEngineTest, AllReduceWaitsForTheSlowestPipelineClass) {
  TimingInput in = twoStageInput(Schedule::kGpipe, 2);
  in.pipelines.push_back(PipelineCost{{1.5}, {1.0}, {}});
  in.stages[0].grad_allreduce_us = 3;
  in.stages[1].grad_allreduce_us = 5;
  in.stages[0].optimizer_us = 1;
  in.stages[1].optimizer_us = 1;
  IterationTimeline tl = computeTimeline(in);
  ASSERT_EQ(tl.pipelines.size(), 2u);
  const PipelineTimeline& b = tl.pipelines[1];
  expectTasks(tl, b.stages[0],
              {{F, 0, 0, 1, 1, 2.5, 0},
               {F, 1, 2.5, 3.5, 3.5, 5, 0},
               {B, 0, 12, 14, 14, 14, 12},
               {B, 1, 17, 19, 19, 19, 17}},
              "class B stage 0");
  expectTasks(tl, b.stages[1],
              {{F, 0, 2.5, 4.5, 4.5, 4.5, 2.5},
               {F, 1, 5, 7, 7, 7, 5},
               {B, 0, 7, 11, 11, 12, 0},
               {B, 1, 12, 16, 16, 17, 0}},
              "class B stage 1");
  EXPECT_DOUBLE_EQ(tl.pipelines[0].stages[0].pipeline_end_us, 16);
  EXPECT_DOUBLE_EQ(b.stages[0].pipeline_end_us, 19);
  EXPECT_DOUBLE_EQ(b.stages[1].pipeline_end_us, 17);
  for (const PipelineTimeline& p : tl.pipelines) {
    ASSERT_EQ(p.stages[0].grad_sync.size(), 1u);
    EXPECT_DOUBLE_EQ(p.stages[0].grad_sync[0].start_us, 19);
    EXPECT_DOUBLE_EQ(p.stages[0].grad_sync[0].end_us, 22);
    EXPECT_DOUBLE_EQ(p.stages[0].optimizer.start_us, 22);
    EXPECT_DOUBLE_EQ(p.stages[0].optimizer.end_us, 23);
    ASSERT_EQ(p.stages[1].grad_sync.size(), 1u);
    EXPECT_DOUBLE_EQ(p.stages[1].grad_sync[0].start_us, 17);
    EXPECT_DOUBLE_EQ(p.stages[1].grad_sync[0].end_us, 22);
    EXPECT_DOUBLE_EQ(p.stages[1].optimizer.start_us, 22);
    EXPECT_DOUBLE_EQ(p.stages[1].optimizer.end_us, 23);
  }
  EXPECT_DOUBLE_EQ(tl.iteration_us, 23);
}

// Overlap with buckets on the GPipe P = 2, m = 2 pipeline (stage 0's last backward starts at 14 and
// the stage ends at 16; stage 1's last backward starts at 9.75 and the stage ends at 14), optimizer
// 1 per stage.
//   stage 0 buckets (ready offset, all-reduce): (0.5, 1), (1, 0.25), (2, 3)
//     b0: max(0, 14 + 0.5)       = 14.5  -> [14.5, 15.5]
//     b1: max(15.5, 14 + 1 = 15) = 15.5  -> [15.5, 15.75]   (waits for the stream)
//     b2: max(15.75, 14 + 2)     = 16    -> [16, 19]        (waits for its gradients)
//     optimizer: max(16, 19) = 19 -> [19, 20]               (waits for the last bucket)
//   stage 1 buckets: (1, 2), (4, 1)
//     b0: 9.75 + 1 = 10.75 -> [10.75, 12.75];  b1: max(12.75, 13.75) -> [13.75, 14.75]
//     optimizer: max(14, 14.75) = 14.75 -> [14.75, 15.75]
// iteration 20. grad_allreduce_us is ignored when buckets exist under overlap.
TEST(TimingEngineTest, OverlappedBucketsByHand) {
  TimingInput in = twoStageInput(Schedule::kGpipe, 2);
  in.dp_overlap = true;
  in.stages[0].buckets = {{0.5, 1}, {1, 0.25}, {2, 3}};
  in.stages[1].buckets = {{1, 2}, {4, 1}};
  in.stages[0].grad_allreduce_us = 100;  // must not be used
  in.stages[1].grad_allreduce_us = 100;
  in.stages[0].optimizer_us = 1;
  in.stages[1].optimizer_us = 1;
  IterationTimeline tl = computeTimeline(in);
  const PipelineTimeline& p = tl.pipelines[0];
  const auto& s0 = p.stages[0].grad_sync;
  ASSERT_EQ(s0.size(), 3u);
  EXPECT_DOUBLE_EQ(s0[0].start_us, 14.5);
  EXPECT_DOUBLE_EQ(s0[0].end_us, 15.5);
  EXPECT_DOUBLE_EQ(s0[1].start_us, 15.5);
  EXPECT_DOUBLE_EQ(s0[1].end_us, 15.75);
  EXPECT_DOUBLE_EQ(s0[2].start_us, 16);
  EXPECT_DOUBLE_EQ(s0[2].end_us, 19);
  EXPECT_DOUBLE_EQ(p.stages[0].optimizer.start_us, 19);
  EXPECT_DOUBLE_EQ(p.stages[0].optimizer.end_us, 20);
  const auto& s1 = p.stages[1].grad_sync;
  ASSERT_EQ(s1.size(), 2u);
  EXPECT_DOUBLE_EQ(s1[0].start_us, 10.75);
  EXPECT_DOUBLE_EQ(s1[0].end_us, 12.75);
  EXPECT_DOUBLE_EQ(s1[1].start_us, 13.75);
  EXPECT_DOUBLE_EQ(s1[1].end_us, 14.75);
  EXPECT_DOUBLE_EQ(p.stages[1].optimizer.start_us, 14.75);
  EXPECT_DOUBLE_EQ(p.stages[1].optimizer.end_us, 15.75);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 20);
}

// Overlap with the two classes A and B above: buckets follow the latest last-backward start.
//   stage 0: A starts its last backward at 14, B at 17 -> 17.
//     b0 [17.5, 18.5];  b1 max(18.5, 18) -> [18.5, 18.75];  b2 max(18.75, 19) -> [19, 22]
//     optimizer: A max(16, 22), B max(19, 22) -> [22, 23]
//   stage 1: A 9.75, B 12 -> 12.  b0 [13, 15];  b1 max(15, 16) -> [16, 17]
//     optimizer: A max(14, 17), B max(17, 17) -> [17, 18]
// iteration 23.
TEST(TimingEngineTest, OverlappedBucketsFollowTheSlowestClass) {
  TimingInput in = twoStageInput(Schedule::kGpipe, 2);
  in.pipelines.push_back(PipelineCost{{1.5}, {1.0}, {}});
  in.dp_overlap = true;
  in.stages[0].buckets = {{0.5, 1}, {1, 0.25}, {2, 3}};
  in.stages[1].buckets = {{1, 2}, {4, 1}};
  in.stages[0].optimizer_us = 1;
  in.stages[1].optimizer_us = 1;
  IterationTimeline tl = computeTimeline(in);
  for (const PipelineTimeline& p : tl.pipelines) {
    const auto& s0 = p.stages[0].grad_sync;
    ASSERT_EQ(s0.size(), 3u);
    EXPECT_DOUBLE_EQ(s0[0].start_us, 17.5);
    EXPECT_DOUBLE_EQ(s0[0].end_us, 18.5);
    EXPECT_DOUBLE_EQ(s0[1].start_us, 18.5);
    EXPECT_DOUBLE_EQ(s0[1].end_us, 18.75);
    EXPECT_DOUBLE_EQ(s0[2].start_us, 19);
    EXPECT_DOUBLE_EQ(s0[2].end_us, 22);
    EXPECT_DOUBLE_EQ(p.stages[0].optimizer.start_us, 22);
    EXPECT_DOUBLE_EQ(p.stages[0].optimizer.end_us, 23);
    const auto& s1 = p.stages[1].grad_sync;
    ASSERT_EQ(s1.size(), 2u);
    EXPECT_DOUBLE_EQ(s1[0].start_us, 13);
    EXPECT_DOUBLE_EQ(s1[0].end_us, 15);
    EXPECT_DOUBLE_EQ(s1[1].start_us, 16);
    EXPECT_DOUBLE_EQ(s1[1].end_us, 17);
    EXPECT_DOUBLE_EQ(p.stages[1].optimizer.start_us, 17);
    EXPECT_DOUBLE_EQ(p.stages[1].optimizer.end_us, 18);
  }
  EXPECT_DOUBLE_EQ(tl.iteration_us, 23);
}

// --- bad input
// --------------------------------------------------------------------------------------

TEST(TimingEngineTest, RejectsInconsistentInput) {
  TimingInput no_pipeline = uniformInput(Schedule::kGpipe, 2, 2, 1, 2);
  no_pipeline.pipelines.clear();
  EXPECT_THROW(computeTimeline(no_pipeline), Error);

  TimingInput no_stage = uniformInput(Schedule::kGpipe, 2, 2, 1, 2);
  no_stage.stages.clear();
  EXPECT_THROW(computeTimeline(no_stage), Error);

  TimingInput wrong_links = uniformInput(Schedule::kGpipe, 3, 2, 1, 2);
  wrong_links.pipelines[0].send_forward_us = {0.0};  // needs P - 1 = 2
  EXPECT_THROW(computeTimeline(wrong_links), Error);

  TimingInput no_micro_batches = uniformInput(Schedule::kDapple, 2, 2, 1, 2);
  no_micro_batches.micro_batches = 0;
  EXPECT_THROW(computeTimeline(no_micro_batches), Error);
}

}  // namespace
}  // namespace evsim

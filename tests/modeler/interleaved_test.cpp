// Megatron's interleaved 1F1B (virtual pipeline): the task order of each device, the activations
// it holds, the timing engine's closed form and a hand-worked timeline with sends and DP, and the
// simulation / per-rank events / memory of an interleaved plan. Every expected number is worked
// out by hand in the comment next to it.
//
// Order (plan/schedules/interleaved.cpp): m*v forward and m*v backward micro-steps per device;
// forward step k runs micro-batch (k / (P*v)) * P + k % P of chunk (k % (P*v)) / P, backward step k
// the same micro-batch of chunk v-1-(k % (P*v)) / P; w = min((P-s-1)*2 + (v-1)*P, m*v) warm-up
// forwards, then pairs (forward w+i, backward i), then the remaining backwards.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "plan/iteration_plan.h"
#include "modeler/device_events.h"
#include "modeler/memory_model.h"
#include "modeler/simulation.h"
#include "plan/task_graph.h"
#include "modeler/timing_engine.h"
#include "support/stage_cost.h"

namespace evsim {
namespace {

using test::stageCost;

// The graph walk's micro-batch chunks in flight (task_graph.h) for unit chunk bytes.
int peakActivationsInFlight(const std::vector<StageTask>& order) {
  return peakActivations(order, std::vector<int64_t>(8, 1), std::vector<int64_t>(8, 0)).in_flight;
}
int64_t peakActivationBytes(const std::vector<StageTask>& order,
                            const std::vector<int64_t>& bytes) {
  return peakActivations(order, bytes, std::vector<int64_t>(bytes.size(), 0)).bytes;
}

// "F0c0 F1c0 ..." (micro-batch, chunk).
std::string orderText(const std::vector<StageTask>& order) {
  std::string out;
  for (const StageTask& t : order) {
    if (!out.empty()) out += ' ';
    out += (t.phase == Phase::kForward ? 'F' : 'B') + std::to_string(t.micro_batch) + "c" +
           std::to_string(t.chunk);
  }
  return out;
}

std::string interleavedOrder(int s, int P, int64_t m, int v) {
  return orderText(stageTaskOrder(Schedule::kInterleaved, s, P, m, v));
}

// --- schedule order ----------------------------------------------------------------------------

TEST(InterleavedSchedule, P2V2M4ByHand) {
  // Forward steps k = 0..7: (mb, chunk) = (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1);
  // backward steps: the same micro-batches with chunks 1 - c: (0,1) (1,1) (0,0) (1,0) (2,1) (3,1)
  // (2,0) (3,0).
  // Device 0: w = min(1*2 + 1*2, 8) = 4 warm-up forwards, 4 pairs, 4 backwards.
  EXPECT_EQ(interleavedOrder(0, 2, 4, 2),
            "F0c0 F1c0 F0c1 F1c1 "
            "F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 "
            "B2c1 B3c1 B2c0 B3c0");
  // Device 1: w = min(0 + 2, 8) = 2, 6 pairs, 2 backwards.
  EXPECT_EQ(interleavedOrder(1, 2, 4, 2),
            "F0c0 F1c0 "
            "F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 "
            "B2c0 B3c0");
}

TEST(InterleavedSchedule, WarmupCappedByAllSteps) {
  // P = 2, v = 2, m = 2: device 0's w = min(4, 4) = 4: every forward first (GPipe-like).
  EXPECT_EQ(interleavedOrder(0, 2, 2, 2), "F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0");
  EXPECT_EQ(interleavedOrder(1, 2, 2, 2), "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 B0c0 B1c0");
}

TEST(InterleavedSchedule, EveryTaskOnceAndForwardBeforeBackward) {
  for (int P : {2, 4}) {
    for (int v : {2, 3}) {
      for (int64_t m : {int64_t{P}, int64_t{2 * P}, int64_t{3 * P}}) {
        for (int s = 0; s < P; ++s) {
          SCOPED_TRACE(::testing::Message() << "P=" << P << " v=" << v << " m=" << m << " s=" << s);
          std::set<std::tuple<int, int, int>> seen;
          for (const StageTask& t : stageTaskOrder(Schedule::kInterleaved, s, P, m, v)) {
            if (t.phase == Phase::kBackward) {
              EXPECT_TRUE(seen.count({0, t.micro_batch, t.chunk}));
            }
            EXPECT_TRUE(
                seen.insert({t.phase == Phase::kForward ? 0 : 1, t.micro_batch, t.chunk}).second);
          }
          EXPECT_EQ(seen.size(), static_cast<size_t>(2 * m * v));
        }
      }
    }
  }
}

TEST(InterleavedSchedule, RejectsMicroBatchesNotAMultipleOfP) {
  EXPECT_THROW(stageTaskOrder(Schedule::kInterleaved, 0, 4, 6, 2), Error);
  EXPECT_THROW(stageTaskOrder(Schedule::kDapple, 0, 4, 8, 2), Error);  // v > 1 needs interleaving
}

TEST(InterleavedSchedule, FirstDeviceHoldsMegatronsFactorOfActivations) {
  // Megatron theoretical_memory_usage.py: device 0 holds P micro-batches of all its layers times
  // (1 + (P-1)/(P*v)), i.e. P*v + P - 1 chunk activations: its w = 2(P-1) + (v-1)P warm-up
  // forwards plus the first steady forward. Uniform chunk bytes c = 1000:
  //   P=2 v=2: 4 * 1.25 = 5 chunks; P=4 v=2: 8 * (1 + 3/8) = 11; P=4 v=3: 12 * (1 + 3/12) = 15.
  struct Case {
    int P, v;
    int64_t m;
    int64_t chunks;
  };
  for (const Case& c :
       {Case{2, 2, 4, 5}, Case{4, 2, 8, 11}, Case{4, 3, 8, 15}, Case{4, 2, 16, 11}}) {
    SCOPED_TRACE(::testing::Message() << "P=" << c.P << " v=" << c.v << " m=" << c.m);
    std::vector<StageTask> order = stageTaskOrder(Schedule::kInterleaved, 0, c.P, c.m, c.v);
    EXPECT_EQ(peakActivationsInFlight(order), c.chunks);
    const double factor = 1.0 + (c.P - 1.0) / (c.P * c.v);
    EXPECT_EQ(peakActivationBytes(order, std::vector<int64_t>(c.v, 1000)),
              static_cast<int64_t>(factor * c.P * c.v * 1000 + 0.5));
  }
  // One chunk: the byte peak is the count peak times the chunk (DAPPLE P=4 s=0: 4).
  EXPECT_EQ(peakActivationBytes(stageTaskOrder(Schedule::kDapple, 0, 4, 8), {7}), 28);
}

// --- timing engine -------------------------------------------------------------------------------

TimingInput interleavedInput(int P, int v, int64_t m, double chunk_f, double chunk_b) {
  TimingInput in;
  in.schedule = Schedule::kInterleaved;
  in.virtual_stages = v;
  in.micro_batches = m;
  in.stages.assign(P * v, stageCost(chunk_f, chunk_b));
  in.pipelines.push_back(
      PipelineCost{std::vector<double>(P * v - 1, 0.0), std::vector<double>(P * v - 1, 0.0), {}});
  return in;
}

// Uniform chunks (f/v, b/v per micro-batch), free sends: the last backward ends at
//   T = (m*v + P - 1) (f + b) / v = (m + (P-1)/v) (f + b),
// a bubble of (P-1)(f+b)/v, fraction (P-1)/(v m) of the ideal m(f+b) (Narayanan et al. 2021).
// By hand on P=2, v=2, m=4 with chunk costs 1 and 2 (f = 2, b = 4): device 0 runs F0c0 [0,1]
// F1c0 [1,2] F0c1 [2,3] F1c1 [3,4] F2c0 [4,5] B0c1 [6,8] F3c0 [8,9] B1c1 [9,11] F2c1 [11,12]
// B0c0 [12,14] F3c1 [14,15] B1c0 [15,17] B2c1 [18,20] B3c1 [21,23] B2c0 [23,25] B3c0 [25,27]:
// 27 = (4 + 1/2) * 6. P=4, v=2, m=8, same chunks: (8 + 3/2) * 6 = 57 (bubble 9 = 3/16 of 48).
// v = 3 (f = 3, b = 6): P=4, m=8: (8 + 1) * 9 = 81; P=2, m=4: (4 + 1/3) * 9 = 39.
TEST(InterleavedTiming, UniformChunksClosedForm) {
  struct Case {
    int P, v;
    int64_t m;
    double iteration;
  };
  for (const Case& c :
       {Case{2, 2, 4, 27}, Case{4, 2, 8, 57}, Case{4, 3, 8, 81}, Case{2, 3, 4, 39}}) {
    SCOPED_TRACE(::testing::Message() << "P=" << c.P << " v=" << c.v << " m=" << c.m);
    // Chunk costs 1 and 2 whatever v: f = v, b = 2v.
    const double f = c.v, b = 2.0 * c.v;
    const double closed = (c.m + (c.P - 1.0) / c.v) * (f + b);
    ASSERT_DOUBLE_EQ(closed, c.iteration);
    IterationTimeline tl = computeTimeline(interleavedInput(c.P, c.v, c.m, f / c.v, b / c.v));
    EXPECT_DOUBLE_EQ(tl.iteration_us, c.iteration);
    const PipelineTimeline& p = tl.pipelines[0];
    ASSERT_EQ(p.stages.size(), static_cast<size_t>(c.P));
    EXPECT_DOUBLE_EQ(p.flush_us, c.iteration);
    for (const StageTimeline& s : p.stages) {
      EXPECT_EQ(s.tasks.size(), static_cast<size_t>(2 * c.m * c.v));
      EXPECT_DOUBLE_EQ(s.busy_in_pipeline_us, c.m * (f + b));
    }
    const double bubble = (c.iteration - c.m * (f + b)) / (c.m * (f + b));
    EXPECT_DOUBLE_EQ(bubble, (c.P - 1.0) / (c.v * c.m));
  }
}

struct Row {
  Phase phase;
  int micro_batch, chunk;
  double run_start, run_end, send_end;
};

void expectRows(const IterationTimeline& tl, const StageTimeline& s, const std::vector<Row>& rows,
                const char* what) {
  ASSERT_EQ(s.tasks.size(), rows.size()) << what;
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << what << " task " << i);
    const TaskTiming& t = s.tasks[i];
    const StageTask task = tl.graph.nodes[s.node(i)].task;
    EXPECT_EQ(task.phase, rows[i].phase);
    EXPECT_EQ(task.micro_batch, rows[i].micro_batch);
    EXPECT_EQ(task.chunk, rows[i].chunk);
    EXPECT_DOUBLE_EQ(t.run.start_us, rows[i].run_start);
    EXPECT_DOUBLE_EQ(t.run.end_us, rows[i].run_end);
    EXPECT_DOUBLE_EQ(t.send().start_us, rows[i].run_end);
    EXPECT_DOUBLE_EQ(t.send().end_us, rows[i].send_end);
  }
}

constexpr Phase F = Phase::kForward;
constexpr Phase B = Phase::kBackward;

// P=2, v=2, m=2; chunk forward 1, backward 2; activation sends 0.5, gradient sends 0.25. Virtual
// stages: device 0 runs VS0 (c0), VS2 (c1); device 1 runs VS1 (c0), VS3 (c1). Orders (above):
// device 0 F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0, device 1 F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 B0c0
// B1c0. VS3 sends no activation and VS0 no gradient.
//   d0 F0c0 [0,1] send ->1.5       d1 F0c0 ready 1.5 [1.5,2.5] -> 3
//   d0 F1c0 [1.5,2.5] -> 3         d1 F1c0 ready 3 [3,4] -> 4.5
//   d0 F0c1 ready 3 [3,4] -> 4.5   d1 F0c1 ready 4.5 [4.5,5.5] (last chunk: no send)
//   d0 F1c1 ready 4.5 [4.5,5.5] -> 6
//   d1 B0c1 [5.5,7.5] -> 7.75      d1 F1c1 ready 6, free 7.75 [7.75,8.75]
//   d1 B1c1 [8.75,10.75] -> 11     d0 B0c1 ready 7.75 [7.75,9.75] -> 10
//   d0 B1c1 ready 11 [11,13] -> 13.25
//   d1 B0c0 ready 10, free 11 [11,13] -> 13.25     d1 B1c0 ready 13.25 [13.25,15.25] -> 15.5
//   d0 B0c0 ready 13.25 [13.25,15.25]              d0 B1c0 ready 15.5 [15.5,17.5]
// DP (one class): all-reduces VS0 3, VS2 1 (device 0), VS1 2, VS3 4 (device 1), chunk 1 first,
// one after another from the device's pipeline end; optimizer 0.5 per chunk after the last:
//   device 0: c1 [17.5,18.5], c0 [18.5,21.5], optimizer [21.5,22.5];
//   device 1: c1 [15.5,19.5], c0 [19.5,21.5], optimizer [21.5,22.5]. Iteration 22.5.
TEST(InterleavedTiming, HandWorkedTimelineWithSendsAndDataParallel) {
  TimingInput in = interleavedInput(2, 2, 2, 1, 2);
  in.pipelines[0].send_forward_us = {0.5, 0.5, 0.5};
  in.pipelines[0].send_backward_us = {0.25, 0.25, 0.25};
  const double allreduce[] = {3, 2, 1, 4};
  for (int k = 0; k < 4; ++k) {
    in.stages[k].grad_allreduce_us = allreduce[k];
    in.stages[k].optimizer_us = 0.5;
  }
  IterationTimeline tl = computeTimeline(in);
  const PipelineTimeline& p = tl.pipelines[0];
  expectRows(tl, p.stages[0],
             {{F, 0, 0, 0, 1, 1.5},
              {F, 1, 0, 1.5, 2.5, 3},
              {F, 0, 1, 3, 4, 4.5},
              {F, 1, 1, 4.5, 5.5, 6},
              {B, 0, 1, 7.75, 9.75, 10},
              {B, 1, 1, 11, 13, 13.25},
              {B, 0, 0, 13.25, 15.25, 15.25},
              {B, 1, 0, 15.5, 17.5, 17.5}},
             "device 0");
  expectRows(tl, p.stages[1],
             {{F, 0, 0, 1.5, 2.5, 3},
              {F, 1, 0, 3, 4, 4.5},
              {F, 0, 1, 4.5, 5.5, 5.5},
              {B, 0, 1, 5.5, 7.5, 7.75},
              {F, 1, 1, 7.75, 8.75, 8.75},
              {B, 1, 1, 8.75, 10.75, 11},
              {B, 0, 0, 11, 13, 13.25},
              {B, 1, 0, 13.25, 15.25, 15.5}},
             "device 1");
  EXPECT_DOUBLE_EQ(p.stages[0].pipeline_end_us, 17.5);
  EXPECT_DOUBLE_EQ(p.stages[1].pipeline_end_us, 15.5);
  EXPECT_DOUBLE_EQ(p.flush_us, 17.5);
  // Busy: device 0 runs 4*1 + 4*2 = 12 and sends 4*0.5 + 2*0.25 = 2.5; device 1 12 + 2*0.5 +
  // 4*0.25.
  EXPECT_DOUBLE_EQ(p.stages[0].busy_in_pipeline_us, 14.5);
  EXPECT_DOUBLE_EQ(p.stages[1].busy_in_pipeline_us, 14);
  ASSERT_EQ(p.stages[0].grad_sync.size(), 2u);
  EXPECT_EQ(p.stages[0].grad_sync_chunk, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(p.stages[0].grad_sync[0].start_us, 17.5);
  EXPECT_DOUBLE_EQ(p.stages[0].grad_sync[0].end_us, 18.5);
  EXPECT_DOUBLE_EQ(p.stages[0].grad_sync[1].start_us, 18.5);
  EXPECT_DOUBLE_EQ(p.stages[0].grad_sync[1].end_us, 21.5);
  ASSERT_EQ(p.stages[1].grad_sync.size(), 2u);
  EXPECT_DOUBLE_EQ(p.stages[1].grad_sync[0].start_us, 15.5);
  EXPECT_DOUBLE_EQ(p.stages[1].grad_sync[0].end_us, 19.5);
  EXPECT_DOUBLE_EQ(p.stages[1].grad_sync[1].start_us, 19.5);
  EXPECT_DOUBLE_EQ(p.stages[1].grad_sync[1].end_us, 21.5);
  for (const StageTimeline& s : p.stages) {
    EXPECT_DOUBLE_EQ(s.optimizer.start_us, 21.5);
    EXPECT_DOUBLE_EQ(s.optimizer.end_us, 22.5);
  }
  EXPECT_DOUBLE_EQ(tl.iteration_us, 22.5);
}

// With overlap, chunk c's buckets wait for the start of c's own last backward. Same pipeline with
// free sends: device 0 (P=2, v=2, m=2, chunk costs 1 and 2) runs F0c0 [0,1] F1c0 [1,2] F0c1 [2,3]
// F1c1 [3,4], then waits for device 1 (F0c0 [1,2] F1c0 [2,3] F0c1 [3,4] B0c1 [4,6] F1c1 [6,7]
// B1c1 [7,9] B0c0 [9,11] B1c0 [11,13]): B0c1 [6,8] B1c1 [9,11] B0c0 [11,13] B1c0 [13,15]
// (15 = (m*v + P - 1) * 3, the closed form). Device 0's chunk 1 last backward starts at 9: its
// bucket (ready 0.5, 1 long) runs [9.5,10.5]; chunk 0's starts at 13: its bucket (ready 2, 1 long)
// at max(10.5, 15) = 15 -> [15,16]; optimizer (0) at 16.
TEST(InterleavedTiming, OverlappedBucketsFollowTheirChunksLastBackward) {
  TimingInput in = interleavedInput(2, 2, 2, 1, 2);
  in.dp_overlap = true;
  in.stages[0].buckets = {{2, 1}};    // device 0, chunk 0
  in.stages[2].buckets = {{0.5, 1}};  // device 0, chunk 1
  IterationTimeline tl = computeTimeline(in);
  const StageTimeline& d0 = tl.pipelines[0].stages[0];
  EXPECT_DOUBLE_EQ(d0.pipeline_end_us, 15);
  ASSERT_EQ(d0.grad_sync.size(), 2u);
  EXPECT_EQ(d0.grad_sync_chunk, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(d0.grad_sync[0].start_us, 9.5);
  EXPECT_DOUBLE_EQ(d0.grad_sync[0].end_us, 10.5);
  EXPECT_DOUBLE_EQ(d0.grad_sync[1].start_us, 15);
  EXPECT_DOUBLE_EQ(d0.grad_sync[1].end_us, 16);
  EXPECT_DOUBLE_EQ(tl.iteration_us, 16);
}

TEST(InterleavedTiming, RejectsInconsistentInput) {
  TimingInput odd = interleavedInput(2, 2, 2, 1, 2);
  odd.stages.pop_back();  // 3 virtual stages are not P*v
  EXPECT_THROW(computeTimeline(odd), Error);
  TimingInput dapple = interleavedInput(2, 2, 2, 1, 2);
  dapple.schedule = Schedule::kDapple;  // v = 2 needs the interleaved schedule
  EXPECT_THROW(computeTimeline(dapple), Error);
}

}  // namespace
}  // namespace evsim

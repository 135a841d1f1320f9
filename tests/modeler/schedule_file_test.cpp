// Schedules as data (plan/schedules/schedule_file.h): torchtitan's CSV written by hand for small
// schedules, the round trip of every bundled schedule (same task graph, same simulated time), and
// one clear error per kind of bad file.
#include "plan/schedules/schedule_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "modeler/timing_engine.h"
#include "plan/task_graph.h"

namespace evsim {
namespace {

std::string csvOf(Schedule schedule, int P, int v, int64_t m) {
  const PipelineSchedule& s = pipelineSchedule(schedule);
  return scheduleCsv(*scheduleOrders(schedule, PipelineShape{P, v, m}),
                     pipelineLayout(schedule, P, v), s.splitsBackward());
}

std::string errorOf(const std::string& csv) {
  try {
    parseScheduleCsv(csv, "s.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ScheduleFile, WritesTorchtitanActionsByHand) {
  // 1F1B, P = 2, m = 2: stage 0 warms up one forward, stage 1 none.
  EXPECT_EQ(csvOf(Schedule::kDapple, 2, 1, 2), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  // ZB-V, P = 2, m = 2 (zb_v_test.cpp's orders): rank 0 runs stages 0 and 3, rank 1 stages 1
  // and 2; a split backward's B is written I.
  EXPECT_EQ(csvOf(Schedule::kZbv, 2, 2, 2),
            "0F0,0F1,3F0,3I0,3W0,3F1,3I1,3W1,0I0,0W0,0I1,0W1\n"
            "1F0,2F0,1F1,2F1,2I0,2W0,1I0,1W0,2I1,2W1,1I1,1W1\n");
  // DualPipeV, P = 2, m = 4 (dualpipe_v.cpp's steps by hand): rank 0 runs stages 0 and 3; a fused
  // F&B task is PyTorch's OVERLAP_F_B cell, its backward whole (I then W inside the cell).
  // Rank 0: 2 F0; F0 F1; B1 W F1; [F0 B1] [F1 B0]; B1 [F1 B0]; B1, B0 split; W B0 split; W.
  // Rank 1 (last): 2 x F0 F1; F0, B1 unfused; [F1 B0]; [F0 B1] [F1 B0]; B1 B0 whole; B1 B0 split;
  // W W.
  EXPECT_EQ(csvOf(Schedule::kDualPipeV, 2, 2, 4),
            "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3I1;3W1)OVERLAP_F_B,(3F2;0I0;0W0)OVERLAP_F_B,3I2,3W2,"
            "(3F3;0I1;0W1)OVERLAP_F_B,3I3,3W3,0I2,0W2,0I3,0W3\n"
            "1F0,2F0,1F1,2F1,1F2,2I0,2W0,(2F2;1I0;1W0)OVERLAP_F_B,(1F3;2I1;2W1)OVERLAP_F_B,"
            "(2F3;1I1;1W1)OVERLAP_F_B,2I2,2W2,1I2,1W2,2I3,1I3,2W3,1W3\n");
  const ScheduleFile d = parseScheduleCsv(csvOf(Schedule::kDualPipeV, 2, 2, 4), "d.csv");
  EXPECT_TRUE(d.fused);
  EXPECT_EQ(d.layout, PipelineLayout(LayoutKind::kV, 2, 2));
  // Interleaved P = 2, v = 2: rank 1 runs stages 1 and 3 (looped).
  const ScheduleFile f = parseScheduleCsv(csvOf(Schedule::kInterleaved, 2, 2, 2), "i.csv");
  EXPECT_EQ(f.layout, PipelineLayout(LayoutKind::kLooped, 2, 2));
  EXPECT_EQ(f.micro_batches, 2);
  EXPECT_FALSE(f.split_backward);
  const ScheduleFile v = parseScheduleCsv(csvOf(Schedule::kZbv, 2, 2, 2), "v.csv");
  EXPECT_EQ(v.layout, PipelineLayout(LayoutKind::kV, 2, 2));
  EXPECT_TRUE(v.split_backward);
}

// Writing then loading each bundled schedule gives the same task graph and the same timeline
// (uneven F, B, W and sends, so that a changed order would show).
TEST(ScheduleFile, BundledSchedulesRoundTrip) {
  struct Case {
    Schedule schedule;
    int v;
  };
  const int P = 4;
  const int64_t m = 8;
  for (Case c :
       {Case{Schedule::kGpipe, 1}, Case{Schedule::kDapple, 1}, Case{Schedule::kInterleaved, 2},
        Case{Schedule::kZbh1, 1}, Case{Schedule::kZbh2, 1}, Case{Schedule::kZbv, 2},
        Case{Schedule::kDualPipeV, 2}}) {
    SCOPED_TRACE(scheduleName(c.schedule));
    installScheduleFile(parseScheduleCsv(csvOf(c.schedule, P, c.v, m), "rt.csv"));
    const TaskGraph want = buildTaskGraph(c.schedule, P, c.v, m);
    const TaskGraph got = buildTaskGraph(Schedule::kFile, P, c.v, m);
    ASSERT_EQ(got.nodes.size(), want.nodes.size());
    // Ids follow device order: equal nodes id by id are equal orders.
    EXPECT_EQ(got.tasks_per_device, want.tasks_per_device);
    EXPECT_EQ(got.split_backward, want.split_backward);
    for (size_t n = 0; n < want.nodes.size(); ++n) {
      EXPECT_EQ(got.nodes[n].task, want.nodes[n].task);
      EXPECT_EQ(got.nodes[n].virtual_stage, want.nodes[n].virtual_stage);
      EXPECT_EQ(got.nodes[n].send, want.nodes[n].send);
      EXPECT_EQ(linkOf(got.nodes[n]), linkOf(want.nodes[n]));
    }
    auto iteration = [&](Schedule schedule) {
      TimingInput in;
      in.schedule = schedule;
      in.micro_batches = m;
      in.virtual_stages = c.v;
      for (int k = 0; k < P * c.v; ++k) {
        StageCost cost;
        cost.forward_us = 1 + 0.1 * k;
        cost.backward_us = 2 + 0.05 * k;
        cost.weight_grad_us = want.split_backward ? 0.7 : 0;
        cost.forward_overlap_us = 0.4;  // hidden in DualPipeV's fused tasks only
        cost.backward_overlap_us = 0.6;
        in.stages.push_back(cost);
      }
      const size_t links = static_cast<size_t>(P * c.v - 1);
      in.pipelines.push_back(
          PipelineCost{std::vector<double>(links, 0.3), std::vector<double>(links, 0.4), {}});
      return computeTimeline(in).iteration_us;
    };
    EXPECT_DOUBLE_EQ(iteration(Schedule::kFile), iteration(c.schedule));
    EXPECT_GT(iteration(c.schedule), 0);
  }
}

TEST(ScheduleFile, BadFilesAreOneLineNamingRankAndAction) {
  // A backward before its own forward on rank 0.
  EXPECT_EQ(errorOf("0B0,0F0\n1F0,1B0\n"),
            "s.csv: rank 0 action '0B0' (#0) waits for '0F0', which this rank runs later (out of "
            "dependency order)");
  // Rank 1 waits for F1 that rank 0 runs only after B0, which waits for rank 1's B0.
  EXPECT_EQ(errorOf("0F0,0B0,0F1,0B1\n1F0,1F1,1B1,1B0\n"),
            "s.csv: rank 0 action '0B0' (#1) waits for '1B0', which never runs first (deadlock "
            "between ranks)");
  EXPECT_EQ(errorOf("0F0,0F0,0B0\n1F0,1B0\n"), "s.csv: rank 0 action '0F0': runs twice");
  EXPECT_EQ(errorOf("0F0,0B0\n1F0\n"), "s.csv: rank 1 never runs '1B0'");
  EXPECT_EQ(errorOf("0F0,0X0\n"),
            "s.csv: rank 0 action '0X0': not {stage}{F|B|I|W}{micro-batch} or "
            "({action};{action}...)OVERLAP_F_B");
  // A fused cell must be one F and the backward of another micro-batch (and its W).
  EXPECT_EQ(errorOf("0F0,(0F1;0F2)OVERLAP_F_B\n"),
            "s.csv: rank 0 action '(0F1;0F2)OVERLAP_F_B': a fused task with two F");
  EXPECT_EQ(errorOf("(0F0;0B0)OVERLAP_F_B\n"),
            "s.csv: rank 0 action '(0F0;0B0)OVERLAP_F_B': a fused task is one F and the backward "
            "(I or B, and its W) of another micro-batch");
  EXPECT_EQ(errorOf("0F0,0I0,0B0\n"),
            "s.csv: rank 0 action '0B0': B (whole backward) mixed with I/W (split backward) in "
            "one schedule");
  // Rank 0 runs stages 0 and 1, rank 1 stages 2 and 3: neither looped nor V.
  EXPECT_EQ(errorOf("0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n"),
            "s.csv: the ranks' stages (rank 0: {0,1}; rank 1: {2,3}) are neither looped (rank r "
            "runs r, r+P, ...) nor V (r and 2P-1-r)");
  EXPECT_EQ(errorOf("\n\n"), "s.csv: no actions");
  // One rank running K stages of one micro-batch (looped, P = 1): the task graph codes a chunk's
  // send in a byte, so 127 chunks is the most (plan/pipeline_schedule.h kMaxChunksPerDevice).
  auto oneRank = [](int K) {
    std::string row;
    for (int k = 0; k < K; ++k) row += std::to_string(k) + "F0,";
    for (int k = K - 1; k >= 0; --k) row += std::to_string(k) + "B0" + (k ? "," : "\n");
    return row;
  };
  EXPECT_EQ(errorOf(oneRank(127)), "no error");
  EXPECT_EQ(errorOf(oneRank(128)),
            "s.csv: each rank runs 128 stages, at most 127 model chunks per device");
  EXPECT_THROW(loadScheduleCsv("/nonexistent/s.csv"), InputError);
}

}  // namespace
}  // namespace evsim

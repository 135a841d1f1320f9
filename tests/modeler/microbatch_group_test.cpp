// The interleaved schedule's tunable group N (Megatron's microbatch_group_size_per_vp_stage, the
// Llama 3 paper's N): the device orders of Megatron's own example, worked by hand from its schedule
// table and warm-up count, the chunks each device then holds, and the Llama 3.1 405B counts.
//
// Megatron (schedules.py): table entry k of "PP2 N3M5 with VP2" is
//   micro-batch 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1;
// forward step k runs entry k, backward step k entry k with chunk v-1-c; device d runs
// w = 2(P-d-1) + (v-1)N warm-up forwards, then (forward w+i, backward i) pairs, then the rest.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/pipeline_schedule.h"
#include "plan/task_graph.h"

namespace evsim {
namespace {

std::vector<StageTask> order(int device, int P, int v, int64_t m, int N) {
  return pipelineSchedule(Schedule::kInterleaved).deviceOrder(device, PipelineShape{P, v, m, N});
}

std::string text(const std::vector<StageTask>& tasks) {
  std::string out;
  for (const StageTask& t : tasks) {
    if (!out.empty()) out += ' ';
    out += (t.phase == Phase::kForward ? 'F' : 'B') + std::to_string(t.micro_batch) + "c" +
           std::to_string(t.chunk);
  }
  return out;
}

int inFlight(const std::vector<StageTask>& tasks, int v) {
  return peakActivations(tasks, std::vector<int64_t>(static_cast<size_t>(v), 1),
                         std::vector<int64_t>(static_cast<size_t>(v), 0))
      .in_flight;
}

TEST(MicrobatchGroup, MegatronsP2N3M5V2ExampleByHand) {
  // Device 0: w = 2*1 + 1*3 = 5 forwards (entries 0-4), then F(5..9) with B(0..4), then B(5..9).
  // Backward entries: (0,1) (1,1) (2,1) (0,0) (1,0) (2,0) (3,1) (4,1) (3,0) (4,0).
  const std::vector<StageTask> d0 = order(0, 2, 2, 5, 3);
  EXPECT_EQ(text(d0),
            "F0c0 F1c0 F2c0 F0c1 F1c1 "
            "F2c1 B0c1 F3c0 B1c1 F4c0 B2c1 F3c1 B0c0 F4c1 B1c0 "
            "B2c0 B3c1 B4c1 B3c0 B4c0");
  // Device 1: w = 0 + 3 = 3, then seven pairs, then B(7..9).
  const std::vector<StageTask> d1 = order(1, 2, 2, 5, 3);
  EXPECT_EQ(text(d1),
            "F0c0 F1c0 F2c0 "
            "F0c1 B0c1 F1c1 B1c1 F2c1 B2c1 F3c0 B0c0 F4c0 B1c0 F3c1 B2c0 F4c1 B3c1 "
            "B4c1 B3c0 B4c0");
  // Held chunk activations: w + 1 at the first pair's forward.
  EXPECT_EQ(inFlight(d0, 2), 6);
  EXPECT_EQ(inFlight(d1, 2), 4);
}

TEST(MicrobatchGroup, DefaultIsP) {
  // N = 0 and N = P give the same orders (today's interleaved schedule).
  for (int d = 0; d < 4; ++d) EXPECT_EQ(text(order(d, 4, 3, 8, 0)), text(order(d, 4, 3, 8, 4)));
}

TEST(MicrobatchGroup, LargerGroupHoldsMoreChunksAndTheGraphRuns) {
  // P = 4, v = 2, m = 8: device d holds 2(P-d-1) + (v-1)N + 1 chunks (capped at m*v = 16).
  for (int N : {4, 8}) {
    const TaskGraph graph = buildTaskGraph(Schedule::kInterleaved, 4, 2, 8, N);  // no deadlock
    EXPECT_EQ(graph.nodes.size(), size_t{4 * 2 * 2 * 8}) << "N=" << N;
    for (int d = 0; d < 4; ++d) {
      EXPECT_EQ(inFlight(order(d, 4, 2, 8, N), 2), std::min(2 * (4 - d - 1) + N + 1, 16))
          << "N=" << N << " device " << d;
    }
  }
}

TEST(MicrobatchGroup, Llama405bInFlight) {
  // Meta's plan at 8,192 GPUs: P = 16, v = 8, m = 2048 / 64 = 32. Device 1 (eight one-block
  // chunks): 2*14 + 7N + 1 chunks = 141 at N = 16 (Megatron's default and least), 253 of its 256
  // at N = 32 (breadth-first); at 16,384 GPUs (m = 16, N = 16) every one of its 16 x 8 = 128
  // forwards comes before a backward.
  EXPECT_EQ(inFlight(order(1, 16, 8, 32, 16), 8), 141);
  EXPECT_EQ(inFlight(order(1, 16, 8, 32, 32), 8), 253);
  EXPECT_EQ(inFlight(order(1, 16, 8, 16, 16), 8), 128);
}

}  // namespace
}  // namespace evsim

// The GPU-free logic of eventrun's CUDA executor: CUDA event times to host times
// (runner/eventrun_backend_timing.h) and the P2P pairing that keeps rendezvous send/receive from
// deadlocking (runner/eventrun_backend_p2p.h), against numbers and orders worked out by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "runner/eventrun_backend_p2p.h"
#include "runner/eventrun_backend_timing.h"
#include "support/test_support.h"

namespace evsim {
namespace {

TEST(EventrunGpuTiming, ResolvesAgainstTheReferenceMidpoint) {
  // The reference completed between 1000 and 1006 us: taken at 1003, error 3 + 0.5 us.
  ReferenceWindow window{1000, 1006};
  std::vector<GpuElapsed> elapsed{{0.010, 0.250}, {99, -99}, {0.25, 0.25}, {1.5, 2.0}};
  std::vector<bool> recorded{true, false, true, true};
  ResolvedTimes r = resolveGpuTimes(window, elapsed, recorded);
  ASSERT_EQ(r.times.size(), 4u);
  EXPECT_DOUBLE_EQ(r.error_us, 3.5);
  EXPECT_NEAR(r.times[0].start_us, 1013, 1e-9);
  EXPECT_NEAR(r.times[0].end_us, 1253, 1e-9);
  EXPECT_EQ(r.times[1].start_us, 0);  // not recorded: left 0, its elapsed times never read
  EXPECT_EQ(r.times[1].end_us, 0);
  EXPECT_NEAR(r.times[2].start_us, 1253, 1e-9);  // a zero-length action stays zero-length
  EXPECT_NEAR(r.times[2].end_us, 1253, 1e-9);
  EXPECT_NEAR(r.times[3].start_us, 2503, 1e-9);
  EXPECT_NEAR(r.times[3].end_us, 3003, 1e-9);
}

TEST(EventrunGpuTiming, RejectsImpossibleTimes) {
  std::vector<bool> one{true};
  EXPECT_THROW(resolveGpuTimes({10, 5}, {{0, 1}}, one), Error);         // reversed window
  EXPECT_THROW(resolveGpuTimes({0, 2}, {{0.5, 0.4}}, one), Error);      // ends 100 us early
  EXPECT_THROW(resolveGpuTimes({0, 2}, {{-0.01, 0.4}}, one), Error);    // 10 us before ref
  EXPECT_NO_THROW(resolveGpuTimes({0, 2}, {{-0.0004, 0.4}}, one));      // within 0.5 us
  EXPECT_THROW(resolveGpuTimes({0, 2}, {{0, 1}, {0, 1}}, one), Error);  // sizes differ
}

std::vector<RankProgram> programsOf(const std::string& strategy, int64_t global_batch,
                                    Schedule schedule, int virtual_stages = 1,
                                    bool dp_overlap = false) {
  Strategy s;
  parseStrategyText(strategy, s);
  s.micro_batch = 1;
  s.global_batch = global_batch;
  s.schedule = schedule;
  s.virtual_stages = virtual_stages;
  s.dp_overlap = dp_overlap;
  if (dp_overlap) s.dp_bucket_bytes = 1;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp32"),
                                          test::cluster(4, 2, test::kSlowLinks), s);
  std::vector<RankProgram> programs;
  for (int64_t r = 0; r < s.gpus(); ++r) programs.push_back(buildRankProgram(plan, r));
  return programs;
}

// A fused pair as "send<mb>+recv<mb>" (the send's and the receive's micro-batches).
std::vector<std::string> pairs(const RankProgram& p, const std::vector<size_t>& fused) {
  std::vector<std::string> out;
  for (size_t i : fused) {
    EXPECT_EQ(p.actions[i].kind, ActionKind::kSend);
    EXPECT_EQ(p.actions[i + 1].kind, ActionKind::kRecv);
    out.push_back("send" + std::to_string(p.actions[i].micro_batch) + "+recv" +
                  std::to_string(p.actions[i + 1].micro_batch));
  }
  return out;
}

using Pairs = std::vector<std::string>;

TEST(EventrunP2P, GpipeNeedsNoPairs) {
  // Stage 0 sends a0 a1 then receives g0 g1 (or g1 g0); stage 1 receives a0 a1 then sends: every
  // send meets a receive that is already waiting.
  std::vector<RankProgram> programs = programsOf("1M2P1D", 2, Schedule::kGpipe);
  EXPECT_FALSE(simulateP2P(programs, {}).stalled());
  std::vector<std::vector<size_t>> fused = fuseP2P(programs);
  EXPECT_TRUE(fused[0].empty());
  EXPECT_TRUE(fused[1].empty());
}

TEST(EventrunP2P, DappleSteadyStatePairsEverySendWithTheNextReceive) {
  // m = 3. Stage 0: F0 send0 F1 send1 | recv0 B0 F2 send2 | recv1 B1 recv2 B2.
  //        Stage 1: recv0 F0 B0 send0 | recv1 F1 B1 send1 | recv2 F2 B2 send2.
  // Unfused, a0 moves, then stage 0 sends a1 while stage 1 sends g0: both wait.
  std::vector<RankProgram> programs = programsOf("1M2P1D", 3, Schedule::kDapple);
  P2PStall stall = simulateP2P(programs, {});
  ASSERT_EQ(stall.ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(programs[0].actions[stall.actions[0]].kind, ActionKind::kSend);
  EXPECT_EQ(programs[0].actions[stall.actions[0]].micro_batch, 1);
  EXPECT_EQ(programs[1].actions[stall.actions[1]].kind, ActionKind::kSend);
  EXPECT_EQ(programs[1].actions[stall.actions[1]].micro_batch, 0);
  // Fused as Megatron's send_forward_recv_backward / send_backward_recv_forward: m - 1 per stage.
  std::vector<std::vector<size_t>> fused = fuseP2P(programs);
  EXPECT_EQ(pairs(programs[0], fused[0]), (Pairs{"send1+recv0", "send2+recv1"}));
  EXPECT_EQ(pairs(programs[1], fused[1]), (Pairs{"send0+recv1", "send1+recv2"}));
  EXPECT_FALSE(simulateP2P(programs, fused).stalled());
}

TEST(EventrunP2P, DeeperPipelinesAndDpOverlapEndDeadlockFree) {
  struct Case {
    const char* strategy;
    int64_t global_batch;
    Schedule schedule;
    int v;
    bool overlap;
  };
  for (const Case& c : {Case{"1M4P1D", 8, Schedule::kDapple, 1, false},
                        Case{"1M4P1D", 8, Schedule::kGpipe, 1, false},
                        Case{"2M2P2D", 8, Schedule::kDapple, 1, true},
                        // ZB-H1 (W tasks, which take no input, may lie between a send and the
                        // next receive).
                        Case{"1M4P1D", 8, Schedule::kZbh1, 1, false},
                        Case{"2M2P2D", 8, Schedule::kZbh1, 1, true}}) {
    SCOPED_TRACE(std::string(c.strategy) + " v=" + std::to_string(c.v));
    std::vector<RankProgram> programs =
        programsOf(c.strategy, c.global_batch, c.schedule, c.v, c.overlap);
    std::vector<std::vector<size_t>> fused = fuseP2P(programs);
    P2PStall stall = simulateP2P(programs, fused);
    EXPECT_FALSE(stall.stalled()) << stall.describe(programs);
  }
}

Action p2p(ActionKind kind, int64_t peer, int tag) {
  Action a;
  a.kind = kind;
  a.peer = peer;
  a.tag = tag;
  a.name = kind == ActionKind::kSend ? "send_activation" : "recv";
  return a;
}

Action plain(ActionKind kind) {
  Action a;
  a.kind = kind;
  a.group = 0;
  a.name = "op";
  return a;
}

// ZB-V sends both ways between the same two devices too (activations down on chunk 0 while
// gradients come back on chunk 1), in an order the two sides do not issue alike: the CUDA
// executor's in-order pairing refuses it; the CPU executor (tag matching) runs it
// (profiler.eventrun_e2e_zbv).
TEST(EventrunP2P, ZbVIsRefusedByTheInOrderPairing) {
  std::vector<RankProgram> programs = programsOf("1M2P1D", 8, Schedule::kZbv);
  EXPECT_THROW(fuseP2P(programs), Error);
}

TEST(EventrunP2P, InterleavedIsReportedAsDeadlocking) {
  // Interleaved 1F1B sends both ways between the same two devices; sends fused with their next
  // receive still leave a cycle (found by the simulation), so the CUDA executor refuses it.
  std::vector<RankProgram> programs = programsOf("1M2P1D", 8, Schedule::kInterleaved, 2);
  EXPECT_THROW(fuseP2P(programs), Error);
}

// ZB-H2 at P = 4 keeps a cycle after fusing (its longer warm-up: stage 0 sends activation 3 while
// stage 1 sends activation 3 on and stages 2 and 3 send gradients back, each stage's receive
// behind its send): the CUDA executor refuses it with one line, as interleaved; the CPU executor
// runs it. At P = 2 it fuses.
TEST(EventrunP2P, ZeroBubbleH2AtFourStagesIsReportedAsDeadlocking) {
  std::vector<RankProgram> two = programsOf("1M2P1D", 4, Schedule::kZbh2);
  EXPECT_FALSE(simulateP2P(two, fuseP2P(two)).stalled());
  std::vector<RankProgram> programs = programsOf("1M4P1D", 8, Schedule::kZbh2);
  EXPECT_THROW(fuseP2P(programs), Error);
}

TEST(EventrunP2P, FusesAcrossComputeAndReportsWhatItCannotFix) {
  // Both ranks send first, then compute, then receive: each send is fused with the receive two
  // actions later, and both transfers move.
  std::vector<RankProgram> programs(2);
  for (int64_t r = 0; r < 2; ++r) {
    programs[r].rank = r;
    programs[r].groups = {{0, 1}};
    programs[r].actions = {p2p(ActionKind::kSend, 1 - r, static_cast<int>(r)),
                           plain(ActionKind::kCompute),
                           p2p(ActionKind::kRecv, 1 - r, static_cast<int>(1 - r))};
  }
  EXPECT_TRUE(simulateP2P(programs, {}).stalled());
  EXPECT_EQ(fuseP2P(programs), (std::vector<std::vector<size_t>>{{0}, {0}}));
  // A collective every member reaches completes; one that a member reaches only after a
  // receive whose send comes after the collective does not, and no fusing can help.
  programs[0].actions = {plain(ActionKind::kCollective), p2p(ActionKind::kSend, 1, 0)};
  programs[1].actions = {p2p(ActionKind::kRecv, 0, 0), plain(ActionKind::kCollective)};
  P2PStall stall = simulateP2P(programs, {});
  EXPECT_EQ(stall.ranks, (std::vector<int64_t>{0, 1}));
  try {
    fuseP2P(programs);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 at action 0 (op), rank 1 at action 0 (recv from "
                                         "rank 0, micro-batch -1)"),
              std::string::npos)
        << e.what();
  }
  programs[1].actions = {plain(ActionKind::kCollective), p2p(ActionKind::kRecv, 0, 0)};
  EXPECT_FALSE(simulateP2P(programs, {}).stalled());
  // Buckets never block their issuer, but the wait needs every member's bucket.
  programs[0].actions = {plain(ActionKind::kBucketStart), plain(ActionKind::kBucketWait),
                         p2p(ActionKind::kSend, 1, 0)};
  programs[1].actions = {p2p(ActionKind::kRecv, 0, 0), plain(ActionKind::kBucketStart),
                         plain(ActionKind::kBucketWait)};
  EXPECT_TRUE(simulateP2P(programs, {}).stalled());
  programs[1].actions = {plain(ActionKind::kBucketStart), p2p(ActionKind::kRecv, 0, 0),
                         plain(ActionKind::kBucketWait)};
  EXPECT_FALSE(simulateP2P(programs, {}).stalled());
}

}  // namespace
}  // namespace evsim

// eventrun's rank programs (profiler/eventrun_program.h) against action sequences worked out by
// hand, and against the simulator's per-rank event expansion (modeler/device_events.cpp).
//
// Model: a GPT with 4 decoder blocks (h 64, 4 heads, f 256, s 32, vocab 512). Op counts per
// micro-batch (events/layer_ops.h), with M = 1 (no TP all-reduces):
//   block forward 15, block backward 21, embedding forward 3 / backward 2,
//   head forward 3 (final_layernorm, lm_head_gemm, cross_entropy), head backward 4.
// With M = 2 the TP all-reduces add 2 per block forward and backward, 1 to the embedding forward,
// 3 to the head forward and 1 to the head backward (block 17 / 23, embedding 4 / 2, head 6 / 5).
// P = 2 splits the blocks 2 / 2 (asserted below), so per micro-batch:
//   M = 1: stage 0 F = 3 + 2*15 = 33, B = 2*21 + 2 = 44;  stage 1 F = 2*15 + 3 = 33, B = 4 + 2*21 =
//   46 M = 2: stage 0 F = 38 (TP 5), B = 48 (TP 4);           stage 1 F = 40 (TP 7), B = 51 (TP 5)
#include "profiler/eventrun_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "events/cluster_config.h"
#include "events/model_config.h"
#include "modeler/device_events.h"
#include "modeler/simulation.h"
#include "profiler/eventrun_report.h"

namespace evsim {
namespace {

const char* kModelYaml = R"(
name: eventrun-test-gpt
dtype: fp32
hidden_size: 64
num_heads: 4
ffn_hidden_size: 256
seq_length: 32
vocab_size: 512
layers:
  - {type: embedding}
  - {type: decoder, count: 4, cross_attention: false}
  - {type: head}
)";

const char* kClusterYaml = R"(
name: eventrun-test-cluster
nodes: 2
node:
  gpus: 4
  device:
    name: test-gpu
    peak_tflops: {fp16: 100, bf16: 100, fp32: 20}
    memory_bandwidth_gb_s: 1000
    memory_gib: 40
  intra_link: {name: test-link, bandwidth_gb_s: 100, latency_us: 2}
network: {name: test-net, bandwidth_gb_s: 10, latency_us: 5}
)";

IterationPlan makePlan(const std::string& strategy, int64_t micro_batch, int64_t global_batch,
                       Schedule schedule, bool dp_overlap = false) {
  Strategy s;
  parseStrategyText(strategy, s);
  s.micro_batch = micro_batch;
  s.global_batch = global_batch;
  s.schedule = schedule;
  s.dp_overlap = dp_overlap;
  if (dp_overlap) s.dp_bucket_bytes = 1;  // every layer closes a bucket
  return buildIterationPlan(parseModelConfig(kModelYaml, "test.yaml"),
                            parseClusterConfig(kClusterYaml, "test.yaml"), s);
}

// The program as runs of tokens: "recv0" (activation/gradient for micro-batch 0), "F0x33" (33
// ops of forward 0), "send1", "allreduce", "adam".
std::vector<std::string> shape(const RankProgram& p) {
  std::vector<std::string> out;
  std::string last;
  int run = 0;
  auto flush = [&] {
    if (run > 0) out.push_back(last + "x" + std::to_string(run));
    run = 0;
  };
  for (const Action& a : p.actions) {
    if (a.phase == Phase::kForward || a.phase == Phase::kBackward) {
      if (a.kind == ActionKind::kRecv || a.kind == ActionKind::kSend) {
        flush();
        out.push_back(std::string(a.kind == ActionKind::kRecv ? "recv" : "send") +
                      std::to_string(a.micro_batch));
        continue;
      }
      std::string token = (a.phase == Phase::kForward ? "F" : "B") + std::to_string(a.micro_batch);
      if (token != last) flush();
      last = token;
      ++run;
      continue;
    }
    flush();
    last.clear();
    out.push_back(a.kind == ActionKind::kCompute ? std::string(a.name) : "allreduce");
  }
  flush();
  return out;
}

using Tokens = std::vector<std::string>;

TEST(EventrunProgram, OneByTwoByOneGpipeByHand) {
  IterationPlan plan = makePlan("1M2P1D", 1, 2, Schedule::kGpipe);  // m = 2
  ASSERT_EQ(plan.stages[0].num_layers, 2);
  RankProgram s0 = buildRankProgram(plan, 0);
  EXPECT_EQ(shape(s0), (Tokens{"F0x33", "send0", "F1x33", "send1", "recv0", "B0x44", "recv1",
                               "B1x44", "adam_step"}));
  // 2 * (33 + 44) ops + 2 sends + adam; the 2 receives are idle time, not events.
  EXPECT_EQ(s0.actions.size(), 159u);
  EXPECT_EQ(s0.recordedCount(), 157);
  RankProgram s1 = buildRankProgram(plan, 1);
  EXPECT_EQ(shape(s1), (Tokens{"recv0", "F0x33", "recv1", "F1x33", "B0x46", "send0", "B1x46",
                               "send1", "adam_step"}));
  EXPECT_EQ(s1.recordedCount(), 2 * (33 + 46) + 2 + 1);
  EXPECT_TRUE(s0.groups.empty());  // M = D = 1: no collectives
  for (const Action& a : s0.actions) {
    if (a.kind == ActionKind::kSend) {
      EXPECT_EQ(a.peer, 1);
      EXPECT_EQ(a.name, "send_activation");
      EXPECT_EQ(a.tag, 2 * a.micro_batch);
      // b * s * h * 4 bytes of fp32 activation.
      EXPECT_EQ(plan.events[a.event].event.message_bytes, 1 * 32 * 64 * 4);
    }
    if (a.kind == ActionKind::kRecv) {
      EXPECT_EQ(a.tag, 2 * a.micro_batch + 1);
    }
  }
}

TEST(EventrunProgram, OneByTwoByOneDappleLastStageAlternates) {
  IterationPlan plan = makePlan("1M2P1D", 1, 2, Schedule::kDapple);
  // Stage 1 of 2 has no warm-up forwards: F0 B0 F1 B1; stage 0 warms up with one: F0 F1 B0 B1.
  EXPECT_EQ(shape(buildRankProgram(plan, 1)), (Tokens{"recv0", "F0x33", "B0x46", "send0", "recv1",
                                                      "F1x33", "B1x46", "send1", "adam_step"}));
  EXPECT_EQ(shape(buildRankProgram(plan, 0)), (Tokens{"F0x33", "send0", "F1x33", "send1", "recv0",
                                                      "B0x44", "recv1", "B1x44", "adam_step"}));
}

TEST(EventrunProgram, TwoByTwoByTwoGroupsPeersAndCounts) {
  IterationPlan plan = makePlan("2M2P2D", 1, 4, Schedule::kGpipe);  // m = 4 / (1 * 2) = 2
  // rank = tp + 2 * (dp + 2 * pp): rank 0 = (0,0,0), rank 5 = (tp1, dp0, pp1).
  RankProgram r0 = buildRankProgram(plan, 0);
  EXPECT_EQ(shape(r0), (Tokens{"F0x38", "send0", "F1x38", "send1", "recv0", "B0x48", "recv1",
                               "B1x48", "allreduce", "adam_step"}));
  EXPECT_EQ(r0.recordedCount(), 2 * (38 + 48) + 2 + 1 + 1);                   // 176
  EXPECT_EQ(r0.groups, (std::vector<std::vector<int64_t>>{{0, 1}, {0, 2}}));  // TP, DP
  int tp_collectives = 0;
  for (const Action& a : r0.actions) {
    if (a.kind == ActionKind::kSend || a.kind == ActionKind::kRecv) {
      EXPECT_EQ(a.peer, 4);
    }
    if (a.kind == ActionKind::kCollective && a.stream == Stream::kTpComm) {
      ++tp_collectives;
      EXPECT_EQ(r0.groups[a.group], (std::vector<int64_t>{0, 1}));
    }
    if (a.name == "grad_allreduce") {
      EXPECT_EQ(r0.groups[a.group], (std::vector<int64_t>{0, 2}));
    }
  }
  EXPECT_EQ(tp_collectives, 2 * (5 + 4));
  RankProgram r5 = buildRankProgram(plan, 5);
  EXPECT_EQ(shape(r5), (Tokens{"recv0", "F0x40", "recv1", "F1x40", "B0x51", "send0", "B1x51",
                               "send1", "allreduce", "adam_step"}));
  EXPECT_EQ(r5.recordedCount(), 2 * (40 + 51) + 2 + 1 + 1);  // 186
  EXPECT_EQ(r5.groups, (std::vector<std::vector<int64_t>>{{4, 5}, {5, 7}}));
  for (const Action& a : r5.actions) {
    if (a.kind == ActionKind::kSend || a.kind == ActionKind::kRecv) {
      EXPECT_EQ(a.peer, 1);
    }
  }
}

TEST(EventrunProgram, OverlappedBucketsAreIssuedInTheLastBackward) {
  IterationPlan plan = makePlan("1M1P2D", 1, 4, Schedule::kGpipe, /*dp_overlap=*/true);  // m = 2
  const StagePlan& stage = plan.stages[0];
  // One bucket per layer: embedding, 4 blocks, head.
  ASSERT_EQ(stage.dp_buckets.size(), 6u);
  RankProgram p = buildRankProgram(plan, 0);
  const size_t forward = stage.forward.size(), backward = stage.backward.size();
  // F0 F1 B0 B1 (B1 with 6 bucket starts), the wait, adam.
  EXPECT_EQ(p.actions.size(), 2 * (forward + backward) + 6 + 1 + 1);
  int seen_backward_ops_of_last = 0, buckets = 0;
  for (const Action& a : p.actions) {
    if (a.phase == Phase::kBackward && a.micro_batch == 1) ++seen_backward_ops_of_last;
    if (a.kind == ActionKind::kBucketStart) {
      // Issued right after the op that completes it.
      EXPECT_EQ(seen_backward_ops_of_last, stage.dp_buckets[buckets].ready_after_op + 1);
      ++buckets;
    }
  }
  EXPECT_EQ(buckets, 6);
  EXPECT_EQ(p.actions[p.actions.size() - 2].kind, ActionKind::kBucketWait);
}

// (stream, phase, micro_batch, layer, op), sorted: the multiset eventsim compare matches on.
using Key = std::tuple<int, int, int, int, std::string>;

std::vector<Key> simulatedKeys(const IterationPlan& plan, int64_t rank) {
  std::vector<EventCost> costs(static_cast<size_t>(plan.events.size()),
                               EventCost{1.0, Provenance::kMeasured});
  static std::vector<Simulation> keep;  // forEachDeviceEvent's names point into the plan
  keep.push_back(simulate(plan, costs));
  std::vector<Key> keys;
  forEachDeviceEvent(keep.back(), rank, [&](const DeviceEvent& e) {
    keys.emplace_back(static_cast<int>(e.stream), static_cast<int>(e.phase), e.micro_batch, e.layer,
                      std::string(e.name));
  });
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<Key> programKeys(const RankProgram& p) {
  std::vector<Key> keys;
  for (const Action& a : p.actions) {
    if (!a.recorded()) continue;
    keys.emplace_back(static_cast<int>(a.stream), static_cast<int>(a.phase), a.micro_batch, a.layer,
                      std::string(a.name));
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(EventrunProgram, SameEventsAsTheSimulatorOnEveryRank) {
  struct Case {
    const char* strategy;
    int64_t b, B;
    bool overlap;
  };
  for (Case c :
       {Case{"1M2P1D", 1, 4, false}, Case{"2M1P1D", 1, 4, false}, Case{"1M1P2D", 1, 4, false},
        Case{"1M2P2D", 1, 8, false}, Case{"1M1P2D", 1, 4, true}, Case{"2M2P2D", 2, 8, false}}) {
    for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple}) {
      IterationPlan plan = makePlan(c.strategy, c.b, c.B, schedule, c.overlap);
      for (int64_t r = 0; r < plan.strategy.gpus(); ++r) {
        SCOPED_TRACE(std::string(c.strategy) + " " + std::string(scheduleName(schedule)) +
                     " rank " + std::to_string(r));
        std::vector<Key> program = programKeys(buildRankProgram(plan, r));
        EXPECT_FALSE(program.empty());
        EXPECT_EQ(program, simulatedKeys(plan, r));
      }
    }
  }
}

// --- report: medians of the timed iterations on rank 0's clock -----------------------------------

TEST(EventrunReport, MediansSkipWarmupAndAlignClocks) {
  IterationPlan plan = makePlan("1M2P1D", 1, 2, Schedule::kGpipe);
  RankProgram p = buildRankProgram(plan, 1);  // starts with a receive (not recorded)
  // 4 iterations; this rank's clock runs 100 us ahead of rank 0's; iteration i starts at
  // 1000 * i on rank 0's clock. The first recorded action (index 1) starts 10, 30, 20 us and ends
  // 15, 35, 70 us into the timed iterations (medians 20 and 35); the warm-up's 999 is ignored.
  std::vector<std::vector<ActionTime>> it(4, std::vector<ActionTime>(p.actions.size()));
  std::vector<double> start = {0, 1000, 2000, 3000};
  const double starts[4] = {999, 10, 30, 20}, ends[4] = {999, 15, 35, 70};
  for (int i = 0; i < 4; ++i) {
    it[i][1] = ActionTime{start[i] + starts[i] + 100, start[i] + ends[i] + 100};
  }
  std::vector<MeasuredSpan> spans = medianSpans(p, it, start, /*offset_us=*/100);
  ASSERT_EQ(static_cast<int>(spans.size()), p.recordedCount());
  EXPECT_DOUBLE_EQ(spans[0].start_us, 20);  // median of 10, 30, 20: warm-up's 999 ignored
  EXPECT_DOUBLE_EQ(spans[0].end_us, 35);    // median of 15, 35, 70
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_THROW(medianSpans(p, {it[0]}, {0}, 0), Error);
}

}  // namespace
}  // namespace evsim

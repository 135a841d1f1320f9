// eventrun's rank programs (runner/eventrun_program.h) against action sequences worked out by
// hand, and against the simulator's per-rank event expansion (modeler/device_events.cpp).
//
// Model: a GPT with 4 decoder blocks (h 64, 4 heads, f 256, s 32, vocab 512). Op counts per
// micro-batch (ops/layer_ops.h), with M = 1 (no TP all-reduces):
//   block forward 15, block backward 21, embedding forward 3 / backward 2,
//   head forward 3 (final_layernorm, lm_head_gemm, cross_entropy), head backward 4.
// With M = 2 the TP all-reduces add 2 per block forward and backward, 1 to the embedding forward,
// 3 to the head forward and 1 to the head backward (block 17 / 23, embedding 4 / 2, head 6 / 5).
// P = 2 splits the blocks 2 / 2 (asserted below), so per micro-batch:
//   M = 1: stage 0 F = 3 + 2*15 = 33, B = 2*21 + 2 = 44;  stage 1 F = 2*15 + 3 = 33, B = 4 + 2*21 =
//   46 M = 2: stage 0 F = 38 (TP 5), B = 48 (TP 4);           stage 1 F = 40 (TP 7), B = 51 (TP 5)
#include "runner/eventrun_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/device_events.h"
#include "modeler/simulation.h"
#include "runner/eventrun_report.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// The issue-6 techniques of a plan (defaults: none).
struct Techniques {
  int virtual_stages = 1;  // > 1 selects the interleaved schedule
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  int zero = 0;
};

IterationPlan makePlan(const std::string& strategy, int64_t micro_batch, int64_t global_batch,
                       Schedule schedule, bool dp_overlap = false, Techniques t = {}) {
  Strategy s;
  parseStrategyText(strategy, s);
  s.micro_batch = micro_batch;
  s.global_batch = global_batch;
  s.schedule = t.virtual_stages > 1 ? Schedule::kInterleaved : schedule;
  s.virtual_stages = t.virtual_stages;
  s.recompute = t.recompute;
  s.sequence_parallel = t.sequence_parallel;
  s.zero_stage = t.zero;
  s.dp_overlap = dp_overlap;
  if (dp_overlap) s.dp_bucket_bytes = 1;  // every layer closes a bucket
  return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp32"),
                            test::cluster(4, 2, test::kSlowLinks), s);
}

// The program as runs of tokens: "recv0" (activation/gradient for micro-batch 0), "F0x33" (33
// ops of forward 0), "send1", and outside tasks the op names ("grad_allreduce", "adam_step").
// Chunks other than 0 add ".c": "F0.1x15" is forward 0 of chunk 1, "send0.1" its send; recomputed
// ops are "R" runs.
std::vector<std::string> shape(const RankProgram& p) {
  std::vector<std::string> out;
  std::string last;
  int run = 0;
  auto flush = [&] {
    if (run > 0) out.push_back(last + "x" + std::to_string(run));
    run = 0;
  };
  auto chunkSuffix = [](const Action& a) {
    return a.chunk == 0 ? std::string() : "." + std::to_string(a.chunk);
  };
  for (const Action& a : p.actions) {
    const bool in_task = a.phase == Phase::kForward || a.phase == Phase::kBackward ||
                         a.phase == Phase::kRecompute || a.phase == Phase::kWeightGrad;
    if (in_task && (a.kind == ActionKind::kRecv || a.kind == ActionKind::kSend)) {
      flush();
      out.push_back(std::string(a.kind == ActionKind::kRecv ? "recv" : "send") +
                    std::to_string(a.micro_batch) + chunkSuffix(a));
      continue;
    }
    if (in_task) {
      const char* letter = a.phase == Phase::kForward      ? "F"
                           : a.phase == Phase::kBackward   ? "B"
                           : a.phase == Phase::kWeightGrad ? "W"
                                                           : "R";
      std::string token = letter + std::to_string(a.micro_batch) + chunkSuffix(a);
      if (token != last) flush();
      last = token;
      ++run;
      continue;
    }
    flush();
    last.clear();
    out.push_back(std::string(a.name));
  }
  flush();
  return out;
}

using Tokens = std::vector<std::string>;

TEST(EventrunProgram, RingPeersWrapAroundTheGroup) {
  // Group {4, 6, 8}: rank 4 is position 0 (sends to 6, position 1; receives from 8, position 2),
  // rank 8 is position 2 (sends to 4, position 0; receives from 6, position 1).
  RankProgram p;
  p.groups = {{0, 1}, {4, 6, 8}};
  p.rank = 4;
  EXPECT_EQ(ringPeers(p, 1).next, 1);
  EXPECT_EQ(ringPeers(p, 1).previous, 2);
  p.rank = 8;
  EXPECT_EQ(ringPeers(p, 1).next, 0);
  EXPECT_EQ(ringPeers(p, 1).previous, 1);
  EXPECT_THROW(ringPeers(p, 0), Error);  // not a member
}

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

// ZB-H1, m = 2 (zb_h1.cpp): stage 0 runs F0 F1 B0 W0 B1 W1, stage 1 F0 B0 F1 B1 W0 W1. Stage 0's
// backward (44 ops) splits into B 36 and W 8 (qkv, proj, fc1, fc2 wgrads of its 2 blocks); stage
// 1's 46 into 37 and 9 (its blocks' 8 and the LM head's). W receives and sends nothing.
TEST(EventrunProgram, ZeroBubbleH1TwoStagesByHand) {
  IterationPlan plan = makePlan("1M2P1D", 1, 2, Schedule::kZbh1);
  EXPECT_EQ(shape(buildRankProgram(plan, 0)),
            (Tokens{"F0x33", "send0", "F1x33", "send1", "recv0", "B0x36", "W0x8", "recv1", "B1x36",
                    "W1x8", "adam_step"}));
  EXPECT_EQ(shape(buildRankProgram(plan, 1)),
            (Tokens{"recv0", "F0x33", "B0x37", "send0", "recv1", "F1x33", "B1x37", "send1", "W0x9",
                    "W1x9", "adam_step"}));
}

TEST(EventrunProgram, TwoByTwoByTwoGroupsPeersAndCounts) {
  IterationPlan plan = makePlan("2M2P2D", 1, 4, Schedule::kGpipe);  // m = 4 / (1 * 2) = 2
  // rank = tp + 2 * (dp + 2 * pp): rank 0 = (0,0,0), rank 5 = (tp1, dp0, pp1).
  RankProgram r0 = buildRankProgram(plan, 0);
  EXPECT_EQ(shape(r0), (Tokens{"F0x38", "send0", "F1x38", "send1", "recv0", "B0x48", "recv1",
                               "B1x48", "grad_allreduce", "adam_step"}));
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
                               "send1", "grad_allreduce", "adam_step"}));
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

// Interleaved 1F1B, P = 2, v = 2, m = 2: the 4 blocks become 4 chunks of one block; virtual stage
// k runs block k on device k % 2 (k = 0 with the embedding, k = 3 with the head). Op counts:
// k0 F 3 + 15 = 18, B 21 + 2 = 23; k1 and k2 F 15, B 21; k3 F 15 + 3 = 18, B 4 + 21 = 25.
// Warm-up forwards (schedule.h): device 0 min(2 + 2, 4) = 4, device 1 min(0 + 2, 4) = 2. Forward
// micro-step j runs micro-batch j % 2 of chunk j / 2, backward micro-step j micro-batch j % 2 of
// chunk 1 - j / 2. Tags 2 * (boundary * m + mb) + direction:
//   device 0 sends activations over boundaries 0 and 2 (tags 0 2 | 8 10), gradients over 1 (5 7);
//   device 1 sends activations over boundary 1 (4 6), gradients over 2 (9 11) and 0 (1 3).
TEST(EventrunProgram, InterleavedTwoStagesTwoChunksByHand) {
  IterationPlan plan =
      makePlan("1M2P1D", 1, 2, Schedule::kInterleaved, false, {.virtual_stages = 2});
  ASSERT_EQ(plan.virtualStages(), 4);
  for (int k = 0; k < 4; ++k) {
    ASSERT_EQ(plan.stages[k].first_layer, k);
    ASSERT_EQ(plan.stages[k].num_layers, 1);
  }
  RankProgram d0 = buildRankProgram(plan, 0);
  EXPECT_EQ(shape(d0), (Tokens{"F0x18",   "send0",   "F1x18",     "send1",    "recv0.1", "F0.1x15",
                               "send0.1", "recv1.1", "F1.1x15",   "send1.1",  "recv0.1", "B0.1x21",
                               "send0.1", "recv1.1", "B1.1x21",   "send1.1",  "recv0",   "B0x23",
                               "recv1",   "B1x23",   "adam_step", "adam_step"}));
  RankProgram d1 = buildRankProgram(plan, 1);
  EXPECT_EQ(shape(d1), (Tokens{"recv0",   "F0x15",   "send0",     "recv1",    "F1x15",   "send1",
                               "recv0.1", "F0.1x18", "B0.1x25",   "send0.1",  "recv1.1", "F1.1x18",
                               "B1.1x25", "send1.1", "recv0",     "B0x21",    "send0",   "recv1",
                               "B1x21",   "send1",   "adam_step", "adam_step"}));
  auto tags = [](const RankProgram& p, ActionKind kind) {
    std::vector<int> out;
    for (const Action& a : p.actions) {
      if (a.kind != kind) continue;
      out.push_back(a.tag);
      EXPECT_EQ(a.peer, 1 - p.rank);
    }
    return out;
  };
  EXPECT_EQ(tags(d0, ActionKind::kSend), (std::vector<int>{0, 2, 8, 10, 5, 7}));
  EXPECT_EQ(tags(d0, ActionKind::kRecv), (std::vector<int>{4, 6, 9, 11, 1, 3}));
  EXPECT_EQ(tags(d1, ActionKind::kSend), (std::vector<int>{4, 6, 9, 11, 1, 3}));
  EXPECT_EQ(tags(d1, ActionKind::kRecv), (std::vector<int>{0, 2, 8, 10, 5, 7}));
  EXPECT_EQ(p2pTagBound(plan), 12);
  // Each P2P action uses its boundary's event (boundary = tag / 4 with m = 2); every op of chunk c
  // on device d is block 2c + d (or the embedding / head); the optimizers run chunk 1 first.
  const PipelineClass& links = plan.pipelines[0];
  for (const RankProgram* p : {&d0, &d1}) {
    std::vector<int> optimizer_chunks;
    for (const Action& a : p->actions) {
      if (a.kind == ActionKind::kSend || a.kind == ActionKind::kRecv) {
        const int boundary = a.tag / 4;
        EXPECT_EQ(a.event,
                  a.tag % 2 == 0 ? links.forward_p2p[boundary] : links.backward_p2p[boundary]);
      } else if (a.phase == Phase::kOptimizer) {
        optimizer_chunks.push_back(a.chunk);
      } else if (a.layer != kEmbeddingLayer && a.layer != kHeadLayer) {
        EXPECT_EQ(a.layer, 2 * a.chunk + p->rank) << a.name;
      }
    }
    EXPECT_EQ(optimizer_chunks, (std::vector<int>{1, 0}));
  }
}

// Full recomputation re-runs each block's 15 forward ops at the start of its backward; selective
// only the attention core's 4 (scores, softmax, dropout, x V); 2 blocks per stage here.
TEST(EventrunProgram, RecomputedOpsRunInTheBackwardTask) {
  IterationPlan full =
      makePlan("1M2P1D", 1, 2, Schedule::kGpipe, false, {.recompute = Recompute::kFull});
  // Stage 0 backward: block 1, block 0, embedding (2); stage 1: head (4), block 3, block 2.
  EXPECT_EQ(shape(buildRankProgram(full, 0)),
            (Tokens{"F0x33", "send0", "F1x33", "send1", "recv0", "R0x15", "B0x21", "R0x15", "B0x23",
                    "recv1", "R1x15", "B1x21", "R1x15", "B1x23", "adam_step"}));
  EXPECT_EQ(shape(buildRankProgram(full, 1)),
            (Tokens{"recv0", "F0x33", "recv1", "F1x33", "B0x4", "R0x15", "B0x21", "R0x15", "B0x21",
                    "send0", "B1x4", "R1x15", "B1x21", "R1x15", "B1x21", "send1", "adam_step"}));
  IterationPlan plain = makePlan("1M2P1D", 1, 2, Schedule::kGpipe);
  IterationPlan selective =
      makePlan("1M2P1D", 1, 2, Schedule::kGpipe, false, {.recompute = Recompute::kSelective});
  for (int64_t r = 0; r < 2; ++r) {
    RankProgram p = buildRankProgram(selective, r);
    const auto recomputed = std::count_if(p.actions.begin(), p.actions.end(), [](const Action& a) {
      return a.phase == Phase::kRecompute;
    });
    EXPECT_EQ(recomputed, 2 * 2 * 4);  // micro-batches x blocks x attention-core ops
    EXPECT_EQ(p.recordedCount(), buildRankProgram(plain, r).recordedCount() + 2 * 2 * 4);
  }
}

// ZeRO-1: reduce-scatter, optimizer on the shard, parameter all-gather; with --dp-overlap the
// buckets are reduce-scatters. ZeRO-3: per part (embedding, 4 blocks, head) one all-gather before
// the forward, one before the backward and one reduce-scatter after it; no final collectives.
TEST(EventrunProgram, ZeroGradientSyncAndParameterGathers) {
  IterationPlan z1 = makePlan("1M1P2D", 1, 4, Schedule::kGpipe, false, {.zero = 1});  // m = 2
  Tokens tail = shape(buildRankProgram(z1, 0));
  tail.erase(tail.begin(), tail.end() - 3);
  EXPECT_EQ(tail, (Tokens{"grad_reduce_scatter", "adam_step", "param_allgather"}));
  IterationPlan z1o = makePlan("1M1P2D", 1, 4, Schedule::kGpipe, true, {.zero = 1});
  RankProgram p = buildRankProgram(z1o, 1);
  int buckets = 0;
  for (const Action& a : p.actions) {
    if (a.kind != ActionKind::kBucketStart) continue;
    ++buckets;
    EXPECT_EQ(a.name, "grad_bucket_reduce_scatter");
    EXPECT_EQ(z1o.events[a.event].event.kind, EventKind::kReduceScatter);
    EXPECT_EQ(p.groups[a.group], (std::vector<int64_t>{0, 1}));
  }
  EXPECT_EQ(buckets, 6);
  tail = shape(p);
  tail.erase(tail.begin(), tail.end() - 3);
  EXPECT_EQ(tail, (Tokens{"grad_bucket_wait", "adam_step", "param_allgather"}));

  IterationPlan z3 = makePlan("1M1P2D", 1, 4, Schedule::kGpipe, false, {.zero = 3});
  RankProgram q = buildRankProgram(z3, 0);
  int gathers = 0, scatters = 0;
  for (const Action& a : q.actions) {
    if (a.stream != Stream::kDpComm) continue;
    EXPECT_TRUE(a.phase == Phase::kForward || a.phase == Phase::kBackward) << a.name;
    gathers += a.name == "zero3_param_allgather";
    scatters += a.name == "zero3_grad_reduce_scatter";
  }
  EXPECT_EQ(gathers, 2 * 6 * 2);  // micro-batches x parts x (forward, backward)
  EXPECT_EQ(scatters, 2 * 6);
  EXPECT_EQ(shape(q).back(), "adam_step");
}

// (stream, phase, micro_batch, layer, op, chunk), sorted: the multiset eventsim compare matches
// on (the CSV has no chunk column: there the layer numbers imply it).
using Key = std::tuple<int, int, int, int, std::string, int>;

std::vector<Key> simulatedKeys(const IterationPlan& plan, int64_t rank) {
  std::vector<EventCost> costs(static_cast<size_t>(plan.events.size()),
                               EventCost{1.0, Provenance::kMeasured});
  static std::vector<Simulation> keep;  // forEachDeviceEvent's names point into the plan
  keep.push_back(simulate(plan, costs));
  std::vector<Key> keys;
  forEachDeviceEvent(keep.back(), rank, [&](const DeviceEvent& e) {
    keys.emplace_back(static_cast<int>(e.stream), static_cast<int>(e.phase), e.micro_batch, e.layer,
                      std::string(e.name), e.chunk);
  });
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<Key> programKeys(const RankProgram& p) {
  std::vector<Key> keys;
  for (const Action& a : p.actions) {
    if (!a.recorded()) continue;
    keys.emplace_back(static_cast<int>(a.stream), static_cast<int>(a.phase), a.micro_batch, a.layer,
                      std::string(a.name), a.chunk);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

void expectSameKeysOnEveryRank(const IterationPlan& plan, const std::string& label) {
  for (int64_t r = 0; r < plan.strategy.gpus(); ++r) {
    SCOPED_TRACE(label + " rank " + std::to_string(r));
    std::vector<Key> program = programKeys(buildRankProgram(plan, r));
    EXPECT_FALSE(program.empty());
    EXPECT_EQ(program, simulatedKeys(plan, r));
  }
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
      expectSameKeysOnEveryRank(
          makePlan(c.strategy, c.b, c.B, schedule, c.overlap),
          std::string(c.strategy) + " " + std::string(scheduleName(schedule)));
    }
  }
}

// The zero-bubble schedules and an uneven split: W tasks (and the buckets that now close in the
// last W) and the stage layers are the same in both.
TEST(EventrunProgram, SameEventsAsTheSimulatorZeroBubbleAndUneven) {
  for (Schedule schedule : {Schedule::kZbh1, Schedule::kZbh2, Schedule::kZbv}) {
    expectSameKeysOnEveryRank(makePlan("1M2P1D", 1, 4, schedule), "1M2P1D");
    expectSameKeysOnEveryRank(makePlan("2M2P2D", 1, 8, schedule), "2M2P2D");
    expectSameKeysOnEveryRank(makePlan("1M2P2D", 1, 8, schedule, /*dp_overlap=*/true),
                              "1M2P2D overlap");
  }
  IterationPlan uneven = makePlan("1M2P1D", 1, 4, Schedule::kDapple);
  Strategy s = uneven.strategy;
  s.stage_layers = {1, 3};
  uneven = buildIterationPlan(uneven.model, uneven.cluster, s);
  ASSERT_EQ(uneven.stages[1].num_layers, 3);
  expectSameKeysOnEveryRank(uneven, "1M2P1D layers 1,3");
}

TEST(EventrunProgram, SameEventsAsTheSimulatorWithTechniques) {
  struct Case {
    const char* label;
    const char* strategy;
    int64_t b, B;
    bool overlap;
    Techniques t;
  };
  const Techniques combined{.virtual_stages = 2,
                            .recompute = Recompute::kSelective,
                            .sequence_parallel = true,
                            .zero = 1};
  const Case cases[] = {
      {"interleaved v2", "1M2P1D", 1, 4, false, {.virtual_stages = 2}},         // m = 4
      {"interleaved v2", "1M2P2D", 1, 8, false, {.virtual_stages = 2}},         // m = 4
      {"interleaved v2 overlap", "1M2P2D", 1, 4, true, {.virtual_stages = 2}},  // m = 2
      {"recompute full", "1M2P1D", 1, 4, false, {.recompute = Recompute::kFull}},
      {"recompute full", "2M2P2D", 1, 8, false, {.recompute = Recompute::kFull}},
      {"recompute selective", "1M2P1D", 1, 4, false, {.recompute = Recompute::kSelective}},
      {"recompute selective", "2M1P1D", 1, 4, false, {.recompute = Recompute::kSelective}},
      {"sp", "2M1P1D", 1, 4, false, {.sequence_parallel = true}},
      {"sp", "2M2P1D", 1, 4, false, {.sequence_parallel = true}},
      {"zero1", "1M1P2D", 1, 4, false, {.zero = 1}},
      {"zero1 overlap", "1M1P2D", 1, 4, true, {.zero = 1}},
      {"zero2", "1M2P2D", 1, 8, false, {.zero = 2}},
      {"zero3", "1M1P2D", 1, 4, false, {.zero = 3}},
      {"interleaved v2 + selective + sp + zero1", "2M2P2D", 1, 8, false, combined},  // m = 4
      {"interleaved v2 + selective + sp + zero1 overlap", "2M2P2D", 1, 8, true, combined},
  };
  for (const Case& c : cases) {
    for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple, Schedule::kZbh1}) {
      // One run suffices for interleaving (it replaces the schedule).
      if (c.t.virtual_stages > 1 && schedule != Schedule::kDapple) continue;
      IterationPlan plan = makePlan(c.strategy, c.b, c.B, schedule, c.overlap, c.t);
      expectSameKeysOnEveryRank(plan, std::string(c.label) + " " + c.strategy + " " +
                                          std::string(scheduleName(plan.strategy.schedule)));
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

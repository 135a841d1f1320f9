// Overlap slowdown (modeler/overlap_slowdown.h): compute beside a transfer progresses at rate 1/f
// while the transfer is in flight, so an op of t that overlaps a transfer for wall time o takes
// t + o (f - 1) / f, and one with no overlap is unchanged. Every expected figure below is worked
// out by hand in the comment above it.
#include "modeler/overlap_slowdown.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "common/error.h"
#include "config/device_config.h"
#include "io/profile_db.h"
#include "modeler/calibration/overlap_fit.h"
#include "modeler/op_offsets.h"
#include "modeler/simulation.h"
#include "modeler/stretched_task.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"
#include "support/stage_cost.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::stageCost;

TEST(OverlapSlowdownTest, NoTransferOrFactorOneLeavesTheOpAlone) {
  EXPECT_DOUBLE_EQ(slowedEndUs(3, 10, {}), 13);
  const std::vector<SlowInterval> one{{0, 100, 1.0}};
  EXPECT_DOUBLE_EQ(slowedEndUs(3, 10, one), 13);
  // A transfer over before the op starts, or starting after it ends.
  const std::vector<SlowInterval> apart{{0, 3, 2.0}, {13, 20, 2.0}};
  EXPECT_DOUBLE_EQ(slowedEndUs(3, 10, apart), 13);
}

TEST(OverlapSlowdownTest, OnlyTheOverlappedPartSlows) {
  // The transfer outlasts the op: all of it at rate 1/1.5: 4 x 1.5 = 6.
  const std::vector<SlowInterval> outlasts{{0, 10, 1.5}};
  EXPECT_DOUBLE_EQ(slowedEndUs(0, 4, outlasts), 6);
  // The transfer ends inside the op: [0, 4] at rate 1/2 does 2 us of work, the other 8 follow:
  // 12 = t + o (f - 1) / f = 10 + 4 x 1/2.
  const std::vector<SlowInterval> ends_inside{{0, 4, 2.0}};
  EXPECT_DOUBLE_EQ(slowedEndUs(0, 10, ends_inside), 12);
  // The transfer starts inside the op: 5 us of work by t = 5, [5, 9] does 2, 3 left: 12.
  const std::vector<SlowInterval> starts_inside{{5, 9, 2.0}};
  EXPECT_DOUBLE_EQ(slowedEndUs(0, 10, starts_inside), 12);
  // Two in flight at once: the larger factor holds. [0, 2] at 1/2: 1; [2, 6] at 1/3: 4/3; then
  // 10 - 7/3 = 23/3 at full speed: 6 + 23/3.
  const std::vector<SlowInterval> two{{0, 4, 2.0}, {2, 6, 3.0}};
  EXPECT_NEAR(slowedEndUs(0, 10, two), 6 + 23.0 / 3, 1e-12);
}

// A CP ring exchange (10 us, factor 1.5) beside its attention step (8 us), then a GEMM (5 us).
// Without the slowdown: attention [0, 8], the GEMM waits for the exchange: [10, 15]. With it, the
// attention step runs beside the exchange all along: f t = 12 > 10, so it ends at
// 8 + 10 x 0.5 / 1.5 = 11.333; the GEMM starts there (after the exchange) and ends at 16.333.
// The GEMM runs beside nothing and keeps its 5 us.
TEST(OverlapSlowdownTest, OpOffsetsSlowComputeBesideAnExchange) {
  OpList ops(3);
  ops[0].event = 0;
  ops[0].stream = Stream::kCpComm;
  ops[0].overlap_ops = 1;
  ops[1].event = 1;
  ops[2].event = 2;
  const double us[] = {10, 8, 5};
  auto cost = [&](const OpInstance& op) { return std::pair{0.0, us[op.event]}; };
  auto all = [](const OpInstance&) { return true; };
  std::vector<double> starts(3);
  auto at = [&](size_t i, double t) { starts[i] = t; };
  EXPECT_DOUBLE_EQ(opOffsets(ops, all, cost, at), 15);
  EXPECT_DOUBLE_EQ(starts[2], 10);
  auto f = [](const OpInstance& op) { return op.stream == Stream::kCpComm ? 1.5 : 1.0; };
  EXPECT_NEAR(opOffsets(ops, all, cost, at, f), 8 + 10 * 0.5 / 1.5 + 5, 1e-12);
  EXPECT_NEAR(starts[2], 8 + 10 * 0.5 / 1.5, 1e-12);
  // A host copy beside the attention step is not NCCL traffic: factor 1, nothing slows.
  ops[0].stream = Stream::kHost;
  EXPECT_DOUBLE_EQ(opOffsets(ops, all, cost, at, f), 15);
  // No op runs beside another: the factor changes nothing.
  ops[0].stream = Stream::kCpComm;
  ops[0].overlap_ops = 0;
  EXPECT_DOUBLE_EQ(opOffsets(ops, all, cost, at, f), 23);
}

// One stage (P = 1), m = 2, f = 10, b = 20, DP overlap with two buckets (factor 2): bucket 1 ready
// 5 us into the last backward (allreduce 10 us), bucket 2 at its end (2 us); optimizer 3 us.
// Order F0 [0, 10], B0 [10, 30], F1 [30, 40], B1 from 40: untouched (no bucket in flight).
// B1: 5 us of work by 45; bucket 1 [45, 55] at rate 1/2 does 5 more; 10 left: B1 ends at 65
// (= 20 + o (f - 1)/f = 20 + 10/2 after 40). Bucket 2 is ready when B1 has done its 20 us: 65;
// [65, 67]. Optimizer [67, 70]. Without the slowdown: B1 [40, 60], bucket 2 [60, 62], opt to 65.
TEST(OverlapSlowdownTest, DpBucketsSlowTheBackwardTheyOverlap) {
  auto input = [](double factor) {
    TimingInput in;
    in.schedule = Schedule::kDapple;
    in.micro_batches = 2;
    StageCost stage = stageCost(10, 20, 0, 3);
    stage.buckets = {BucketCost{5, 10, factor}, BucketCost{20, 2, factor}};
    in.stages = {stage};
    in.pipelines.push_back(PipelineCost{{}, {}, {}});
    in.dp_overlap = true;
    return in;
  };
  const IterationTimeline slowed = computeTimeline(input(2.0));
  const StageTimeline& st = slowed.pipelines[0].stages[0];
  ASSERT_EQ(st.tasks.size(), 4u);
  const double run_end[] = {10, 30, 40, 65};
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(st.tasks[i].run.end_us, run_end[i]) << i;
  EXPECT_DOUBLE_EQ(st.overlapSlowdownUs(3), 5);
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(st.overlapSlowdownUs(i), 0) << i;
  ASSERT_EQ(st.grad_sync.size(), 2u);
  EXPECT_DOUBLE_EQ(st.grad_sync[0].start_us, 45);
  EXPECT_DOUBLE_EQ(st.grad_sync[0].end_us, 55);
  EXPECT_DOUBLE_EQ(st.grad_sync[1].start_us, 65);
  EXPECT_DOUBLE_EQ(st.grad_sync[1].end_us, 67);
  EXPECT_DOUBLE_EQ(slowed.iteration_us, 70);

  const IterationTimeline plain = computeTimeline(input(1.0));
  EXPECT_DOUBLE_EQ(plain.pipelines[0].stages[0].tasks[3].run.end_us, 60);
  EXPECT_DOUBLE_EQ(plain.pipelines[0].stages[0].grad_sync[1].start_us, 60);
  EXPECT_DOUBLE_EQ(plain.iteration_us, 65);
}

// The same stage with link sharing's stretch on bucket 1 (TimingInput::grad_sync_stretch_us):
// compute slows for the bucket's shared window, not its standalone 10 us, and only where the two
// overlap. B1 starts at 40 and has done 5 us of work by 45, when bucket 1 starts.
//   stretch 4:  bucket 1 [45, 59]: 14 us at rate 1/2 do 7, 8 left at full speed: B1 ends at 67
//               (20 + 14 x 1/2 after 40); bucket 2 ready at 67, [67, 69]; optimizer [69, 72].
//               (Its standalone window [45, 55] would give B1 65, bucket 2 [65, 67]: 2 us less.)
//   stretch 10: bucket 1 [45, 65]: 20 us do 10, 5 left: B1 ends at 70.
//   stretch 30: bucket 1 [45, 85] outlasts B1: its 15 us left take 30, B1 ends at 75; a longer
//               stretch (40) overlaps nothing more, so B1 still ends at 75.
TEST(OverlapSlowdownTest, SharedBucketSlowsComputeOnlyForItsStretchedOverlap) {
  auto timed = [](double stretch_us) {
    TimingInput in;
    in.schedule = Schedule::kDapple;
    in.micro_batches = 2;
    StageCost stage = stageCost(10, 20, 0, 3);
    stage.buckets = {BucketCost{5, 10, 2.0}, BucketCost{20, 2, 2.0}};
    in.stages = {stage};
    in.pipelines.push_back(PipelineCost{{}, {}, {}});
    in.dp_overlap = true;
    in.grad_sync_stretch_us = {{stretch_us, 0.0}};
    return computeTimeline(in);
  };
  const IterationTimeline four = timed(4);
  const StageTimeline& st = four.pipelines[0].stages[0];
  EXPECT_DOUBLE_EQ(st.tasks[3].run.end_us, 67);
  EXPECT_DOUBLE_EQ(st.overlapSlowdownUs(3), 7);
  ASSERT_EQ(st.grad_sync.size(), 2u);
  EXPECT_DOUBLE_EQ(st.grad_sync[0].start_us, 45);
  EXPECT_DOUBLE_EQ(st.grad_sync[0].end_us, 59);
  EXPECT_DOUBLE_EQ(st.grad_sync[1].start_us, 67);
  EXPECT_DOUBLE_EQ(st.grad_sync[1].end_us, 69);
  EXPECT_DOUBLE_EQ(four.iteration_us, 72);
  EXPECT_DOUBLE_EQ(timed(10).pipelines[0].stages[0].tasks[3].run.end_us, 70);
  EXPECT_DOUBLE_EQ(timed(30).pipelines[0].stages[0].tasks[3].run.end_us, 75);
  EXPECT_DOUBLE_EQ(timed(40).pipelines[0].stages[0].tasks[3].run.end_us, 75);
}

// Two stages, 1F1B, m = 2, f = 1, b = 2, sends of 1 us, no DP: sends block their device (no
// compute runs beside a PP transfer in this engine), so a bucket factor changes nothing without
// DP overlap.
TEST(OverlapSlowdownTest, PipelineSendsAndSyncAfterTheFlushAreNotOverlapped) {
  auto input = [](double factor, bool overlap) {
    TimingInput in;
    in.schedule = Schedule::kDapple;
    in.micro_batches = 2;
    StageCost stage = stageCost(1, 2, 4, 1);
    stage.buckets = {BucketCost{2, 4, factor}};
    in.stages = {stage, stage};
    in.pipelines.push_back(PipelineCost{{1}, {1}, {}});
    in.dp_overlap = overlap;
    return in;
  };
  EXPECT_DOUBLE_EQ(computeTimeline(input(3.0, false)).iteration_us,
                   computeTimeline(input(1.0, false)).iteration_us);
  // With overlap the bucket is ready at the end of each stage's last backward: it overlaps no
  // compute (the device's later work is a send), so again nothing slows.
  EXPECT_DOUBLE_EQ(computeTimeline(input(3.0, true)).iteration_us,
                   computeTimeline(input(1.0, true)).iteration_us);
}

// tiny-llama at C = 2 (a forward has one ring exchange per layer, 4, each beside its attention
// step), every op 1 us, the exchanges 1.5: without the slowdown an exchange and its step take 1.5,
// so a forward is others + 0.5 per exchange. With factor 2 the step runs at half speed for the
// exchange's 1.5 us: it ends at 1 + 1.5 (2 - 1)/2 = 1.75, 0.25 later per exchange. A simulation
// of one device with no DP is its tasks and optimizer back to back, so the iteration grows by the
// slowdown the metrics report.
TEST(OverlapSlowdownTest, ContextParallelExchangeSlowsItsAttentionStep) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  Strategy s = test::strategy("1M1P1D", 1, 2);
  s.cp = 2;
  auto run = [&](double factor) {
    ClusterConfig cluster = test::cluster(2);
    cluster.device.overlap_slowdown.nvlink.value = factor;
    cluster.device.overlap_slowdown.network.value = factor;
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    std::vector<EventCost> costs;
    for (const UniqueEvent& u : plan.events.events()) {
      costs.push_back(EventCost{u.event.kind == EventKind::kP2P ? 1.5 : 1.0});
    }
    return simulate(std::move(plan), std::move(costs));
  };
  const Simulation plain = run(1.0), slowed = run(2.0);
  const int exchanges = test::countOps(plain.plan.stages[0].forward, "cp_kv_exchange");
  const int others = static_cast<int>(plain.plan.stages[0].forward.size()) - exchanges;
  ASSERT_EQ(exchanges, 4);
  EXPECT_DOUBLE_EQ(plain.input.stages[0].forward_us, others + 0.5 * exchanges);
  EXPECT_DOUBLE_EQ(slowed.input.stages[0].forward_us, others + 0.75 * exchanges);
  EXPECT_DOUBLE_EQ(slowed.offsets[0].forward_slowdown_us, 0.25 * exchanges);
  EXPECT_DOUBLE_EQ(plain.summary.mean_device.overlap_slowdown_us, 0);
  const double m = static_cast<double>(slowed.plan.micro_batches);
  const double per_micro_batch =
      slowed.offsets[0].forward_slowdown_us + slowed.offsets[0].backward_slowdown_us;
  EXPECT_GT(slowed.offsets[0].backward_slowdown_us, 0);  // the backward's exchanges too
  EXPECT_NEAR(slowed.summary.mean_device.overlap_slowdown_us, m * per_micro_batch, 1e-9);
  EXPECT_NEAR(slowed.summary.iteration_us - plain.summary.iteration_us, m * per_micro_batch, 1e-9);
  EXPECT_NEAR(slowed.summary.mean_device.compute_us - plain.summary.mean_device.compute_us,
              m * per_micro_batch, 1e-9);
}

// Compute slowed beside a transfer adds to a task only what outlasts the host's issue path (an op
// starts once the host has issued it: op_offsets.h). The setup above (tiny-llama, C = 2, every op
// 1 us, the ring exchanges 1.5 us, factor 2), each op now issued by the host in h = 1.25 us, more
// than any op holds the device: op i of a task starts at (i + 1) h. An exchange starting at T: its
// attention step is issued at T + 1.25 and overlaps it for 0.25 us, doing 0.125 us of work at rate
// 1/2, and ends at T + 1.5 + 0.875 = T + 2.375 (0.125 us later than alone), before the next op is
// issued (T + 2.5), which also finds the exchange done (T + 1.5). So every task of N ops takes
// N h + 1 (the last op, 1 us, issued at N h) with the slowdown as without: overlap slowdown 0,
// where with no host time it is 0.25 us an exchange (above). This is why cp8_interleaved's
// overlap slowdown fell from 9.0 to 1.4 ms a device when its backward gained the last step's
// exchange (docs/VALIDATION.md, Session 23, net28): one more op per layer, 65.2 us of host time
// each, left its backward tasks host-bound.
TEST(OverlapSlowdownTest, AHostBoundTaskHidesTheSlowdown) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  Strategy s = test::strategy("1M1P1D", 1, 2);
  s.cp = 2;
  constexpr double kHostUs = 1.25;
  auto run = [&](double factor) {
    ClusterConfig cluster = test::cluster(2);
    cluster.device.overlap_slowdown.nvlink.value = factor;
    cluster.device.overlap_slowdown.network.value = factor;
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    // Every op issued as a framework op here, the ring's too (TE's ring loop prices its ops by
    // the calls it makes: cp_ring_host_test.cpp).
    for (OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
      for (OpInstance& op : *ops) op.host_calls = 0;
    }
    std::vector<EventCost> costs;
    for (const UniqueEvent& u : plan.events.events()) {
      EventCost c{u.event.kind == EventKind::kP2P ? 1.5 : 1.0};
      c.host_us = kHostUs;
      costs.push_back(c);
    }
    return simulate(std::move(plan), std::move(costs));
  };
  const Simulation plain = run(1.0), slowed = run(2.0);
  const StagePlan& stage = plain.plan.stages[0];
  ASSERT_EQ(test::countOps(stage.forward, "cp_kv_exchange"), 4);
  ASSERT_GT(test::countOps(stage.backward, "cp_kv_grad_exchange"), 0);
  for (const OpList* ops : {&stage.forward, &stage.backward}) {
    for (const OpInstance& op : *ops) ASSERT_FALSE(op.issued_with_previous) << op.name;
    ASSERT_EQ(ops->back().overlap_ops, 0);  // the task ends with an op that holds the device
  }
  const double n_forward = static_cast<double>(stage.forward.size());
  const double n_backward = static_cast<double>(stage.backward.size());
  EXPECT_NEAR(plain.input.stages[0].forward_us, n_forward * kHostUs + 1, 1e-9);
  EXPECT_NEAR(plain.input.stages[0].backward_us, n_backward * kHostUs + 1, 1e-9);
  EXPECT_NEAR(slowed.input.stages[0].forward_us, n_forward * kHostUs + 1, 1e-9);
  EXPECT_NEAR(slowed.input.stages[0].backward_us, n_backward * kHostUs + 1, 1e-9);
  EXPECT_NEAR(slowed.offsets[0].forward_slowdown_us, 0, 1e-9);
  EXPECT_NEAR(slowed.offsets[0].backward_slowdown_us, 0, 1e-9);
  EXPECT_NEAR(slowed.summary.mean_device.overlap_slowdown_us, 0, 1e-9);
  EXPECT_NEAR(slowed.summary.iteration_us, plain.summary.iteration_us, 1e-9);
  // The step beside the forward's first exchange starts h after it, and the op after the step
  // h later still: on time, its slowdown inside the host's slack.
  size_t x = 0;
  while (stage.forward[x].name != "cp_kv_exchange") ++x;
  const std::vector<double>& at = slowed.offsets[0].forward_start_us;
  EXPECT_NEAR(at[x + 1] - at[x], kHostUs, 1e-9);
  EXPECT_NEAR(at[x + 2] - at[x + 1], kHostUs, 1e-9);
}

// A CP exchange that link sharing stretched, timed again in its task (modeler/stretched_task.h):
// tiny-llama at C = 2, every op 1 us except the ring exchanges (1.5 us) and the attention step
// beside each (3 us), factor 2. The first exchange of the forward, stretched by e, runs [0, 1.5 + e]
// beside its step (3 us of work): o = min(f t, 1.5 + e) of the step overlaps it.
//   alone:  o = 1.5: the step takes 3 + 1.5 x (2 - 1)/2 = 3.75, the next op waits for it (3.75).
//   e = 1:  o = 2.5: 3 + 1.25 = 4.25; the exchange (2.5) is still hidden: +0.5, all of it overlap
//           slowdown (without the slowdown the step's 3 us hide the 2.5 as they hid the 1.5).
//   e = 4:  o = 5.5: 3 + 2.75 = 5.75 > 5.5: +2.0; unslowed the task waits 5.5 - 3 = 2.5 for the
//           exchange (exposed CP), so the slowdown part is 2.0 - 2.5 = -0.5 (the step's slowdown
//           now runs under the exchange's wait).
//   e = 6:  o = 7.5 >= f t = 6: the step takes 6, the task waits for the exchange to 7.5: +3.75,
//           exposed 7.5 - 3 = 4.5, slowdown -0.75.
// The old rule added the whole e to the task (1, 4, 6) and left the step's slowdown at 0.75.
// The setup of the two tests below: tiny-llama at C = 2, factor 2, every op 1 us but the ring
// exchanges (1.5 us) and the attention step beside the forward's first (3 us).
struct ExchangeTask {
  IterationPlan plan;
  std::vector<EventCost> costs;
  int exchange = -1;  // the forward's first ring exchange
};
ExchangeTask exchangeTask() {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  Strategy s = test::strategy("1M1P1D", 1, 2);
  s.cp = 2;
  ClusterConfig cluster = test::cluster(2);
  cluster.device.overlap_slowdown.nvlink.value = 2;
  cluster.device.overlap_slowdown.network.value = 2;
  ExchangeTask out{buildIterationPlan(model, cluster, s), {}, -1};
  const OpList& fwd = out.plan.stages[0].forward;
  for (size_t i = 0; i < fwd.size() && out.exchange < 0; ++i) {
    if (fwd[i].name == "cp_kv_exchange") out.exchange = static_cast<int>(i);
  }
  EVSIM_CHECK(out.exchange >= 0, "no ring exchange in tiny-llama's forward");
  for (const UniqueEvent& u : out.plan.events.events()) {
    out.costs.push_back(EventCost{u.event.kind == EventKind::kP2P ? 1.5 : 1.0});
  }
  out.costs[static_cast<size_t>(fwd[static_cast<size_t>(out.exchange) + 1].event)].time_us = 3;
  return out;
}

TEST(OverlapSlowdownTest, AStretchedExchangeSlowsItsStepOverItsSharedWindow) {
  const ExchangeTask task = exchangeTask();
  const IterationPlan& plan = task.plan;
  const std::vector<EventCost>& costs = task.costs;
  const int exchange = task.exchange;
  const OpList& fwd = plan.stages[0].forward;
  const OpInstance& x = fwd[static_cast<size_t>(exchange)];
  const OpInstance& step = fwd[static_cast<size_t>(exchange) + 1];
  ASSERT_EQ(x.overlap_ops, 1);
  ASSERT_EQ(step.stream, Stream::kCompute);
  auto stretched = [&](double e) {
    const OpStretch one{exchange, e};
    return stretchedTask(plan, costs, 0, Phase::kForward, false, std::span(&one, 1));
  };
  EXPECT_NEAR(stretched(0).delay_us, 0, 1e-12);
  EXPECT_NEAR(stretched(0).slowdown_us, 0, 1e-12);
  EXPECT_NEAR(stretched(1).delay_us, 0.5, 1e-12);
  EXPECT_NEAR(stretched(1).slowdown_us, 0.5, 1e-12);
  EXPECT_NEAR(stretched(4).delay_us, 2.0, 1e-12);
  EXPECT_NEAR(stretched(4).slowdown_us, -0.5, 1e-12);
  EXPECT_NEAR(stretched(6).delay_us, 3.75, 1e-12);
  EXPECT_NEAR(stretched(6).slowdown_us, -0.75, 1e-12);
  // A blocking op (nothing beside it) delays the task by all of its stretch: the op after the step.
  const OpStretch blocking{exchange + 2, 2.5};
  ASSERT_EQ(fwd[static_cast<size_t>(exchange) + 2].overlap_ops, 0);
  EXPECT_NEAR(stretchedTask(plan, costs, 0, Phase::kForward, false, std::span(&blocking, 1))
                  .delay_us,
              2.5, 1e-12);
}

// One TaskRetimer asked many times (link_flows.cpp asks it once per retimed task) walks each
// distinct question once and answers a repeat with the first walk's figures: the same figures the
// test above works out by hand, whatever the order they are asked in. A question differing only
// in the op stretched, or by one ulp of its extra time, is walked anew.
TEST(OverlapSlowdownTest, ARetimerAnswersARepeatedQuestionWithItsFirstWalk) {
  const ExchangeTask task = exchangeTask();
  TaskRetimer retimer(task.plan, task.costs, false);
  auto ask = [&](int op, double e) {
    const OpStretch one{op, e};
    return retimer.of(0, Phase::kForward, std::span(&one, 1));
  };
  const int x = task.exchange;
  for (int round = 0; round < 2; ++round) {  // the second round is answered from the first
    const StretchedTask one = ask(x, 1), four = ask(x, 4), blocking = ask(x + 2, 4);
    EXPECT_NEAR(one.delay_us, 0.5, 1e-12);
    EXPECT_NEAR(one.slowdown_us, 0.5, 1e-12);
    EXPECT_NEAR(four.delay_us, 2.0, 1e-12);
    EXPECT_NEAR(four.slowdown_us, -0.5, 1e-12);
    EXPECT_NEAR(blocking.delay_us, 4.0, 1e-12);  // the blocking op: all of its stretch
    EXPECT_NEAR(blocking.slowdown_us, 0, 1e-12);
    EXPECT_EQ(retimer.walked(), 3u);
  }
  // One ulp more: a new question (o = 2.5 + ulp: still +0.5 to 1e-12).
  EXPECT_NEAR(ask(x, std::nextafter(1.0, 2.0)).delay_us, 0.5, 1e-12);
  EXPECT_EQ(retimer.walked(), 4u);
  // Every answer equals a fresh retimer's walk of the same question, to the bit.
  for (const auto& [op, e] : {std::pair{x, 1.0}, {x, 4.0}, {x + 2, 4.0}}) {
    const OpStretch one{op, e};
    const StretchedTask fresh = stretchedTask(task.plan, task.costs, 0, Phase::kForward, false,
                                              std::span(&one, 1));
    EXPECT_EQ(ask(op, e).delay_us, fresh.delay_us);
    EXPECT_EQ(ask(op, e).slowdown_us, fresh.slowdown_us);
  }
  EXPECT_EQ(retimer.walked(), 4u);
}

// A task with no op running beside others is never slowed, whatever the factors: its retiming
// walks the ops once a question (the unslowed walk would be the same walk), and a stretch of e on
// any op delays it by e with no slowdown part. tiny-llama without CP, factor 2, every op 1 us:
// one walk for the task alone and one for each question; with CP (the exchange beside its step)
// two each.
TEST(OverlapSlowdownTest, ATaskWithNothingBesideIsWalkedOnceAQuestion) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  ClusterConfig cluster = test::cluster(2);
  cluster.device.overlap_slowdown.nvlink.value = 2;
  cluster.device.overlap_slowdown.network.value = 2;
  const IterationPlan plan = buildIterationPlan(model, cluster, test::strategy("1M1P1D", 1, 2));
  std::vector<EventCost> costs(static_cast<size_t>(plan.events.size()), EventCost{1.0});
  for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
    for (const OpInstance& op : *ops) ASSERT_EQ(op.overlap_ops, 0) << op.name;
  }
  TaskRetimer retimer(plan, costs, false);
  for (const auto& [op, e] : {std::pair{0, 2.5}, {3, 0.75}, {5, 4.0}}) {
    const OpStretch one{op, e};
    const StretchedTask st = retimer.of(0, Phase::kForward, std::span(&one, 1));
    EXPECT_NEAR(st.delay_us, e, 1e-12);
    EXPECT_EQ(st.slowdown_us, 0.0);
  }
  EXPECT_EQ(retimer.walked(), 3u);
  EXPECT_EQ(retimer.opWalks(), 1u + 3u);
  // With the exchange beside its step the slowed and unslowed walks differ: two a question.
  const ExchangeTask task = exchangeTask();
  TaskRetimer beside(task.plan, task.costs, false);
  const OpStretch one{task.exchange, 1.0};
  EXPECT_NEAR(beside.of(0, Phase::kForward, std::span(&one, 1)).slowdown_us, 0.5, 1e-12);
  EXPECT_EQ(beside.opWalks(), 2u + 2u);
}

// A pipeline without CP or DP overlap runs no compute beside a transfer: the same timeline
// whatever the factors.
TEST(OverlapSlowdownTest, NoOverlapNoChangeInAWholeSimulation) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "tiny-gpt"));
  const Strategy s = test::strategy("1M2P2D", 1, 8);
  auto run = [&](double factor) {
    ClusterConfig cluster = test::cluster(2, 2);
    cluster.device.overlap_slowdown.nvlink.value = factor;
    cluster.device.overlap_slowdown.network.value = factor;
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    std::vector<EventCost> costs;
    for (const UniqueEvent& u : plan.events.events()) {
      costs.push_back(EventCost{isCommunication(u.event.kind) ? 3.0 : 1.0});
    }
    return simulate(std::move(plan), std::move(costs)).summary.iteration_us;
  };
  EXPECT_DOUBLE_EQ(run(3.0), run(1.0));
}

OverlapRecord record(double alone_us, double beside_us, int nodes) {
  OverlapRecord r;
  r.compute = makeGemm(64, 64, 64, "nn", DType::kFp32);
  r.transfer = makeCommunication(EventKind::kAllReduce, 1 << 20,
                                 Placement{2, nodes, nodes == 1 ? 2 : 1}, DType::kFp32);
  r.alone = TimingStats{alone_us, alone_us, alone_us, 0, 1};
  r.beside = TimingStats{beside_us, beside_us, beside_us, 0, 1};
  return r;
}

// Synthetic measurements made with known factors (1.3 inside a node, 1.1 across) and +-2% noise
// that cancels in pairs: the least squares f = sum(a b) / sum(a^2) gives them back.
TEST(OverlapSlowdownTest, TheFitRecoversAKnownFactor) {
  std::vector<OverlapRecord> records;
  const double alone[] = {100, 250, 40, 800};
  for (double a : alone) {
    records.push_back(record(a, 1.3 * a * 1.02, 1));
    records.push_back(record(a, 1.3 * a * 0.98, 1));
    records.push_back(record(a, 1.1 * a, 2));
  }
  const std::vector<OverlapFit> fits = fitOverlapSlowdown(records, "synthetic.yaml");
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_FALSE(fits[0].inter_node);
  EXPECT_NEAR(fits[0].factor, 1.3, 1e-12);
  EXPECT_EQ(fits[0].points, 8);
  EXPECT_NEAR(fits[0].rms_error_pct, 2.0, 1e-9);
  EXPECT_TRUE(fits[1].inter_node);
  EXPECT_NEAR(fits[1].factor, 1.1, 1e-12);
  EXPECT_CONTAINS(fits[1].source, "fitted: 4 kernels");
  // Faster beside a transfer is noise: kept at 1, and the source says so.
  const std::vector<OverlapFit> floor = fitOverlapSlowdown({record(100, 95, 1)}, "x.yaml");
  EXPECT_DOUBLE_EQ(floor[0].factor, 1.0);
  EXPECT_CONTAINS(floor[0].source, "measured 0.950 < 1 kept at 1");
  // 11.18x beside a transfer (4 CPU ranks on 2 loaded cores): kept at the device file's 10, said.
  const std::vector<OverlapFit> ceiling = fitOverlapSlowdown({record(100, 1118, 1)}, "x.yaml");
  EXPECT_DOUBLE_EQ(ceiling[0].factor, 10.0);
  EXPECT_NEAR(ceiling[0].raw_factor, 11.18, 1e-12);
  EXPECT_CONTAINS(ceiling[0].source, "measured 11.180 > 10 kept at 10");
  EXPECT_THROW(fitOverlapSlowdown({}, "empty.yaml"), InputError);
}

TEST(OverlapSlowdownTest, ProfileDatabaseKeepsOverlapRecordsAndOldFilesLoad) {
  ProfileDb db;
  db.metadata.backend = "cpu";
  db.metadata.date = "2026-11-25T00:00:00Z";
  db.metadata.world_size = 2;
  db.metadata.ranks_per_node = 2;
  db.metadata.hosts = {"h"};
  db.metadata.devices = {"cpu", "cpu"};
  db.putOverlap(record(100, 130, 1));
  db.putOverlap(record(100, 125, 1));  // the same pair again: replaced
  const std::string path = ::testing::TempDir() + "/overlap_profile.yaml";
  db.save(path);
  const ProfileDb back = ProfileDb::load(path);
  ASSERT_EQ(back.overlapRecords().size(), 1u);
  EXPECT_DOUBLE_EQ(back.overlapRecords()[0].beside.median_us, 125);
  EXPECT_EQ(back.overlapRecords()[0].transfer.placement.nodes, 1);
  // A file from before overlap records: no section, no records.
  const ProfileDb old = ProfileDb::parse(
      "schema_version: 1\nmetadata: {backend: cpu, date: d, world_size: 1, ranks_per_node: 1, "
      "hosts: [h], devices: [c]}\nevents: []\n",
      "old.yaml");
  EXPECT_TRUE(old.overlapRecords().empty());
  try {
    ProfileDb::parse(
        "schema_version: 1\nmetadata: {backend: cpu, date: d, world_size: 1, ranks_per_node: 1, "
        "hosts: [h], devices: [c]}\nevents: []\noverlap:\n  - {compute: \"add elems=4 "
        "dtype=fp32\", transfer: \"add elems=4 dtype=fp32\", alone_us: {median: 1, min: 1, max: "
        "1, stddev: 0, count: 1}, beside_us: {median: 1, min: 1, max: 1, stddev: 0, count: 1}}\n",
        "bad.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "bad.yaml: overlap[0].transfer");
  }
}

TEST(OverlapSlowdownTest, DeviceFileFactorsRoundTripAndBadOnesAreRefused) {
  const std::string base =
      "name: d\ngpu: G\ndatasheet: {source: s, peak_tflops: {fp16: 100}, "
      "memory_bandwidth_gb_s: 1000, memory_gib: 10, sm_count: 10}\n";
  const DeviceSpec none = parseDeviceConfig(base, "d.yaml");
  EXPECT_DOUBLE_EQ(none.overlap_slowdown.factor(false), 1.0);
  EXPECT_DOUBLE_EQ(none.overlap_slowdown.factor(true), 1.0);
  const DeviceSpec with = parseDeviceConfig(
      base +
          "overlap_slowdown:\n  nvlink: {value: 1.2, source: a}\n  network: {value: 1.05, "
          "source: b}\n",
      "d.yaml");
  EXPECT_DOUBLE_EQ(with.overlap_slowdown.factor(false), 1.2);
  EXPECT_DOUBLE_EQ(with.overlap_slowdown.factor(true), 1.05);
  const DeviceSpec back = parseDeviceConfig(deviceConfigYaml(with), "back.yaml");
  EXPECT_DOUBLE_EQ(back.overlap_slowdown.nvlink.value, 1.2);
  EXPECT_EQ(back.overlap_slowdown.network.source, "b");
  try {
    parseDeviceConfig(base +
                          "overlap_slowdown:\n  nvlink: {value: 0.9, source: a}\n  network: "
                          "{value: 1, source: b}\n",
                      "d.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "d.yaml: overlap_slowdown.nvlink.value");
    EXPECT_CONTAINS(e.what(), "must be >= 1");
  }
}

}  // namespace
}  // namespace evsim

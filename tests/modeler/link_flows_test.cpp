// The timing engine's transfers sharing links over time (modeler/link_flows.h): buckets, sends and
// in-task collectives stretched only where they overlap, traced by hand; and the links' load
// report (modeler/link_usage.h) against them. The flow-level model: link_sharing_test.cpp.
#include "modeler/link_flows.h"

#include <gtest/gtest.h>

#include <sstream>
#include <utility>
#include <vector>

#include "config/model_config.h"
#include "fmt/format.h"
#include "modeler/link_usage.h"
#include "modeler/network/link_sharing.h"
#include "modeler/simulation.h"
#include "modeler/summary_report.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"
#include "support/bucket_and_send.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// The timing engine's transfers: 1M2P2D, one GPU per node (every group crosses nodes), DP
// overlapped, m = 1, one bucket per stage. Each transfer is given the time that fills its NIC
// (10 GB/s = 1e4 bytes/us) alone, so two at once each run at half speed. f = 10, b = 20 us, the
// bucket ready 5 us into B. Alone: s0 F [0, 10], sends [10, 10 + Tf]; s1 F [10 + Tf, 20 + Tf],
// B [20 + Tf, 40 + Tf], its bucket [25 + Tf, 25 + Tf + Ta], its gradient send from 40 + Tf for Tb.
// The send (Tb << Ta) runs wholly inside the bucket on s1's NIC (tx): both at half speed while it
// lasts, so the send takes 2 Tb and the bucket Tb longer; s0's B starts at 40 + Tf + 2 Tb. Nothing
// else overlaps (s0's bucket comes after every send).
TEST(LinkFlows, ABucketAndASendShareTheNicOnlyWhileTheyOverlap) {
  Strategy strategy = Strategy::of(1, 2, 2, 1, 2);
  strategy.dp_overlap = true;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  ASSERT_EQ(plan.pipelines.size(), 1u);
  const double nic = 1e4;
  test::BucketAndSend setup = test::bucketAndSendInput(plan, nic);
  const double tb = setup.tb;
  const std::vector<double>& ta = setup.ta;
  TimingInput& in = setup.in;
  ASSERT_EQ(ta.size(), 2u);
  ASSERT_GT(ta[1], 15 + tb);  // the bucket outlasts B's rest and the send

  TimingInput off = in;
  IterationTimeline alone = computeTimeline(off);
  plan.cluster.topology.link_sharing = false;
  EXPECT_FALSE(shareLinksOverTime(plan, {}, {}, off, alone));
  EXPECT_NEAR(alone.pipelines[0].stages[1].tasks[1].send().duration(), tb, 1e-9);

  plan.cluster.topology.link_sharing = true;
  IterationTimeline shared = computeTimeline(in);
  EXPECT_TRUE(shareLinksOverTime(plan, {}, {}, in, shared));
  test::expectSendSharesTheBucketHalfway(shared, setup);
  EXPECT_NEAR(shared.pipelines[0].stages[0].grad_sync[0].duration(), ta[0], 1e-9);
}

// The same plan with compute beside stage 1's bucket slowed (factor f): the sharing pass frees the
// unshared timeline's per-task overlap slowdowns before it lists the flows (bench/RESULTS.md,
// session 31), so the timeline it leaves, whether sharing moved anything or not, must be timed
// again with them. Stage 1's B [20 + Tf, ..] has done 5 us of its 20 when the bucket (Ta) starts at
// 25 + Tf; the other 15 us run beside it at rate 1/f.
//   f = 1.5: they take 22.5 us, inside the bucket: B ends at 47.5 + Tf, 7.5 us of overlap slowdown.
//            Its gradient send from 47.5 + Tf runs inside the bucket: both at half while it lasts
//            (2 Tb), the bucket Tb longer after B has ended; stage 0's B starts 2 Tb after B.
//   f = 2:   the bucket's Ta us do Ta / 2 of them, the rest at full speed: B ends at
//            40 + Ta / 2 + Tf, Ta / 2 of slowdown; its send starts after the bucket has ended and
//            shares nothing (sharing changes no time).
TEST(LinkFlows, SharingKeepsEachTasksOverlapSlowdown) {
  Strategy strategy = Strategy::of(1, 2, 2, 1, 2);
  strategy.dp_overlap = true;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  plan.cluster.topology.link_sharing = true;
  const test::BucketAndSend setup = test::bucketAndSendInput(plan, 1e4);
  ASSERT_EQ(setup.ta.size(), 2u);
  const double tf = setup.tf, tb = setup.tb, ta = setup.ta[1];
  ASSERT_GT(ta, 22.5 + 2 * tb);  // f = 1.5: the bucket outlasts B's slowed rest and the send
  ASSERT_LT(ta, 30);             // f = 2: it ends before B
  auto timed = [&](double f, double b_end, double slowdown, bool shares) {
    SCOPED_TRACE(f);
    TimingInput in = setup.in;
    in.stages[1].buckets[0].compute_slowdown = f;
    IterationTimeline timeline = computeTimeline(in);
    EXPECT_NEAR(timeline.pipelines[0].stages[1].tasks[1].run.end_us, b_end, 1e-9);
    EXPECT_NEAR(timeline.pipelines[0].stages[1].overlapSlowdownUs(1), slowdown, 1e-9);
    EXPECT_EQ(shareLinksOverTime(plan, {}, {}, in, timeline), shares);
    const StageTimeline& s1 = timeline.pipelines[0].stages[1];
    EXPECT_NEAR(s1.tasks[1].run.end_us, b_end, 1e-9);
    EXPECT_NEAR(s1.overlapSlowdownUs(1), slowdown, 1e-9);
    EXPECT_NEAR(s1.overlapSlowdownUs(0), 0, 1e-9);  // F overlaps nothing
    EXPECT_NEAR(s1.tasks[1].send().start_us, b_end, 1e-9);
    EXPECT_NEAR(s1.tasks[1].send().duration(), shares ? 2 * tb : tb, 1e-9);
    EXPECT_NEAR(s1.grad_sync[0].end_us, 25 + tf + ta + (shares ? tb : 0), 1e-9);
    EXPECT_NEAR(timeline.pipelines[0].stages[0].tasks[1].run.start_us,
                b_end + (shares ? 2 * tb : tb), 1e-9);
  };
  timed(1.5, 47.5 + tf, 7.5, true);
  timed(2, 40 + ta / 2 + tf, ta / 2, false);
}

// --grad-reduce-sync step: a queued reduction that waited idle for its bucket (the queue was empty
// when its bucket closed) starts when its bucket closes, not its standalone gap after the one
// before it: a delay of that one moves it only past its bucket's close (the queue never runs two
// at once). 1M2P2D, ZeRO-2, m = 2, DAPPLE, one GPU per node (10 GB/s NICs: 1e4 bytes/us), one
// bucket per stage ready at B's end. Every transfer fills its NIC alone: the 4096-byte sends in
// T = 0.4096 us, stage s's reduction in R_s = its link bytes / 1e4 (two at once: half speed each);
// f = b = 100 us, optimizer 1 us, R_0 <= f, T < R_1 < f + b. A send holds its device.
// Alone: s0 F0 [0, f], a0 [f, f+T]; F1 [f+T, 2f+T], a1 [2f+T, 2f+2T].
//   s1 F0 [f+T, 2f+T]; B0 [2f+T, 2f+T+b]; r0 and g0 both from 2f+T+b; F1 [2f+2T+b, 3f+2T+b];
//   B1 [.., 3f+2T+2b]; r1 (idle queue: r0 ended at 2f+T+b+R_1) and g1 both from 3f+2T+2b.
//   s0 B0 [2f+2T+b, 2f+2T+2b], its r0 to 2f+2T+2b+R_0 <= 3f+2T+2b (before g1 reaches s0's rx).
// Shared (s1's tx): r0 and g0 at half from 2f+T+b: g0 ends T late (2T), r0 too. r1 starts at its
//   bucket's close 3f+2T+2b (r0 ended long before), beside g1: again each T late. (Following r0
//   with its standalone gap, r1 started T late, after g1 had left alone: g1 kept T, r1 was late
//   only by what it inherited, and nothing was stretched there.)
// Re-timed: s1 g0 [2f+T+b, 2f+3T+b], r0 [2f+T+b, 2f+2T+b+R_1]; F1 [2f+3T+b, 3f+3T+b], B1
//   [.., 3f+3T+2b], r1 [3f+3T+2b, 3f+4T+2b+R_1], g1 [3f+3T+2b, 3f+5T+2b]. s0 B0 at g0's arrival
//   [2f+3T+b, 2f+3T+2b]; B1 at g1's [3f+5T+2b, 3f+5T+3b], its r1 to 3f+5T+3b+R_0; optimizer
//   [3f+5T+3b+R_0, +1]: the iteration.
TEST(LinkFlows, AnIdleQueuedReductionStartsWhenItsBucketClosesNotAfterItsPredecessorsDelay) {
  Strategy strategy = Strategy::of(1, 2, 2, 1, 4);
  strategy.zero_stage = 2;
  strategy.grad_reduce_sync = GradReduceSync::kStep;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  ASSERT_EQ(plan.pipelines.size(), 1u);
  ASSERT_EQ(plan.micro_batches, 2);
  const double nic = 1e4, f = 100, b = 100;
  const PipelineClass& pipeline = plan.pipelines[0];
  ASSERT_EQ(plan.events[pipeline.forward_p2p[0]].event.message_bytes, 4096);
  ASSERT_EQ(plan.events[pipeline.backward_p2p[0]].event.message_bytes, 4096);
  const double T = 4096 / nic;
  TimingInput in;
  in.schedule = Schedule::kDapple;
  in.micro_batches = 2;
  in.grad_reduce_at_step = true;
  std::vector<double> R;
  for (const StagePlan& stage : plan.stages) {
    ASSERT_EQ(stage.micro_batch_buckets.size(), 1u);
    R.push_back(linkBytes(plan.events[stage.micro_batch_buckets[0].event].event) / nic);
    StageCost cost = test::stageCost(f, b, 0, 1);
    cost.micro_batch_buckets = {BucketCost{b, R.back()}};
    in.stages.push_back(cost);
  }
  in.pipelines.push_back(PipelineCost{{T}, {T}, {}});
  ASSERT_LE(R[0], f);
  ASSERT_GT(R[1], T);
  ASSERT_LT(R[1], f + b);

  IterationTimeline tl = computeTimeline(in);
  {  // alone, as traced
    const StageTimeline& s1 = tl.pipelines[0].stages[1];
    ASSERT_EQ(s1.grad_sync.size(), 2u);
    EXPECT_NEAR(s1.grad_sync[0].start_us, 2 * f + T + b, 1e-9);
    EXPECT_NEAR(s1.grad_sync[0].end_us, 2 * f + T + b + R[1], 1e-9);
    EXPECT_NEAR(s1.grad_sync[1].start_us, 3 * f + 2 * T + 2 * b, 1e-9);
    EXPECT_NEAR(s1.tasks[3].send().start_us, 3 * f + 2 * T + 2 * b, 1e-9);
    EXPECT_NEAR(tl.pipelines[0].stages[0].grad_sync[0].end_us, 2 * f + 2 * T + 2 * b + R[0], 1e-9);
  }
  ASSERT_TRUE(shareLinksOverTime(plan, {}, {}, in, tl));
  const StageTimeline& s0 = tl.pipelines[0].stages[0];
  const StageTimeline& s1 = tl.pipelines[0].stages[1];
  EXPECT_NEAR(s1.tasks[1].send().start_us, 2 * f + T + b, 1e-9);  // g0
  EXPECT_NEAR(s1.tasks[1].send().end_us, 2 * f + 3 * T + b, 1e-9);
  EXPECT_NEAR(s1.grad_sync[0].end_us, 2 * f + 2 * T + b + R[1], 1e-9);
  EXPECT_NEAR(s1.tasks[3].run.end_us, 3 * f + 3 * T + 2 * b, 1e-9);  // B1
  EXPECT_NEAR(s1.grad_sync[1].start_us, 3 * f + 3 * T + 2 * b, 1e-9);
  EXPECT_NEAR(s1.grad_sync[1].end_us, 3 * f + 4 * T + 2 * b + R[1], 1e-9);
  EXPECT_NEAR(s1.tasks[3].send().end_us, 3 * f + 5 * T + 2 * b, 1e-9);  // g1, stretched
  EXPECT_NEAR(s0.tasks[2].run.start_us, 2 * f + 3 * T + b, 1e-9);     // s0 B0
  EXPECT_NEAR(s0.tasks[3].run.start_us, 3 * f + 5 * T + 2 * b, 1e-9); // s0 B1
  EXPECT_NEAR(s0.grad_sync[1].end_us, 3 * f + 5 * T + 3 * b + R[0], 1e-9);
  EXPECT_NEAR(tl.iteration_us, 3 * f + 5 * T + 3 * b + R[0] + 1, 1e-9);
}

// The link loads of a simulated iteration: 1M2P1D on two nodes of one GPU (10 GB/s each), m = 2,
// DAPPLE. The only link traffic is the pipeline's: 2 activations (node 0 tx, node 1 rx) and 2
// gradients (node 1 tx, node 0 rx) of b s h = 1 x 32 x 64 fp16 = 4096 bytes each, one at a time:
// each link carries 8192 bytes, at 1 (its full 10 GB/s) while a send is in flight.
TEST(LinkUsage, CountsEveryPipelineByteOnBothEnds) {
  Strategy strategy = Strategy::of(1, 2, 1, 1, 2);
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
  // Each send alone fills its NIC: 4096 bytes at 1e4 bytes/us.
  for (int e : {plan.pipelines[0].forward_p2p[0], plan.pipelines[0].backward_p2p[0]}) {
    ASSERT_EQ(plan.events[e].event.message_bytes, 4096);
    costs[e].time_us = 4096 / 1e4;
  }
  const Simulation sim = simulate(plan, costs);
  const LinkUsage usage = linkUsage(sim);
  ASSERT_EQ(usage.links.size(), 4u);
  for (const LinkLoad& link : usage.links) {
    EXPECT_NEAR(link.bytes, 8192, 1e-6) << link.name;
    EXPECT_NEAR(link.capacity_bytes_per_us, 1e4, 1e-9) << link.name;
    for (const LoadSegment& s : link.segments) EXPECT_NEAR(s.bytes_per_us, 1e4, 1e-9);
    EXPECT_NEAR(link.utilization(sim.timeline.iteration_us),
                8192 / (1e4 * sim.timeline.iteration_us), 1e-12);
  }
  EXPECT_EQ(usage.links[0].name, "node 0 nic tx");
  std::ostringstream csv;
  writeLinkCsv(usage, csv);
  std::string first_row = csv.str().substr(csv.str().find('\n') + 1);
  first_row = first_row.substr(0, first_row.find('\n'));
  EXPECT_EQ(csv.str().substr(0, csv.str().find('\n')),
            "resource,capacity_gb_s,start_us,end_us,bytes,utilization");
  EXPECT_EQ(first_row.substr(0, first_row.find(',', first_row.find(',') + 1)),
            "node 0 nic tx,10.000");
  EXPECT_EQ(first_row.substr(first_row.rfind(',', first_row.rfind(',') - 1)), ",4096,1.0000");
  // Where the time went in the summary JSON (issue 28 item 6): the busiest links, the same four
  // of 8192 bytes at 10 GB/s; exposed communication per kind, mean device: the pipeline sends
  // block their device, 2 of 0.4096 us each on either device: pp 0.0008192 ms, nothing else.
  const nlohmann::json j = summaryJson(sim, kDefaultMemoryHeadroom, &usage);
  ASSERT_EQ(j["links"]["busiest"].size(), 4u);
  for (const nlohmann::json& l : j["links"]["busiest"]) {
    EXPECT_NEAR(l["bytes"].get<double>(), 8192, 1e-6);
    EXPECT_NEAR(l["capacity_gb_s"].get<double>(), 10, 1e-9);
    EXPECT_NEAR(l["utilization"].get<double>(), 8192 / (1e4 * sim.timeline.iteration_us), 1e-12);
  }
  EXPECT_NEAR(j["exposed_comm_ms"]["pp"].get<double>(), 2 * 0.4096 / 1e3, 1e-12);
  for (const char* kind : {"tp", "cp", "ep", "dp", "zero"}) {
    EXPECT_EQ(j["exposed_comm_ms"][kind].get<double>(), 0) << kind;
  }
}

// The sends-only plan of the LinkUsage tests below, simulated: 1 M, `pp` stages, `dp` replicas,
// m micro-batches of one, one GPU per node (10 GB/s NICs), every op 1 us, the 4096-byte sends
// 0.4096 us (each fills its NIC); with `buckets`, DP overlap in 40,000-byte buckets.
Simulation simulateSends(int pp, int dp, int m, bool buckets) {
  Strategy strategy = Strategy::of(1, pp, dp, 1, m);
  strategy.dp_overlap = buckets;
  strategy.dp_bucket_bytes = 40000;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(1, 0, test::kSlowLinks), strategy);
  std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
  const PipelineClass& pipeline = plan.pipelines[0];
  for (size_t l = 0; l < pipeline.forward_p2p.size(); ++l) {
    for (int e : {pipeline.forward_p2p[l], pipeline.backward_p2p[l]}) {
      EXPECT_EQ(plan.events[e].event.message_bytes, 4096);
      costs[e].time_us = 4096 / 1e4;
    }
  }
  return simulate(plan, costs);
}

// linkUsage records flows that never meet on a resource without shareLinks' event loop (each
// alone at its demand): the loads must be shareLinks' own, bit for bit, and so must they where
// flows meet (shareLinks then decides). One GPU per node (10 GB/s NICs), every op 1 us, 4096-byte
// sends of 0.4096 us (each fills its NIC). 1M4P1D, m = 8, DAPPLE: a send holds its device and
// the sends into a device never overlap, so no two flows meet. 1M4P2D with DP overlap and small
// buckets: a stage's buckets leave during its backward tasks, beside their sends on its NIC.
TEST(LinkUsage, LoadsAreShareLinksOwnWhetherFlowsMeetOrNot) {
  for (const bool buckets : {false, true}) {
    SCOPED_TRACE(buckets);
    const Simulation sim = simulateSends(4, buckets ? 2 : 1, buckets ? 16 : 8, buckets);
    const LinkMap map = linkMap(sim.plan);
    const TimelineFlows flows =
        timelineFlows(sim.plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
    // Whether two flows overlap in time on one resource, pair by pair.
    bool met = false;
    for (size_t f = 0; f < flows.size(); ++f) {
      for (size_t g = f + 1; g < flows.size(); ++g) {
        const SharedFlow &a = flows.flow(f), &b = flows.flow(g);
        if (a.duration_us <= 0 || b.duration_us <= 0) continue;
        const bool overlap =
            a.start_us < b.start_us + b.duration_us && b.start_us < a.start_us + a.duration_us;
        for (const LinkUse& u : a.uses) {
          for (const LinkUse& w : b.uses) met = met || (overlap && u.resource == w.resource);
        }
      }
    }
    EXPECT_EQ(met, buckets);
    const SharingResult want = shareLinks(flows.list, map.capacities(), /*record_load=*/true);
    const LinkUsage usage = linkUsage(sim);
    size_t link = 0;
    for (size_t r = 0; r < want.load.size(); ++r) {
      if (want.load[r].empty()) continue;
      ASSERT_LT(link, usage.links.size());
      const LinkLoad& got = usage.links[link++];
      EXPECT_EQ(got.name, linkName(sim.plan.cluster.topology, map.resources[r]));
      EXPECT_EQ(got.capacity_bytes_per_us, want.capacity_bytes_per_us[r]);
      ASSERT_EQ(got.segments.size(), want.load[r].size()) << got.name;
      for (size_t i = 0; i < got.segments.size(); ++i) {
        EXPECT_EQ(got.segments[i].start_us, want.load[r][i].start_us) << got.name << " " << i;
        EXPECT_EQ(got.segments[i].end_us, want.load[r][i].end_us) << got.name << " " << i;
        EXPECT_EQ(got.segments[i].bytes_per_us, want.load[r][i].bytes_per_us) << got.name;
      }
    }
    EXPECT_EQ(link, usage.links.size());
    // Without meetings each link carries its sends' bytes: node 0's NIC tx its 8 activations.
    if (!buckets) {
      EXPECT_NEAR(usage.links[0].bytes, 8 * 4096, 1e-6) << usage.links[0].name;
    }
  }
}

// The summary's link totals (LinkDetail::kTotals: each link's capacity and bytes, no segments)
// where no two flows meet come straight from the timeline's sends and collectives (no load
// segment listed); they must be the full report's numbers bit for bit, and where flows meet
// (shareLinks decides) too. Hand-traced first: 1M2P1D on two one-GPU nodes (10 GB/s NICs), m = 2,
// DAPPLE, every op 1 us, 4096-byte sends of 0.4096 us: each of the four NIC directions carries
// two sends alone, 8192 bytes at 1e4 bytes/us. Then the two plans of the test above: 1M4P1D,
// m = 8 (no meeting: the totals come without segments) and 1M4P2D with DP overlap and small
// buckets (buckets meet sends on a NIC: the totals are shareLinks' sums).
TEST(LinkUsage, TotalsAreTheFullReportsWhetherFlowsMeetOrNot) {
  struct Case {
    int pp, dp, m;
    bool buckets;
  };
  for (const Case c : {Case{2, 1, 2, false}, Case{4, 1, 8, false}, Case{4, 2, 16, true}}) {
    SCOPED_TRACE(fmt::format("1M{}P{}D m={}", c.pp, c.dp, c.m));
    const Simulation sim = simulateSends(c.pp, c.dp, c.m, c.buckets);
    const LinkUsage full = linkUsage(sim, LinkDetail::kSegments);
    const LinkUsage totals = linkUsage(sim, LinkDetail::kTotals);
    EXPECT_EQ(totals.iteration_us, full.iteration_us);
    ASSERT_EQ(totals.links.size(), full.links.size());
    for (size_t i = 0; i < full.links.size(); ++i) {
      const LinkLoad &got = totals.links[i], &want = full.links[i];
      EXPECT_EQ(got.name, want.name);
      EXPECT_EQ(got.capacity_bytes_per_us, want.capacity_bytes_per_us) << want.name;
      EXPECT_EQ(got.bytes, want.bytes) << want.name;  // bit for bit
      EXPECT_FALSE(want.segments.empty()) << want.name;
      // Without meetings the totals came without listing a segment; with them, shareLinks' own.
      EXPECT_EQ(got.segments.empty(), !c.buckets) << want.name;
    }
    if (c.pp == 2) {
      ASSERT_EQ(totals.links.size(), 4u);
      for (const LinkLoad& link : totals.links) {
        EXPECT_NEAR(link.bytes, 8192, 1e-6) << link.name;
        EXPECT_EQ(link.capacity_bytes_per_us, 1e4) << link.name;
      }
      EXPECT_EQ(totals.links[0].name, "node 0 nic tx");
    }
    if (c.pp == 4 && !c.buckets) {  // node 0's NIC out: its 8 activations, alone
      EXPECT_NEAR(totals.links[0].bytes, 8 * 4096, 1e-6) << totals.links[0].name;
    }
    // The summary reads the same numbers from either.
    EXPECT_EQ(summaryJson(sim, kDefaultMemoryHeadroom, &totals)["links"].dump(),
              summaryJson(sim, kDefaultMemoryHeadroom, &full)["links"].dump());
  }
}

// An in-task collective across nodes as a flow: tiny-moe on 1M1P2D with EP = 2 and one GPU per
// node (10 GB/s NICs: 1e4 bytes/us), so every MoE all-to-all crosses the node's NICs; DP overlap,
// small buckets. Costs: every all-to-all Ta, the first DP bucket Tb, everything else 0. An
// all-to-all of 32768 bytes over 2 ranks moves (n - 1) / n = 16384 bytes per rank, all to the
// other node (copies 1 x (2 - 1) / 1); Ta = 16384 / 1e4 fills the NIC, and so does Tb = 131328
// bytes (the 2-rank all-reduce's bus factor 1) / 1e4. F runs the 8 all-to-alls of 4 layers back
// to back: [0, 8 Ta]. B starts at 8 Ta; the first bucket is ready at once (after the final norm's
// gradient, free), beside B's first all-to-all, and B's 8 all-to-alls follow one another. Shared
// max-min: each all-to-all and the bucket at 5000 bytes/us while both run: the 8 all-to-alls
// (131072 bytes) take 16 Ta, the bucket has 131328 - 131072 = 256 bytes left, alone: 0.0256 us.
// So B's collectives end 8 Ta late (the task's stretch) and the bucket 8 Ta late too.
TEST(LinkFlows, AnExpertAllToAllBesideADpBucketTakesItsMaxMinShare) {
  Strategy s = test::strategy("1M1P2D", 1, 2);
  s.ep = 2;
  s.dp_overlap = true;
  s.dp_bucket_bytes = 40000;
  IterationPlan plan = buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-moe")),
                                          test::cluster(1, 0, test::kSlowLinks), s);
  const StagePlan& stage = plan.stages[0];
  const OpInstance& a2a = test::findOp(stage.forward, "moe_dispatch_alltoall", 0);
  const Event& a2a_event = test::eventOf(plan, a2a);
  ASSERT_EQ(a2a_event.message_bytes, 32768);
  ASSERT_EQ(a2a_event.placement.nodes, 2);
  ASSERT_GE(stage.dp_buckets.size(), 2u);
  const int bucket = stage.dp_buckets[0].event;
  ASSERT_EQ(plan.events[bucket].event.message_bytes, 131328);
  const double ta = 16384 / 1e4, tb = 131328 / 1e4;
  std::vector<EventCost> costs(plan.events.size(), EventCost{0.0});
  costs[a2a.event].time_us = ta;
  costs[bucket].time_us = tb;
  int all_to_alls = 0;
  for (const OpInstance& op : stage.backward) all_to_alls += op.event == a2a.event;
  ASSERT_EQ(all_to_alls, 8);

  plan.cluster.topology.link_sharing = false;
  const Simulation alone = simulate(plan, costs);
  const StageTimeline& a = alone.timeline.pipelines[0].stages[0];
  ASSERT_EQ(a.tasks.size(), 2u);
  EXPECT_NEAR(a.tasks[1].run.start_us, 8 * ta, 1e-9);
  EXPECT_NEAR(a.tasks[1].run.duration(), 8 * ta, 1e-9);
  EXPECT_NEAR(a.grad_sync[0].start_us, 8 * ta, 1e-9);
  EXPECT_NEAR(a.grad_sync[0].duration(), tb, 1e-9);

  plan.cluster.topology.link_sharing = true;
  const Simulation shared = simulate(plan, costs);
  const StageTimeline& b = shared.timeline.pipelines[0].stages[0];
  EXPECT_NEAR(b.tasks[0].run.duration(), 8 * ta, 1e-9);  // F overlaps nothing
  EXPECT_NEAR(b.tasks[1].run.duration(), 16 * ta, 1e-9);
  EXPECT_NEAR(b.grad_sync[0].end_us, 8 * ta + 16 * ta + 256 / 1e4, 1e-9);
  // The stretch counts as EP communication, all of it exposed (the mean device is this one).
  EXPECT_NEAR(shared.summary.mean_device.ep_comm_us - alone.summary.mean_device.ep_comm_us, 8 * ta,
              1e-9);
  // Where the time went (item 6): the node's NICs carried the 16 all-to-alls (F's and B's, 16384
  // bytes each) and the bucket's 131328 bytes; the buckets of no time are no flows.
  const LinkUsage usage = linkUsage(shared);
  ASSERT_FALSE(usage.links.empty());
  EXPECT_EQ(usage.links[0].name, "node 0 nic tx");
  EXPECT_NEAR(usage.links[0].bytes, 16 * 16384 + 131328, 1e-6);
  // The summary's totals (flows meet here, and inside tasks): the same, bit for bit.
  const LinkUsage totals = linkUsage(shared, LinkDetail::kTotals);
  ASSERT_EQ(totals.links.size(), usage.links.size());
  EXPECT_EQ(totals.links[0].name, "node 0 nic tx");
  EXPECT_EQ(totals.links[0].bytes, usage.links[0].bytes);
  EXPECT_EQ(totals.links[0].capacity_bytes_per_us, usage.links[0].capacity_bytes_per_us);
  // Unshared (--link-sharing off), each flow at its own rate: the same bytes.
  const LinkUsage unshared = linkUsage(alone);
  ASSERT_FALSE(unshared.links.empty());
  ASSERT_EQ(unshared.links[0].name, "node 0 nic tx");
  EXPECT_NEAR(unshared.links[0].bytes, 16 * 16384 + 131328, 1e-6);
  // Their loads add up where they overlap: B's all-to-alls and the bucket, 1e4 bytes/us each, over
  // [8 Ta, 16 Ta] (twice the NIC: a utilisation above 1 says so); alone before and after.
  double doubled_us = 0;
  for (const LoadSegment& seg : unshared.links[0].segments) {
    // (Back-to-back all-to-alls may overlap by a rounding sliver, where three loads add up.)
    if (seg.end_us - seg.start_us < 1e-9) continue;
    EXPECT_LE(seg.bytes_per_us, 2e4 * (1 + 1e-12));
    EXPECT_GE(seg.bytes_per_us, 1e4 * (1 - 1e-12));
    if (seg.bytes_per_us > 1.5e4) doubled_us += seg.end_us - seg.start_us;
  }
  EXPECT_NEAR(doubled_us, 8 * ta, 1e-9);
}

// A DualPipeV fused task's all-to-alls as flows (link_flows.h): tiny-moe (one MoE layer per
// virtual stage), 1M2P2D with EP = 2, one GPU per node (10 GB/s NICs: c = 1e4 bytes/us), m = 4.
// Every all-to-all moves 16384 bytes per rank and costs Ta = 16384 / c (it fills the NIC); every
// send moves 16384 bytes in 4 Ta (demand c/4); each stage's flash attention, forward and
// backward, costs k Ta, everything else 0. A fused [F B W] then has compute 2k Ta and all-to-all
// 4 Ta (two per member), run max(2k, 4) Ta, its all-to-alls back to back from its start; a send
// at c/4 never reaches its fair share beside one all-to-all (c/2), so it keeps its time and the
// all-to-all gets the rest. Device 1 (stages 1 and 2) sits on node 2.
//   k = 1.5 (communication-bound, slack 0): device 1's [F3b B1a W1a] runs [49, 53] Ta alone (the
//   schedule, asserted below), its last all-to-all [52, 53]. At 52.5 device 0's gradient send
//   (B2b's, to stage 2) enters node 2's rx: the all-to-all gets 3c/4, so by 53 it has done
//   0.5 + 0.375 = 0.875 Ta. At 53 the fused task's own two sends leave on node 2's tx: c/2 for
//   the all-to-all, its last 0.125 Ta take 0.25: it ends at 53.25. The run grows by 0.25 Ta.
//   k = 2.5 (compute-bound, slack 1 Ta): device 1's [F3a B1b W1b] runs [52, 57] Ta alone; the two
//   sends of its predecessor are on node 2's tx until 52.5, so its first all-to-all runs at c/2
//   for 0.5 Ta (0.25 done) and ends at 53.25: the chain is 0.25 Ta late, inside the compute's
//   1 Ta of slack: the run keeps its 5 Ta.
TEST(LinkFlows, AFusedTaskIsStretchedOnlyWhereItsAllToAllsOutlastItsCompute) {
  Strategy s = test::strategy("1M2P2D", 1, 8);
  s.ep = 2;
  s.schedule = Schedule::kDualPipeV;
  IterationPlan plan = buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-moe")),
                                          test::cluster(1, 0, test::kSlowLinks), s);
  const double ta = 16384 / 1e4;
  auto costsAt = [&](double k) {
    std::vector<EventCost> costs(plan.events.size(), EventCost{0.0});
    for (size_t e = 0; e < costs.size(); ++e) {
      const Event& ev = plan.events[static_cast<int>(e)].event;
      if (ev.kind == EventKind::kAllToAll) {
        EXPECT_EQ(ev.message_bytes, 32768);  // (n - 1) / n of it leaves the rank
        EXPECT_EQ(ev.placement.nodes, 2);
        costs[e].time_us = ta;
      }
      if (ev.kind == EventKind::kP2P) {
        EXPECT_EQ(ev.message_bytes, 16384);
        costs[e].time_us = 4 * ta;
      }
    }
    for (const StagePlan& stage : plan.stages) {
      costs[test::findOp(stage.forward, "flash_attention").event].time_us = k * ta;
      costs[test::findOp(stage.backward, "flash_attention_bwd").event].time_us = k * ta;
    }
    return costs;
  };
  auto nodeOf = [](const Simulation& sim, int device, Phase phase, int micro_batch, int chunk) {
    const StageTimeline& st = sim.timeline.pipelines[0].stages[device];
    for (size_t i = 0; i < st.tasks.size(); ++i) {
      const NodeTask& at = sim.timeline.graph.nodes[st.node(i)].task;
      if (at.phase == phase && at.micro_batch == micro_batch && at.chunk == chunk) {
        return st.node(i);
      }
    }
    ADD_FAILURE() << "no such task";
    return -1;
  };
  auto task = [&](const Simulation& sim, int device, Phase phase, int micro_batch, int chunk) {
    const int id = nodeOf(sim, device, phase, micro_batch, chunk);
    return id < 0 ? TaskTiming{}
                  : sim.timeline.pipelines[0].stages[device].tasks[sim.timeline.graph.positionOf(id)];
  };
  {
    const std::vector<EventCost> costs = costsAt(1.5);
    plan.cluster.topology.link_sharing = false;
    const Simulation alone = simulate(plan, costs);
    const TaskTiming fused = task(alone, 1, Phase::kForward, 3, 1);
    ASSERT_EQ(alone.timeline.graph.nodes[nodeOf(alone, 1, Phase::kForward, 3, 1)].fused_size, 3);
    EXPECT_NEAR(fused.run.start_us, 49 * ta, 1e-9);
    EXPECT_NEAR(fused.run.end_us, 53 * ta, 1e-9);
    EXPECT_NEAR(fused.send().start_us, 53 * ta, 1e-9);
    EXPECT_NEAR(task(alone, 0, Phase::kBackward, 2, 1).send().start_us, 52.5 * ta, 1e-9);
    plan.cluster.topology.link_sharing = true;
    const Simulation shared = simulate(plan, costs);
    EXPECT_NEAR(task(shared, 1, Phase::kForward, 3, 1).run.duration(), 4.25 * ta, 1e-9);
  }
  {
    const std::vector<EventCost> costs = costsAt(2.5);
    plan.cluster.topology.link_sharing = false;
    const Simulation alone = simulate(plan, costs);
    const TaskTiming fused = task(alone, 1, Phase::kForward, 3, 0);
    ASSERT_EQ(alone.timeline.graph.nodes[nodeOf(alone, 1, Phase::kForward, 3, 0)].fused_size, 3);
    EXPECT_NEAR(fused.run.start_us, 52 * ta, 1e-9);
    EXPECT_NEAR(fused.run.end_us, 57 * ta, 1e-9);
    const TaskTiming before = task(alone, 1, Phase::kForward, 2, 1);  // [F2b B0a W0a]
    EXPECT_NEAR(before.send().end_us, 52.5 * ta, 1e-9);
    // The flows: the four all-to-alls back to back from the run's start, one chain, with the
    // compute's slack; shared, the chain ends 0.25 Ta late.
    const LinkMap map = linkMap(plan);
    const TimelineFlows flows =
        timelineFlows(plan, alone.costs, alone.offsets, alone.input, alone.timeline, map);
    const SharingResult ends = shareLinks(flows.list, map.capacities());
    std::vector<size_t> chain;
    for (size_t i = 0; i < flows.size(); ++i) {
      const TimelineFlows::Origin& o = flows.origin(i);
      if (o.stage == 1 && o.kind == FlowKind::kEp && flows.flow(i).start_us >= 52 * ta - 1e-9 &&
          flows.flow(i).start_us < 57 * ta - 1e-9) {
        chain.push_back(i);
      }
    }
    ASSERT_EQ(chain.size(), 4u);
    for (size_t j = 0; j < 4; ++j) {
      const SharedFlow& f = flows.flow(chain[j]);
      EXPECT_NEAR(f.start_us, (52 + j) * ta, 1e-9) << j;
      EXPECT_NEAR(flows.origin(chain[j]).slack_us, ta, 1e-9) << j;
      EXPECT_EQ(f.after, j == 0 ? -1 : static_cast<int>(chain[j - 1])) << j;
      EXPECT_NEAR(ends.end_us[chain[j]], (53.25 + j) * ta, 1e-9) << j;
    }
    plan.cluster.topology.link_sharing = true;
    const Simulation shared = simulate(plan, costs);
    EXPECT_NEAR(task(shared, 1, Phase::kForward, 3, 0).run.duration(), 5 * ta, 1e-9);
  }
}

}  // namespace
}  // namespace evsim

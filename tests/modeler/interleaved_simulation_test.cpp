// simulate(), the per-rank events and the memory model on an interleaved plan of a tiny GPT:
// 4 blocks, 1M2P1D, v = 2, so each of the 4 chunks holds one block; device 0 runs chunks 0 and 2
// (blocks 0 and 2, plus the embedding), device 1 chunks 1 and 3 (blocks 1 and 3, plus the head).
// Expected numbers are worked out by hand next to each assertion.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "plan/iteration_plan.h"
#include "modeler/device_events.h"
#include "modeler/memory_model.h"
#include "modeler/simulation.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// h = 64, a = 4, f = 256, s = 32, V = 512, fp16, on one node of 8 GPUs with 1 GiB each.
IterationPlan plan(Schedule schedule, int v, int64_t global_batch) {
  Strategy s;
  s.tp = 1;
  s.pp = 2;
  s.dp = 1;
  s.micro_batch = 1;
  s.global_batch = global_batch;
  s.schedule = schedule;
  s.virtual_stages = v;
  return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                            test::cluster(8, 1, {100, 2, 10, 5, /*memory_gib=*/1}), s);
}

// 1 us for events only transformer-block ops use, 0 for the rest (shared with embedding, head or
// optimizer, and communication): a block's forward is then f = 9 us and its backward b = 15 us
// (simulation_test.cpp, BalancedPipelineClosedForm, counts the ops).
std::vector<EventCost> blockOnlyOnes(const IterationPlan& p) {
  std::set<int> in_block, outside;
  for (const StagePlan& s : p.stages) {
    for (const OpList* ops : {&s.forward, &s.backward, &s.optimizer}) {
      for (const OpInstance& op : *ops) (op.layer >= 0 ? in_block : outside).insert(op.event);
    }
  }
  std::vector<EventCost> out;
  for (int e = 0; e < p.events.size(); ++e) {
    out.push_back(
        EventCost{in_block.count(e) && !outside.count(e) ? 1.0 : 0.0, Provenance::kMeasured});
  }
  return out;
}

// m = 4, chunk costs f' = 9, b' = 15: iteration (m*v + P - 1)(f' + b') = (8 + 1) * 24 = 216 us,
// each device busy m*v*24 = 192 us, bubble 24/216 = 1/9. DAPPLE on the same 4 blocks (2 per
// stage, f = 18, b = 30): (m + P - 1)(f + b) = 5 * 48 = 240 us.
TEST(InterleavedSimulation, BalancedChunksClosedForm) {
  Simulation dapple =
      simulate(plan(Schedule::kDapple, 1, 4), blockOnlyOnes(plan(Schedule::kDapple, 1, 4)));
  EXPECT_DOUBLE_EQ(dapple.summary.iteration_us, 240);

  IterationPlan p = plan(Schedule::kInterleaved, 2, 4);
  ASSERT_EQ(p.virtualStages(), 4);
  for (const StagePlan& s : p.stages) ASSERT_EQ(s.num_layers, 1);
  std::vector<EventCost> c = blockOnlyOnes(p);
  Simulation sim = simulate(std::move(p), std::move(c));
  const SimulationSummary& sum = sim.summary;
  EXPECT_DOUBLE_EQ(sum.iteration_us, 216);
  EXPECT_DOUBLE_EQ(sum.bubble_fraction, 1.0 / 9);
  ASSERT_EQ(sum.stages.size(), 2u);  // per device stage
  for (const StageSummary& st : sum.stages) {
    EXPECT_EQ(st.num_layers, 2);
    EXPECT_DOUBLE_EQ(st.device.compute_us, 192);
    EXPECT_DOUBLE_EQ(st.device.idle_us, 24);
    EXPECT_DOUBLE_EQ(st.device.bubble_fraction, 1.0 / 9);
  }
  // Device 0 holds up to P*v + P - 1 = 5 chunk activations, device 1 (w = 2, then pairs) 3.
  EXPECT_EQ(sum.stages[0].peak_activations, 5);
  EXPECT_EQ(sum.stages[1].peak_activations, 3);
}

// Per-rank events of rank 1 (device stage 1): chunk 0 is block 1, chunk 1 block 3 and the head.
// Sends: forwards of chunk 0 (VS1 -> VS2) and backwards of both chunks (VS3 -> VS2, VS1 -> VS0):
// 4 + 8 = 12; 2 Adam steps (one per chunk), chunk 1's first.
TEST(InterleavedSimulation, RankEventsCarryTheirChunksLayers) {
  IterationPlan p = plan(Schedule::kInterleaved, 2, 4);
  std::vector<EventCost> c = blockOnlyOnes(p);
  Simulation sim = simulate(std::move(p), std::move(c));
  std::map<int, std::set<int>> layers_by_chunk;
  int sends = 0, activation_sends = 0, adam = 0;
  std::vector<int> adam_chunks;
  forEachDeviceEvent(sim, 1, [&](const DeviceEvent& e) {
    if (e.micro_batch >= 0 && e.stream != Stream::kPpComm) layers_by_chunk[e.chunk].insert(e.layer);
    if (e.stream == Stream::kPpComm) {
      ++sends;
      activation_sends += e.phase == Phase::kForward;
      if (e.phase == Phase::kForward) {
        EXPECT_EQ(e.chunk, 0);
      }
    }
    if (e.phase == Phase::kOptimizer) {
      ++adam;
      adam_chunks.push_back(e.chunk);
    }
  });
  EXPECT_EQ(layers_by_chunk[0], (std::set<int>{1}));
  EXPECT_EQ(layers_by_chunk[1], (std::set<int>{3, kHeadLayer}));
  EXPECT_EQ(sends, 12);
  EXPECT_EQ(activation_sends, 4);
  EXPECT_EQ(adam, 2);
  EXPECT_EQ(adam_chunks, (std::vector<int>{1, 0}));
}

// Memory per device stage (t = 1, e = 2, s*b*h = 2048). Per micro-batch: a block 34 * 2048 +
// 5*a*s^2*b = 69,632 + 20,480 = 90,112; embedding extras 8*s*b + 2*2048 + 2048 = 6,400; head
// extras 2*2*2048 + 4*s*b*V = 8,192 + 65,536 = 73,728. Chunks: device 0 c0 = 96,512, c1 = 90,112;
// device 1 c0 = 90,112, c1 = 163,840. Held (c0, c1) along device 0's order (P=2, v=2, m=4:
// F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 ...): peak at (4, 1) after F3c0 = 386,048 + 90,112 = 476,160
// (more than (3, 2) = 469,760); 5 chunk activations at most. Device 1 (F0c0 F1c0 F0c1 B0c1 ...):
// (2, 1) = 180,224 + 163,840 = 344,064 beats (3, 0) = 270,336; 3 at most.
// Parameters: block 49,984; embedding V*h + s*h = 34,816; head 2h + V*h (P > 1: own LM head copy)
// = 32,896. Device 0: 2 * 49,984 + 34,816 = 134,784; device 1: 2 * 49,984 + 32,896 = 132,864.
TEST(InterleavedMemory, PeakOverTheDevicesTaskOrderByHand) {
  MemoryEstimate mem = estimateMemory(plan(Schedule::kInterleaved, 2, 4), 0.0);
  ASSERT_EQ(mem.stages.size(), 2u);
  const StageMemory& d0 = mem.stages[0];
  const StageMemory& d1 = mem.stages[1];
  EXPECT_EQ(d0.parameters, 134'784);
  EXPECT_EQ(d1.parameters, 132'864);
  EXPECT_EQ(d0.model_state_bytes, 18 * 134'784);
  EXPECT_EQ(d0.activation_bytes_per_micro_batch, 96'512 + 90'112);
  EXPECT_EQ(d1.activation_bytes_per_micro_batch, 90'112 + 163'840);
  EXPECT_EQ(d0.in_flight, 5);
  EXPECT_EQ(d1.in_flight, 3);
  EXPECT_EQ(d0.activation_bytes, 476'160);
  EXPECT_EQ(d1.activation_bytes, 344'064);
  // What comes beside states and activations is memory_components_test's; here their sum.
  EXPECT_EQ(d0.model_state_bytes + d0.activation_bytes, 18 * 134'784 + 476'160);
  EXPECT_EQ(mem.peak_stage, 0);
  // DAPPLE on the same model holds 2 micro-batches of blocks 0-1 + embedding on device 0:
  // 2 * (2 * 90,112 + 6,400) = 373,248, less than interleaving's 476,160.
  MemoryEstimate dapple = estimateMemory(plan(Schedule::kDapple, 1, 4), 0.0);
  EXPECT_EQ(dapple.stages[0].activation_bytes, 373'248);
  EXPECT_EQ(dapple.stages[0].parameters, d0.parameters);  // the same blocks' worth of weights
}

}  // namespace
}  // namespace evsim

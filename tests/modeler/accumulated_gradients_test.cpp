// FSDP's fp32 accumulated gradients under pipeline parallelism, placed against the held
// activations along a device's order (modeler/accumulated_gradients.h), worked by hand.
#include "modeler/accumulated_gradients.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"
#include "modeler/memory_model.h"
#include "support/schedule_shapes.h"
#include "support/test_support.h"

namespace evsim {
namespace {

StageTask task(Phase phase, int micro_batch, int chunk = 0) {
  StageTask t;
  t.phase = phase;
  t.micro_batch = micro_batch;
  t.chunk = chunk;
  return t;
}

// The reference walk: each task of the order applied in turn, the first moment (after a task) with
// the largest held + accumulated sum kept. The product reduces the same walk to its states
// (accumulationStates); the hand-traced peaks below are worked on the walk and checked on both.
AccumulatedGradientPeak walkedPeak(const std::vector<StageTask>& order,
                                   const std::vector<int64_t>& chunk_bytes,
                                   const std::vector<int64_t>& chunk_held_bytes,
                                   const std::vector<int64_t>& chunk_gradient_bytes) {
  const size_t chunks = chunk_bytes.size();
  EVSIM_CHECK(chunk_held_bytes.size() == chunks && chunk_gradient_bytes.size() == chunks,
              "{} / {} / {} chunk sizes", chunks, chunk_held_bytes.size(),
              chunk_gradient_bytes.size());
  const bool split = std::any_of(order.begin(), order.end(),
                                 [](const StageTask& t) { return t.phase == Phase::kWeightGrad; });
  // The task whose first run allocates a chunk's gradients: W when split, else B.
  const Phase grads_at = split ? Phase::kWeightGrad : Phase::kBackward;
  std::vector<char> allocated(chunks, 0);
  // In 128 bits, clamped to int64 at the end, as peakActivations does.
  __int128 held = 0, grads = 0, best = -1;
  int in_flight = 0;
  AccumulatedGradientPeak peak;
  auto clamp = [](__int128 x) {
    return static_cast<int64_t>(std::min<__int128>(x, std::numeric_limits<int64_t>::max()));
  };
  for (const StageTask& t : order) {
    EVSIM_CHECK(t.chunk >= 0 && static_cast<size_t>(t.chunk) < chunks, "chunk {} of {}", t.chunk,
                chunks);
    const size_t c = static_cast<size_t>(t.chunk);
    const int64_t kept = split ? chunk_held_bytes[c] : 0;
    switch (t.phase) {
      case Phase::kForward:
        held += chunk_bytes[c];
        ++in_flight;
        break;
      case Phase::kBackward:
        held += kept - chunk_bytes[c];
        if (!split) --in_flight;
        break;
      default:
        held -= kept;
        --in_flight;
        break;
    }
    if (t.phase == grads_at && !allocated[c]) {
      allocated[c] = 1;
      grads += chunk_gradient_bytes[c];
    }
    if (held + grads > best) {
      best = held + grads;
      peak.activation_bytes = clamp(held);
      peak.gradient_bytes = clamp(grads);
      peak.in_flight = in_flight;
    }
  }
  return peak;
}

// The walk's peak, after checking that the product's states give the same bytes and in-flight.
AccumulatedGradientPeak peakOf(const std::vector<StageTask>& order,
                               const std::vector<int64_t>& chunk_bytes,
                               const std::vector<int64_t>& chunk_held_bytes,
                               const std::vector<int64_t>& chunk_gradient_bytes) {
  const AccumulatedGradientPeak walk =
      walkedPeak(order, chunk_bytes, chunk_held_bytes, chunk_gradient_bytes);
  const AccumulatedGradientPeak fast = peakWithAccumulatedGradients(
      accumulationStates(order, static_cast<int>(chunk_bytes.size())), chunk_bytes,
      chunk_held_bytes, chunk_gradient_bytes);
  EXPECT_EQ(fast.activation_bytes, walk.activation_bytes);
  EXPECT_EQ(fast.gradient_bytes, walk.gradient_bytes);
  EXPECT_EQ(fast.in_flight, walk.in_flight);
  return walk;
}

TEST(AccumulatedGradients, GradientsAppearAtTheFirstBackward) {
  // 1F1B's first stage with m = P = 2: F0 F1 B0 B1, 10 bytes a micro-batch. Held after each task:
  // 10, 20, 10, 0; gradients (25) from B0 on: sums 10, 20, 35, 25. The peak is after B0 with one
  // micro-batch held, not the held peak (20) plus the gradients (45).
  const std::vector<StageTask> order{task(Phase::kForward, 0), task(Phase::kForward, 1),
                                     task(Phase::kBackward, 0), task(Phase::kBackward, 1)};
  AccumulatedGradientPeak p = peakOf(order, {10}, {0}, {25});
  EXPECT_EQ(p.activation_bytes, 10);
  EXPECT_EQ(p.in_flight, 1);
  EXPECT_EQ(p.gradient_bytes, 25);
  EXPECT_EQ(p.total(), 35);
  // Gradients of 5: after F1 20 beats after B0's 15; the peak is the held one, no gradients yet.
  p = peakOf(order, {10}, {0}, {5});
  EXPECT_EQ(p.activation_bytes, 20);
  EXPECT_EQ(p.in_flight, 2);
  EXPECT_EQ(p.gradient_bytes, 0);
}

TEST(AccumulatedGradients, EachChunkAtItsOwnFirstBackward) {
  // Two chunks, all forwards first (interleaved with m V <= its warm-up): F(c0) F(c1) B(c1)
  // B(c0), held 4 and 6, gradients 20 and 30. Sums after each task: 4, 10, 4 + 30 = 34, 0 + 50 =
  // 50: the peak is at the end, nothing held.
  const std::vector<StageTask> order{task(Phase::kForward, 0, 0), task(Phase::kForward, 0, 1),
                                     task(Phase::kBackward, 0, 1), task(Phase::kBackward, 0, 0)};
  const AccumulatedGradientPeak p = peakOf(order, {4, 6}, {0, 0}, {20, 30});
  EXPECT_EQ(p.activation_bytes, 0);
  EXPECT_EQ(p.in_flight, 0);
  EXPECT_EQ(p.gradient_bytes, 50);
}

TEST(AccumulatedGradients, SplitBackwardAllocatesThemAtW) {
  // F B W, held 10, W's inputs 4: after F 10; after B 4 (no gradients: W computes them); after W
  // 0 + 25. A second micro-batch's W adds nothing: a chunk's gradients are allocated once.
  const std::vector<StageTask> order{task(Phase::kForward, 0), task(Phase::kBackward, 0),
                                     task(Phase::kWeightGrad, 0), task(Phase::kForward, 1),
                                     task(Phase::kBackward, 1), task(Phase::kWeightGrad, 1)};
  const AccumulatedGradientPeak p = peakOf(order, {10}, {4}, {25});
  // After the second F: 10 + 25 = 35, the first moment with the largest sum.
  EXPECT_EQ(p.activation_bytes, 10);
  EXPECT_EQ(p.in_flight, 1);
  EXPECT_EQ(p.gradient_bytes, 25);
}

TEST(AccumulatedGradients, FsdpPipelineStagePeak) {
  // FSDP, P = 2 (1F1B), D = 4, b = 2, m = 2; each stage one chunk of S = 100,000,000 parameters,
  // largest layer L = 20,000,000, 50,000,000 activation bytes a micro-batch. fp32 accumulated
  // gradients 4 S = 400,000,000.
  // Stage 0 (F0 F1 B0 B1): sums 50M, 100M, 50M + 400M, 400M: the peak after B0, 1 held.
  // Stage 1 (F0 B0 F1 B1): 50M, 400M, 450M, 400M: after F1, 1 held.
  // DP buffers: the gathered chunk 2 S, one group's bf16 gradients 2 L, the accumulated 4 S:
  // 200M + 40M + 400M = 640M (was the held peak 100M beside 6 S on stage 0).
  const ModelConfig model = test::model(1024, 16, 4096, 1024, 50257, 4, "bf16");
  Strategy s = Strategy::of(1, 2, 4, 2, 16, Schedule::kDapple);
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  ChunkMemoryInput chunk;
  chunk.parameters = 100000000;
  chunk.activation_bytes = 50000000;
  chunk.largest_layer_parameters = 20000000;
  const MemoryEstimate e = estimateMemory(model, s, 2, int64_t{80} << 30, {chunk, chunk}, 0.0);
  for (const StageMemory& stage : e.stages) {
    EXPECT_EQ(stage.activation_bytes, 50000000) << stage.stage;
    EXPECT_EQ(stage.in_flight, 1) << stage.stage;
    EXPECT_EQ(stage.dp_buffer_bytes, 640000000) << stage.stage;
  }
  // Megatron's accounting of the same chunks is unchanged: stage 0 holds both micro-batches.
  s.framework = Framework::kMegatron;
  const MemoryEstimate megatron =
      estimateMemory(model, s, 2, int64_t{80} << 30, {chunk, chunk}, 0.0);
  EXPECT_EQ(megatron.stages[0].activation_bytes, 100000000);
  EXPECT_EQ(megatron.stages[0].in_flight, 2);
}

TEST(AccumulatedGradients, AllGatherStreamPool) {
  // Blocks of B = 1,000 parameters and a root group (torchtitan's embedding + head) of R = 1,500
  // on the rank, bf16 gathers (g = e = 2). The copy-in stream's pool holds the root's output and
  // the first block's (2 R + 2 B = 5,000); later blocks' outputs fit the freed root's block.
  // Resharding after the forward without PP, at a block's backward one block's gather is in use:
  // 3,000 idle; at the loss (no gather yet), or without reshard, or under PP, all 5,000. A root
  // smaller than a block's output cannot serve the next block: R = 400, 800 + 2,000 + 2,000. No
  // root group (a PP middle stage): two blocks' outputs, 4,000. Megatron, or FSDP without a shard
  // group (zero 0): nothing. Float8 all-gather: blocks in 1 byte, the root in e: 3,000 + 1,000.
  const ModelConfig model = test::model(1024, 16, 4096, 1024, 50257, 4, "bf16");
  StageLayerFacts facts;
  facts.parameters = 5000;
  facts.largest_layer_parameters = 1000;
  facts.largest_block_parameters = 1000;
  facts.root_parameters = 1500;
  Strategy s = Strategy::of(1, 1, 4, 2, 64);
  s.framework = Framework::kFsdp;
  s.fsdp_wrap = FsdpWrap::kRoot;  // torchtitan 9dec370's root group (the separate groups:
                                  // memory_components_test)
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, true), 3000);
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 5000);
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 0, facts, true), 0);
  s.reshard = Reshard::kNever;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 5000);
  s.reshard = Reshard::kDefault;
  s.pp = 2;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 5000);
  facts.root_parameters = 400;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 4800);
  facts.root_parameters = 0;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 4000);
  ModelConfig fp8 = model;
  fp8.spec.fp8 = true;
  fp8.spec.fp8_recipe = Fp8Recipe::kTensorwise;
  ASSERT_TRUE(fp8.fp8WeightGather());
  facts.root_parameters = 1500;
  EXPECT_EQ(allGatherStreamPoolBytes(fp8, s, 3, facts, false), 4000);
  s.framework = Framework::kMegatron;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 0);
}

TEST(AccumulatedGradients, AllGatherStreamPoolPerModelPart) {
  // Interleaved PP: each of the rank's model parts is an FSDP root with its own streams, so its
  // own pool. B = 1,000, bf16 (as above). Two parts, one holding the root R = 1,500: its pool
  // 2 R + 2 B = 5,000, the other part's (no root) two blocks' outputs 4,000: 9,000. Three parts:
  // 5,000 + 2 x 4,000 = 13,000. A V layout's rank with both roots, 1,500 and 400: 5,000 + (800 +
  // 2,000 + 2,000) = 9,800. One part: 5,000 as before.
  const ModelConfig model = test::model(1024, 16, 4096, 1024, 50257, 4, "bf16");
  StageLayerFacts facts;
  facts.largest_block_parameters = 1000;
  facts.root_parameters = 1500;
  Strategy s = Strategy::of(1, 2, 4, 2, 64);
  s.framework = Framework::kFsdp;
  s.fsdp_wrap = FsdpWrap::kRoot;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 5000);
  facts.model_parts = 2;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 9000);
  facts.model_parts = 3;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 13000);
  facts.model_parts = 2;
  facts.other_root_parameters = 400;
  EXPECT_EQ(allGatherStreamPoolBytes(model, s, 3, facts, false), 9800);
}

TEST(AccumulatedGradients, DeviceSumsCountTheRanksPartsAndTheirRoots) {
  // 1M2P interleaved v = 2 (looped): device 0 holds chunks 0 and 2, device 1 chunks 1 and 3.
  // Chunk 0's root is the embedding (600), chunk 3's the head (700): each device has two parts
  // and one root; no second root.
  Strategy s = Strategy::of(1, 2, 4, 1, 32);
  s.framework = Framework::kFsdp;
  s.schedule = Schedule::kInterleaved;
  s.virtual_stages = 2;
  std::vector<ChunkMemoryInput> chunks(4);
  for (ChunkMemoryInput& c : chunks) c.parameters = 5000, c.activation_bytes = 100;
  chunks[0].root_parameters = 600;
  chunks[3].root_parameters = 700;
  const std::vector<DeviceChunkSums> sums = deviceChunkSums(s, 4, chunks);
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0].facts.model_parts, 2);
  EXPECT_EQ(sums[0].facts.root_parameters, 600);
  EXPECT_EQ(sums[0].facts.other_root_parameters, 0);
  EXPECT_EQ(sums[1].facts.root_parameters, 700);
  EXPECT_EQ(sums[1].facts.other_root_parameters, 0);
}

TEST(AccumulatedGradients, StreamPoolAddsToReservedOnly) {
  // FSDP, D = 4, no PP: one chunk of 1,000,000 parameters, blocks of 200,000, a root group of
  // 300,000, 50,000,000 activation bytes. T = 2,048 tokens, V = 50,304: the loss transient
  // 8 T V = 824,180,736 makes the loss's moment the peak (its DP buffers e R + g B = 600,000 +
  // 400,000; a block's moment, without it, e R + e H + 10 B = 2,900,000). The pool is idle there:
  // e R + g B = 1,000,000, in reserved, not in allocated: reserved = states + (1 + f) x dynamic
  // + 1,000,000 with f the default 0.10.
  const ModelConfig model = test::model(1024, 16, 4096, 1024, 50257, 4, "bf16");
  Strategy s = Strategy::of(1, 1, 4, 2, 64);
  s.framework = Framework::kFsdp;
  s.fsdp_wrap = FsdpWrap::kRoot;  // 9dec370's root group keeps the last block: e R + g B
  s.zero_stage = 3;
  ChunkMemoryInput chunk;
  chunk.parameters = 1000000;
  chunk.activation_bytes = 50000000;
  chunk.largest_layer_parameters = 200000;
  chunk.largest_block_parameters = 200000;
  chunk.root_parameters = 300000;
  chunk.head_gradient_parameters = 150000;
  const StageMemory m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.dp_buffer_bytes, 1000000);
  EXPECT_EQ(m.stream_pool_bytes, 1000000);
  const double dynamic = static_cast<double>(m.allocated_bytes - m.model_state_bytes);
  EXPECT_EQ(m.reserved_bytes,
            m.model_state_bytes + std::llround(dynamic * 1.10) + 1000000);
}

// The states' peak is the walk's, to the byte and the in-flight count, on every schedule (split
// backwards included) and on sizes that make different moments the peak: the walk is the
// independent reference (each task applied in turn), the states a frontier of it.
TEST(AccumulatedGradients, StatesGiveTheWalksPeakOnEverySchedule) {
  struct Sizes {
    std::vector<int64_t> bytes, held, grads;
  };
  int compared = 0;
  for (const test::ScheduleShape& shape : test::everyScheduleShape()) {
    const DeviceOrders orders =
        pipelineSchedule(shape.schedule).orders({shape.P, shape.v, shape.m});
    const size_t v = static_cast<size_t>(shape.v);
    // Gradients small (the held peak wins), large (a moment after the last first backward wins),
    // and uneven per chunk.
    std::vector<Sizes> sizes;
    for (int64_t g : {1, 7, 1000}) {
      Sizes z;
      for (size_t c = 0; c < v; ++c) {
        z.bytes.push_back(10 + 3 * static_cast<int64_t>(c));
        z.held.push_back(4 + static_cast<int64_t>(c));
        z.grads.push_back(g * static_cast<int64_t>(c + 1));
      }
      sizes.push_back(z);
    }
    for (const std::vector<StageTask>& order : orders) {
      const AccumulationStates states = accumulationStates(order, shape.v);
      for (const Sizes& z : sizes) {
        const AccumulatedGradientPeak walk =
            walkedPeak(order, z.bytes, z.held, z.grads);
        const AccumulatedGradientPeak fast =
            peakWithAccumulatedGradients(states, z.bytes, z.held, z.grads);
        EXPECT_EQ(fast.activation_bytes, walk.activation_bytes) << scheduleName(shape.schedule);
        EXPECT_EQ(fast.gradient_bytes, walk.gradient_bytes) << scheduleName(shape.schedule);
        EXPECT_EQ(fast.in_flight, walk.in_flight) << scheduleName(shape.schedule);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 3 * (3 + 4 + 2 + 4 + 3 + 4 + 3 + 4));
}

}  // namespace
}  // namespace evsim

// The plan of Megatron's interleaved 1F1B schedule: P*v model chunks (virtual stages), chunk k on
// device stage k % P as its chunk k / P, one P2P boundary per consecutive chunk pair (including the
// wrap from device stage P-1 back to 0), each chunk with its own optimizer and gradient sync.
// Counts follow the convention of plan/iteration_plan.h; expected numbers are worked by hand.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "plan/rank_layout.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::countOf;

// Tiny model: h=64, a=4, f=256, s=32, vocabulary 512.
ModelConfig tiny(int layers) { return test::model(64, 4, 256, 32, 512, layers); }

Strategy interleaved(const std::string& text, int64_t b, int64_t B, int v) {
  Strategy s = test::strategy(text, b, B);
  s.schedule = Schedule::kInterleaved;
  s.virtual_stages = v;
  return s;
}

Placement placement(int group, int nodes, int rpn) { return Placement{group, nodes, rpn}; }

TEST(InterleavedPlan, ChunksMapToDeviceStagesAndCoverEveryBlockOnce) {
  // 1M2P1D, v = 3: 6 chunks over 12 blocks. Chunk k on device k % 2 as its chunk k / 2.
  IterationPlan plan =
      buildIterationPlan(tiny(12), test::cluster(8), interleaved("1M2P1D", 1, 4, 3));
  ASSERT_EQ(plan.virtualStages(), 6);
  EXPECT_EQ(plan.deviceStages(), 2);
  EXPECT_EQ(plan.chunksPerDevice(), 3);
  int next = 0;
  for (int k = 0; k < 6; ++k) {
    const StagePlan& s = plan.stages[k];
    EXPECT_EQ(s.stage, k);
    EXPECT_EQ(s.device_stage, k % 2);
    EXPECT_EQ(s.chunk, k / 2);
    EXPECT_EQ(s.first_layer, next);
    EXPECT_GE(s.num_layers, 1);
    next += s.num_layers;
    EXPECT_EQ(s.has_embedding, k == 0);
    EXPECT_EQ(s.has_head, k == 5);
    EXPECT_EQ(s.activation_bytes_out, k < 5 ? 32 * 64 * 2 : 0);  // T*h fp16 to the next chunk
    EXPECT_EQ(s.optimizer.size(), 1u);                           // its own Adam step
    EXPECT_EQ(s.dp_allreduce, -1);                               // D = 1
    EXPECT_EQ(plan.pipelineLayout().virtualStage(k % 2, k / 2), k);
  }
  EXPECT_EQ(next, 12);
  EXPECT_EQ(plan.deviceChunks(0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(plan.deviceChunks(1), (std::vector<int>{1, 3, 5}));
  ASSERT_EQ(plan.pipelines.size(), 1u);
  EXPECT_EQ(plan.pipelines[0].forward_p2p.size(), 5u);  // P*v - 1 boundaries
  EXPECT_EQ(plan.pipelines[0].backward_p2p.size(), 5u);
}

TEST(InterleavedPlan, OneChunkPerDeviceIsTheDapplePlan) {
  IterationPlan plan =
      buildIterationPlan(tiny(4), test::cluster(8), test::strategy("1M2P1D", 1, 4));
  ASSERT_EQ(plan.virtualStages(), 2);
  EXPECT_EQ(plan.chunksPerDevice(), 1);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(plan.stages[k].device_stage, k);
    EXPECT_EQ(plan.stages[k].chunk, 0);
    EXPECT_EQ(plan.deviceChunks(k), (std::vector<int>{k}));
  }
}

TEST(InterleavedPlan, ChunkParametersFromTheFootprintAreTheBlocksSums) {
  // The closed-form tier sums a class's chunks from its footprint, without a cache look-up per
  // chunk. At M = 1 a block holds 49984 parameters (CountsByHand below): blocks 1 and 2 alone
  // hold twice that; with the embedding and the head, the chunks hold the plan's stages' sums.
  const ModelConfig model = tiny(4);
  const Strategy s = test::strategy("1M2P2D", 1, 8);
  PlanCache cache;
  const ModelFootprint& footprint = cachedFootprint(model, s, cache);
  EXPECT_EQ(chunkParameters(model, footprint, 1, 3, false, false), 2 * 49984);
  EXPECT_EQ(chunkParameters(model, s, 1, 3, false, false, &cache), 2 * 49984);
  const IterationPlan plan = buildIterationPlan(model, test::cluster(8), s);
  const std::vector<int> first = stageFirstLayers(model, s);
  ASSERT_EQ(plan.stages.size(), 2u);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(chunkParameters(model, footprint, 0, first[1], true, false), plan.stages[0].parameters);
  EXPECT_EQ(chunkParameters(model, footprint, first[1], 4, false, true), plan.stages[1].parameters);
}

TEST(InterleavedPlan, CountsByHand) {
  // 1M2P2D, b=1, B=8: m = 4, M*D = 2 devices per device stage, T = 32 tokens. 4 blocks on P*v = 4
  // chunks: one block each; chunk 0 adds the embedding, chunk 3 the head.
  ClusterConfig cluster = test::cluster(8);
  IterationPlan dapple = buildIterationPlan(tiny(4), cluster, test::strategy("1M2P2D", 1, 8));
  IterationPlan inter = buildIterationPlan(tiny(4), cluster, interleaved("1M2P2D", 1, 8, 2));
  ASSERT_EQ(inter.micro_batches, 4);
  for (const StagePlan& s : inter.stages) EXPECT_EQ(s.num_layers, 1);

  // Per-micro-batch compute runs the same ops on the same devices: counts are unchanged. QKV
  // forward (n = 3h = 192): 4 layers * m 4 * M*D 2 = 32 in both.
  EXPECT_EQ(countOf(dapple.events, "gemm m=32 n=192 k=64 layout=nt dtype=fp16"), 32);
  EXPECT_EQ(countOf(inter.events, "gemm m=32 n=192 k=64 layout=nt dtype=fp16"), 32);

  // P2P of T*h fp16 = 32*64*2 = 4096 B, every pair on the one node. Per boundary and direction
  // m*M*D = 8 transfers, counted twice (send + receive): 16. DAPPLE: 1 boundary * 2 directions
  // = 32; interleaved: P*v - 1 = 3 boundaries (0->1, 1->0 wrap, 0->1) * 2 directions = 96.
  const std::string p2p = "p2p bytes=4096 group=2 nodes=1 rpn=2 dtype=fp16";
  EXPECT_EQ(countOf(dapple.events, p2p), 32);
  EXPECT_EQ(countOf(inter.events, p2p), 96);

  // Chunks 1 and 2 hold one block each: 4h^2 + 3h + h + 2hf + f + h + 4h = 16384 + 192 + 64 +
  // 32768 + 256 + 64 + 256 = 49984 parameters. Their Adam steps share one event, run once per
  // device per chunk: 2 chunks * 2 devices = 4; their DP all-reduces (49984 * 2 = 99968 B over
  // D = 2) likewise 4.
  EXPECT_EQ(countOf(inter.events, "adam params=49984 dtype=fp32"), 4);
  EXPECT_EQ(countOf(inter.events, "allreduce bytes=99968 group=2 nodes=1 rpn=2 dtype=fp16"), 4);
  int64_t parameters = 0;
  for (const StagePlan& s : inter.stages) parameters += s.parameters;
  int64_t dapple_parameters = dapple.stages[0].parameters + dapple.stages[1].parameters;
  EXPECT_EQ(parameters, dapple_parameters);  // the same weights, split differently

  // Executions: 64 more P2P, and 4 chunks instead of 2 stages each run Adam and a DP all-reduce
  // on 2 devices: 4 more of each. 64 + 4 + 4 = 72.
  EXPECT_EQ(inter.op_executions, dapple.op_executions + 72);
}

TEST(InterleavedPlan, WrapBoundaryUsesThePlacementOfTheLastAndFirstDeviceStages) {
  // 1M4P1D on nodes of 2 GPUs: device stage s is rank s, on node s / 2. v = 2: 8 chunks, 7
  // boundaries between device stages 0-1 (intra), 1-2 (inter), 2-3 (intra), 3-0 (wrap: inter),
  // 0-1, 1-2, 2-3.
  IterationPlan plan =
      buildIterationPlan(tiny(8), test::cluster(2), interleaved("1M4P1D", 1, 4, 2));
  ASSERT_EQ(plan.pipelines.size(), 1u);
  const PipelineClass& p = plan.pipelines[0];
  ASSERT_EQ(p.forward_p2p.size(), 7u);
  const bool inter[] = {false, true, false, true, false, true, false};
  for (int k = 0; k < 7; ++k) {
    const Event& e = plan.events[p.forward_p2p[k]].event;
    EXPECT_EQ(e.placement, inter[k] ? placement(2, 2, 1) : placement(2, 1, 2)) << "boundary " << k;
    EXPECT_EQ(p.backward_p2p[k], p.forward_p2p[k]);
  }
}

TEST(RankLayoutStagePair, AnyTwoStagesWorstOverTpRanks) {
  // 2M3P1D on nodes of 3 GPUs: rank(tp, 0, pp) = tp + 2 pp; nodes 0,0,0 | 1,1,1 for ranks 0..5.
  // Stage 0 = ranks {0, 1} (node 0), stage 1 = {2, 3} (nodes 0, 1), stage 2 = {4, 5} (node 1).
  RankLayout layout(test::strategy("2M3P1D", 1, 1), 3);
  EXPECT_EQ(layout.stagePair(0, 0, 0, 1), placement(2, 1, 2));  // ranks 0, 2
  EXPECT_EQ(layout.stagePair(1, 0, 0, 1), placement(2, 2, 1));  // ranks 1, 3
  EXPECT_EQ(layout.worstStagePair(0, 0, 1), placement(2, 2, 1));
  EXPECT_EQ(layout.worstStagePair(0, 0, 1), layout.worstPipelinePair(0, 0));
  // The wrap 2 -> 0: ranks 4, 0 and 5, 1, both across nodes.
  EXPECT_EQ(layout.stagePair(0, 0, 2, 0), placement(2, 2, 1));
  EXPECT_EQ(layout.worstStagePair(0, 2, 0), placement(2, 2, 1));
  // 1 -> 2: ranks 2, 4 across nodes, ranks 3, 5 on node 1: the worst is across.
  EXPECT_EQ(layout.stagePair(1, 0, 1, 2), placement(2, 1, 2));
  EXPECT_EQ(layout.worstStagePair(0, 1, 2), placement(2, 2, 1));
  EXPECT_THROW(layout.stagePair(0, 0, 1, 1), Error);  // a stage does not send to itself
  EXPECT_THROW(layout.stagePair(0, 0, 0, 3), Error);
}

TEST(InterleavedPlan, EachChunkCarriesRecomputationSequenceParallelismAndZero) {
  // 2M2P2D, m = B/(b*D) = 2, v = 2: four chunks of one block each, selective recomputation,
  // sequence parallelism and ZeRO-1 together.
  Strategy s = interleaved("2M2P2D", 1, 4, 2);
  s.recompute = Recompute::kSelective;
  s.sequence_parallel = true;
  s.zero_stage = 1;
  IterationPlan plan = buildIterationPlan(tiny(4), test::cluster(8), s);
  ASSERT_EQ(plan.virtualStages(), 4);
  for (const StagePlan& chunk : plan.stages) {
    SCOPED_TRACE(chunk.stage);
    EXPECT_EQ(chunk.num_layers, 1);
    // ZeRO-1 per chunk: a gradient reduce-scatter and a parameter all-gather, no all-reduce.
    EXPECT_EQ(chunk.dp_allreduce, -1);
    ASSERT_GE(chunk.dp_reduce_scatter, 0);
    ASSERT_GE(chunk.dp_allgather, 0);
    EXPECT_EQ(plan.events[chunk.dp_reduce_scatter].event.kind, EventKind::kReduceScatter);
    EXPECT_EQ(plan.events[chunk.dp_allgather].event.kind, EventKind::kAllGather);
    // Selective recomputation: the attention core's 4 ops re-run in the chunk's one block.
    int recomputed = 0;
    for (const OpInstance& op : chunk.backward) recomputed += op.recompute ? 1 : 0;
    EXPECT_EQ(recomputed, 4);
  }
  // Sequence parallelism: the middle chunks hold only a block, whose TP collectives are
  // reduce-scatters and all-gathers, never all-reduces.
  for (int k : {1, 2}) {
    for (const OpList* ops : {&plan.stages[k].forward, &plan.stages[k].backward}) {
      for (const OpInstance& op : *ops) {
        if (op.stream != Stream::kTpComm) continue;
        EXPECT_NE(plan.events[op.event].event.kind, EventKind::kAllReduce) << op.name;
      }
    }
  }
}

}  // namespace
}  // namespace evsim

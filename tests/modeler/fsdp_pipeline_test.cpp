// FSDP under pipeline parallelism (issue 29): with PP, torchtitan turns reshard-after-forward off
// and PyTorch's pipelining keeps a chunk's parameters gathered and its gradients unsharded until
// its last micro-batch, so each chunk all-gathers its parameters once per step and reduce-scatters
// its fp32 gradients once, after its last backward (Strategy::fsdpSyncsOncePerStep,
// finish_plan.cpp), each unit's gather beside the chunk's first forward (FSDP2's pre-forward hooks).
// Without PP, or with --reshard-after-forward always, the per-layer gathers and
// reduce-scatters stay in every micro-batch's tasks. Numbers worked by hand in the comments.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// h = 64, 4 heads, f = 256, s = 32, V = 512, 2 blocks, bf16; P = 2 (one block per stage), D = 2,
// b = 1, B = 8: m = 4 micro-batches.
IterationPlan fsdpPlan(int pp, Reshard reshard) {
  const ModelConfig model = test::model(64, 4, 256, 32, 512, 2, "bf16");
  const ClusterConfig cluster = test::cluster(8);
  Strategy s = Strategy::of(1, pp, 2, 1, 8);
  s.zero_stage = 3;
  s.framework = Framework::kFsdp;
  s.reshard = reshard;
  return buildIterationPlan(model, cluster, s);
}

int count(const OpList& ops, std::string_view name) {
  int n = 0;
  for (const OpInstance& op : ops) n += op.name == name;
  return n;
}

TEST(FsdpPipeline, GathersAndReduceScattersOncePerStepPerChunk) {
  const IterationPlan p = fsdpPlan(2, Reshard::kDefault);
  ASSERT_EQ(p.micro_batches, 4);
  for (const StagePlan& st : p.stages) {
    // Nothing in the micro-batch tasks.
    EXPECT_EQ(count(st.forward, "zero3_param_allgather"), 0);
    EXPECT_EQ(count(st.backward, "zero3_param_allgather"), 0);
    EXPECT_EQ(count(st.backward, "zero3_grad_reduce_scatter"), 0);
    // One fp32 reduce-scatter (4 bytes per parameter) over the D = 2 group, run once per device:
    // count = M x C x D = 2.
    ASSERT_GE(st.dp_reduce_scatter, 0);
    const UniqueEvent& scatter = p.events[st.dp_reduce_scatter];
    EXPECT_EQ(scatter.event.message_bytes, 4 * st.parameters);
    EXPECT_EQ(scatter.event.dtype, DType::kFp32);
    EXPECT_EQ(scatter.count, 2);
    // The gathers are FSDP2's, one per fully_shard unit (the layer) before its first forward op,
    // not one after the optimizer step: 2 bytes per parameter, the units adding up to the chunk.
    EXPECT_EQ(st.dp_allgather, -1);
    ASSERT_EQ(st.param_buckets.size(), 2u);
    int64_t gathered = 0;
    for (const ParamGatherBucket& b : st.param_buckets) {
      EXPECT_EQ(p.events[b.event].event.message_bytes, b.bytes);
      gathered += b.bytes;
    }
    EXPECT_EQ(gathered, 2 * st.parameters);
  }
  // Stage 0's units in forward order: the embedding (V h + s h = 34,816 parameters) before op 0,
  // then block 0 (49,984) before the block's first op.
  const StagePlan& first = p.stages[0];
  EXPECT_EQ(first.param_buckets[0].bytes, 2 * 34'816);
  EXPECT_EQ(first.param_buckets[0].needed_before_op, 0);
  EXPECT_EQ(first.param_buckets[1].bytes, 2 * 49'984);
  EXPECT_EQ(first.forward[static_cast<size_t>(first.param_buckets[1].needed_before_op)].layer, 0);
  EXPECT_EQ(first.forward[static_cast<size_t>(first.param_buckets[1].needed_before_op) - 1].layer,
            kEmbeddingLayer);
  // Stage 1: block 1 (QKV + proj 4h^2 + 4h = 16,640, MLP 2hf + f + h = 33,088, norms 4h = 256:
  // 49,984) and the head (final norm 2h = 128, the untied-on-this-stage output layer V h =
  // 32,768): 82,880.
  EXPECT_EQ(p.stages[1].parameters, 49'984 + 128 + 32'768);
  // Stage 0: block 0 and the embedding (words V h = 32,768, learned positions s h = 2,048):
  // 84,800.
  EXPECT_EQ(p.stages[0].parameters, 49'984 + 32'768 + 2'048);
}

TEST(FsdpPipeline, RootWrappingGathersTheHeadFirstForTheChunksFirstOp) {
  // Stage 1 holds block 1 (49,984 parameters) and the head (final norm 128 + output 32,768 =
  // 32,896). Separate groups: block 1's gather first, needed by its first op, then the head's,
  // needed by the head's first op. Root wrapping: the head sits in the chunk's root, gathered in
  // the root's pre-forward before block 1's and waited for by the chunk's first op (op 0).
  const ModelConfig model = test::model(64, 4, 256, 32, 512, 2, "bf16");
  Strategy s = Strategy::of(1, 2, 2, 1, 8);
  s.zero_stage = 3;
  s.framework = Framework::kFsdp;
  for (const FsdpWrap wrap : {FsdpWrap::kSeparate, FsdpWrap::kRoot}) {
    s.fsdp_wrap = wrap;
    const StagePlan last = buildIterationPlan(model, test::cluster(8), s).stages[1];
    ASSERT_EQ(last.param_buckets.size(), 2u);
    const bool root = wrap == FsdpWrap::kRoot;
    const ParamGatherBucket& head = last.param_buckets[root ? 0 : 1];
    const ParamGatherBucket& block = last.param_buckets[root ? 1 : 0];
    EXPECT_EQ(head.bytes, 2 * 32'896);
    EXPECT_EQ(block.bytes, 2 * 49'984);
    EXPECT_EQ(last.forward[static_cast<size_t>(block.needed_before_op)].layer, 1);
    if (root) {
      EXPECT_EQ(head.needed_before_op, 0);
    } else {
      EXPECT_EQ(last.forward[static_cast<size_t>(head.needed_before_op)].layer, kHeadLayer);
    }
  }
}

TEST(FsdpPipeline, ReshardAlwaysOrNoPipelineKeepsPerMicroBatchTransfers) {
  // --reshard-after-forward always under PP: every micro-batch gathers before its forward and its
  // backward and reduce-scatters after it (stage 0: embedding and block 0, two layers).
  const IterationPlan always = fsdpPlan(2, Reshard::kAlways);
  EXPECT_EQ(count(always.stages[0].forward, "zero3_param_allgather"), 2);
  EXPECT_EQ(count(always.stages[0].backward, "zero3_param_allgather"), 2);
  EXPECT_EQ(count(always.stages[0].backward, "zero3_grad_reduce_scatter"), 2);
  EXPECT_EQ(always.stages[0].dp_allgather, -1);
  EXPECT_EQ(always.stages[0].dp_reduce_scatter, -1);
  // Without PP (the default reshards): the same per-unit transfers on the one stage, the tied
  // [embedding, norm, output] group and 2 blocks (FsdpWrap tests below).
  const IterationPlan flat = fsdpPlan(1, Reshard::kDefault);
  EXPECT_EQ(count(flat.stages[0].forward, "zero3_param_allgather"), 3);
  EXPECT_EQ(flat.stages[0].dp_allgather, -1);
}

TEST(FsdpPipeline, TimelineCostsTheTransfersOncePerStep) {
  // Every event free but the step's gathers and reduce-scatters, each costing 1 us per KB of its
  // bytes. Stage 0's first forward waits for its two units' gathers, back to back on its DP
  // stream: (69,632 + 99,968) / 1000 = 169.6 us; stage 1's first forward starts then and waits
  // for its own (block 1 99,968 + head 2 x 32,896 = 65,792): 165.76 us more, to 335.36. The free
  // micro-batches follow; each stage then reduce-scatters 4 bytes per parameter after its last
  // backward: stage 0 339.2 us (ending at 674.56), stage 1 331.52 (666.88). Per micro-batch, m =
  // 4 times as many would go; after the optimizer step (the earlier placement) the gathers of
  // both stages would overlap each other.
  IterationPlan p = fsdpPlan(2, Reshard::kDefault);
  std::vector<EventCost> costs(static_cast<size_t>(p.events.size()));
  for (const StagePlan& st : p.stages) {
    std::vector<int> events{st.dp_reduce_scatter};
    for (const ParamGatherBucket& b : st.param_buckets) events.push_back(b.event);
    for (int e : events) {
      costs[static_cast<size_t>(e)].time_us =
          static_cast<double>(p.events[e].event.message_bytes) / 1000;
    }
  }
  const Simulation sim = simulate(std::move(p), std::move(costs));
  EXPECT_NEAR(sim.summary.iteration_us, 674.56, 1e-6);
}

// FSDP2's groups beside the blocks (Strategy::fsdp_wrap) without PP, D = 2, the model above with
// its output layer untied (or tied): embedding E = 34,816 parameters, blocks 49,984 each, head
// H' = final norm 128 + output 32,768 = 32,896 (tied: the norm's 128). Gathers in bf16 (2 bytes a
// parameter), reduce-scatters in fp32 (4).
IterationPlan wrappedPlan(FsdpWrap wrap, Reshard reshard, bool untied) {
  ModelConfig model = test::model(64, 4, 256, 32, 512, 2, "bf16");
  model.spec.untied_output = untied;
  Strategy s = Strategy::of(1, 1, 2, 1, 8);
  s.zero_stage = 3;
  s.framework = Framework::kFsdp;
  s.reshard = reshard;
  s.fsdp_wrap = wrap;
  return buildIterationPlan(model, test::cluster(8), s);
}

// Bytes of each op named `name` in list order.
std::vector<int64_t> transferBytes(const IterationPlan& p, const OpList& ops,
                                   std::string_view name) {
  std::vector<int64_t> out;
  for (const OpInstance& op : ops) {
    if (op.name == name) out.push_back(p.events[op.event].event.message_bytes);
  }
  return out;
}

// One wrapping's transfers, in list order: the forward's gathers, the backward's gathers and
// reduce-scatters under the default resharding, and the backward's gathers under "always".
struct WrapCase {
  std::string_view name;
  FsdpWrap wrap;
  bool untied;
  std::vector<int64_t> forward_gathers, backward_gathers, backward_scatters, always_gathers;
};

void PrintTo(const WrapCase& c, std::ostream* os) { *os << c.name; }

class FsdpWrapTransfers : public testing::TestWithParam<WrapCase> {};

TEST_P(FsdpWrapTransfers, InListOrder) {
  const WrapCase& c = GetParam();
  const IterationPlan p = wrappedPlan(c.wrap, Reshard::kDefault, c.untied);
  const StagePlan& st = p.stages[0];
  EXPECT_EQ(transferBytes(p, st.forward, "zero3_param_allgather"), c.forward_gathers);
  EXPECT_EQ(transferBytes(p, st.backward, "zero3_param_allgather"), c.backward_gathers);
  EXPECT_EQ(transferBytes(p, st.backward, "zero3_grad_reduce_scatter"), c.backward_scatters);
  const IterationPlan always = wrappedPlan(c.wrap, Reshard::kAlways, c.untied);
  EXPECT_EQ(transferBytes(always, always.stages[0].backward, "zero3_param_allgather"),
            c.always_gathers);
}

INSTANTIATE_TEST_SUITE_P(
    FsdpWrap, FsdpWrapTransfers,
    testing::Values(
        // torchtitan since 2025-07 (the default), separate groups: forward gathers E, both
        // blocks, H'; the backward gathers the blocks and the embedding again (resharded after
        // the forward) but not the head ([norm, output] is resharded after the forward only under
        // "always", which gathers it again before its backward), and reduce-scatters each group
        // after its backward: the head's first, the embedding's last.
        WrapCase{"SeparateGroupsKeepTheHeadGatheredFromItsForwardToItsBackward",
                 FsdpWrap::kSeparate,
                 true,
                 {2 * 34'816, 2 * 49'984, 2 * 49'984, 2 * 32'896},
                 {2 * 49'984, 2 * 49'984, 2 * 34'816},
                 {4 * 32'896, 4 * 49'984, 4 * 49'984, 4 * 34'816},
                 {2 * 32'896, 2 * 49'984, 2 * 49'984, 2 * 34'816}},
        // torchtitan 9dec370: the root group (E + H' = 67,712) gathered once before the first
        // op, never again; the last block (block 1) kept gathered by the default policy, so the
        // backward gathers block 0 only; the root's gradients reduce-scattered once, last.
        // "always" reshards the last block too (the root group still never).
        WrapCase{"RootGroupIsGatheredOnceFirstAndReduceScatteredLast",
                 FsdpWrap::kRoot,
                 true,
                 {2 * 67'712, 2 * 49'984, 2 * 49'984},
                 {2 * 49'984},
                 {4 * 49'984, 4 * 49'984, 4 * 67'712},
                 {2 * 49'984, 2 * 49'984}},
        // torchtitan's fully_shard([tok_embeddings, norm, lm_head]): E + the norm's 128 = 34,944,
        // gathered once at the embedding, kept to the end (no gather at the head, whose output
        // weight is the embedding's), reduce-scattered after the embedding's backward; the blocks
        // as usual. Under "always" the group is gathered again for the head's backward.
        WrapCase{"SeparateWithTiedEmbeddingsGathersOneGroupForBothEnds",
                 FsdpWrap::kSeparate,
                 false,
                 {2 * 34'944, 2 * 49'984, 2 * 49'984},
                 {2 * 49'984, 2 * 49'984},
                 {4 * 49'984, 4 * 49'984, 4 * 34'944},
                 {2 * 34'944, 2 * 49'984, 2 * 49'984}}),
    [](const testing::TestParamInfo<WrapCase>& info) { return std::string(info.param.name); });

TEST(FsdpWrap, RootGroupIsTheFirstForwardOpAndTheLastBackwardOp) {
  // The root group's gather (E + H' = 67,712 parameters) opens the forward; its reduce-scatter
  // closes the backward.
  const IterationPlan p = wrappedPlan(FsdpWrap::kRoot, Reshard::kDefault, true);
  const StagePlan& st = p.stages[0];
  EXPECT_EQ(st.forward.front().name, "zero3_param_allgather");
  EXPECT_EQ(p.events[st.forward.front().event].event.message_bytes, 2 * 67'712);
  EXPECT_EQ(st.backward.back().name, "zero3_grad_reduce_scatter");
  EXPECT_EQ(p.events[st.backward.back().event].event.message_bytes, 4 * 67'712);
}

}  // namespace
}  // namespace evsim

// ZeRO-3 with expert parallelism (issue 30, item 4c): a block's routed experts are sharded over
// the expert-data-parallel group (D / E ranks), the rest over the D data-parallel ranks; each
// gather and gradient reduce-scatter runs on its own group, bytes worked out by hand.
#include <gtest/gtest.h>

#include "modeler/memory_model.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::eventOf;
using test::findOp;

// h = 64, a = 4, s = 32, vocabulary 512, one MoE block of 4 experts (FFN 128, GeLU, top-2), no
// biases, LayerNorm, fp16. Per rank at t = 1 with E = 2 (2 local experts):
//   attention  layernorm 2h = 128, QKV h x 3h = 12,288, projection h x h = 4,096   = 16,512
//   MoE        layernorm 128, router 4 x h = 256                                  =    384
//   experts    2 local x (fc1 64 x 128 + fc2 128 x 64) = 2 x 16,384               = 32,768
// Dense 16,896 elements = 33,792 bytes, gathered over D = 4 ranks; experts 32,768 elements =
// 65,536 bytes over D / E = 2 ranks.
constexpr const char* kTinyMoe =
    "name: tiny-moe\ndtype: fp16\nhidden_size: 64\nnum_heads: 4\nffn_hidden_size: 256\n"
    "seq_length: 32\nvocab_size: 512\nadd_bias_linear: false\nnum_experts: 4\n"
    "moe_router_topk: 2\nmoe_ffn_hidden_size: 128\nlayers:\n  - {type: embedding}\n"
    "  - {type: decoder, count: 1, cross_attention: false}\n  - {type: head}\n";

TEST(Zero3Experts, GathersAndReduceScattersOnTheirOwnGroups) {
  Strategy st = test::strategy("1M1P4D", 1, 4);
  st.ep = 2;
  st.zero_stage = 3;
  const IterationPlan plan =
      buildIterationPlan(parseModelConfig(kTinyMoe, "tiny-moe"), test::cluster(8), st);
  const StagePlan& stage = plan.stages[0];
  const Event& dense = eventOf(plan, findOp(stage.forward, "zero3_param_allgather", 0));
  EXPECT_EQ(dense.message_bytes, 33'792);
  EXPECT_EQ(dense.placement.group_size, 4);
  const Event& experts = eventOf(plan, findOp(stage.forward, "zero3_expert_param_allgather", 0));
  EXPECT_EQ(experts.message_bytes, 65'536);
  EXPECT_EQ(experts.placement.group_size, 2);
  const Event& dense_rs = eventOf(plan, findOp(stage.backward, "zero3_grad_reduce_scatter", 0));
  EXPECT_EQ(dense_rs.kind, EventKind::kReduceScatter);
  EXPECT_EQ(dense_rs.message_bytes, 33'792);
  EXPECT_EQ(dense_rs.placement.group_size, 4);
  const Event& expert_rs =
      eventOf(plan, findOp(stage.backward, "zero3_expert_grad_reduce_scatter", 0));
  EXPECT_EQ(expert_rs.message_bytes, 65'536);
  EXPECT_EQ(expert_rs.placement.group_size, 2);
  // No second, whole-stage expert gradient sync after the backward.
  EXPECT_EQ(stage.expert_grad_sync, -1);
  EXPECT_EQ(stage.expert_allgather, -1);
  // Weights per rank (fp16, 2 bytes, ZeRO-3): the stage holds the embedding 512 x 64 + learned
  // positions 32 x 64 = 34,816, the block's dense 16,896 and the final norm 128 (the head uses
  // the tied table): 51,840 dense elements over 4 ranks = 12,960; the 2 local experts' 32,768
  // over 2 ranks = 16,384: 29,344 elements, 58,688 bytes. Without EP every rank's 4 experts
  // (65,536) shard over all 4: (51,840 + 65,536) / 4 = 29,344 too: the same bytes.
  Strategy no_ep = st;
  no_ep.ep = 1;
  const IterationPlan plain =
      buildIterationPlan(parseModelConfig(kTinyMoe, "tiny-moe"), test::cluster(8), no_ep);
  EXPECT_EQ(estimateMemory(plan).stages[0].weight_bytes, 58'688);
  EXPECT_EQ(estimateMemory(plain).stages[0].weight_bytes, 58'688);
}

TEST(Zero3Experts, ZeroBubbleReduceScattersGradientsInTheTaskThatComputesThem) {
  // zbh1 runs a layer's weight gradients in a later W task: each gradient reduce-scatter must run
  // there too, after its layer's wgrad GEMMs, never in B before the gradients exist.
  Strategy st = test::strategy("1M1P4D", 1, 4);
  st.schedule = Schedule::kZbh1;
  st.zero_stage = 3;
  const IterationPlan plan =
      buildIterationPlan(parseModelConfig(kTinyMoe, "tiny-moe"), test::cluster(8), st);
  int scatters = 0;
  for (const StagePlan& stage : plan.stages) {
    for (size_t i = 0; i < stage.backward.size(); ++i) {
      const OpInstance& op = stage.backward[i];
      if (plan.events[op.event].event.kind != EventKind::kReduceScatter) continue;
      ++scatters;
      EXPECT_TRUE(op.weight_grad) << op.name << " of layer " << op.layer;
    }
  }
  EXPECT_GT(scatters, 0);
}

}  // namespace
}  // namespace evsim

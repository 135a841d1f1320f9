// Expert tensor parallelism (issue 30, item 4; Megatron's --expert-tensor-parallel-size): the
// routed experts split over ETP ranks apart from the dense layers' M, the M x D ranks of a stage
// regrouped as ETP x E x (expert DP) with ETP innermost (parallel_state's expert rank generator).
// Groups, op shapes, dispatch bytes and weight bytes per GPU worked by hand.
#include <gtest/gtest.h>

#include <string>

#include "modeler/memory_model.h"
#include "plan/iteration_plan.h"
#include "plan/rank_layout.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::eventOf;
using test::findOp;
using V = std::vector<int64_t>;

// h = 64, a = 4, s = 32, b = 1 (T = 32 tokens), fp16, no biases, 4 routed GeLU experts of FFN 128,
// top-2, dropless and balanced. 2M1P4D with SP (region R = T / 2 = 16 tokens), E = 4: one local
// expert per rank.
constexpr const char* kTinyMoe =
    "name: tiny-moe\ndtype: fp16\nhidden_size: 64\nnum_heads: 4\nffn_hidden_size: 256\n"
    "seq_length: 32\nvocab_size: 512\nadd_bias_linear: false\nnum_experts: 4\n"
    "moe_router_topk: 2\nmoe_ffn_hidden_size: 128\nlayers:\n  - {type: embedding}\n"
    "  - {type: decoder, count: 1, cross_attention: false}\n  - {type: head}\n";

Strategy tinyStrategy(int etp) {
  Strategy st = test::strategy("2M1P4D", 1, 4);
  st.sequence_parallel = true;
  st.ep = 4;
  st.etp = etp;
  return st;
}

IterationPlan tinyPlan(int etp) {
  return buildIterationPlan(parseModelConfig(kTinyMoe, "tiny-moe"), test::cluster(8),
                            tinyStrategy(etp));
}

// Ranks i = tp + 2 dp (one stage, no CP), rank = i. ETP 2 (Megatron's default, = M): EP index
// (i / 2) % 4 = dp, so the EP group of rank 0 is the same TP index over dp 0..3: {0, 2, 4, 6};
// expert DP 2 x 4 / (2 x 4) = 1. ETP 1: EP index i % 4, expert-DP index i / 4: rank 0's EP group
// is i = 0..3 = {0, 1, 2, 3} (both TP ranks of dp 0 and 1), its expert-DP group i = 0 and 4 =
// {0, 4}, 2 x 4 / (1 x 4) = 2 ranks.
TEST(ExpertTp, GroupsFollowMegatronsExpertRankOrder) {
  const RankLayout etp2(tinyStrategy(2), 8);
  EXPECT_EQ(etp2.epRanks(RankCoord{0, 0, 0, 0}), (V{0, 2, 4, 6}));
  EXPECT_EQ(etp2.etpRanks(RankCoord{0, 0, 0, 0}), (V{0, 1}));
  EXPECT_EQ(etp2.expertDpRanks(RankCoord{1, 2, 0, 0}), (V{5}));
  EXPECT_EQ(tinyStrategy(2).expertGradGroupSize(), 1);
  const RankLayout etp1(tinyStrategy(1), 8);
  EXPECT_EQ(etp1.epRanks(RankCoord{0, 0, 0, 0}), (V{0, 1, 2, 3}));
  EXPECT_EQ(etp1.epRanks(RankCoord{1, 3, 0, 0}), (V{4, 5, 6, 7}));
  EXPECT_EQ(etp1.etpRanks(RankCoord{1, 3, 0, 0}), (V{7}));
  EXPECT_EQ(etp1.expertDpRanks(RankCoord{0, 0, 0, 0}), (V{0, 4}));
  EXPECT_EQ(etp1.expertDpRanks(RankCoord{1, 1, 0, 0}), (V{3, 7}));
  EXPECT_EQ(tinyStrategy(1).expertGradGroupSize(), 2);
}

// Per rank: the all-to-all sends the region's R k = 32 token copies of h fp16: 32 x 64 x 2 =
// 4,096 bytes, whatever the ETP. ETP 2: the ETP group gathers 2 x 32 = 64 rows (8,192 bytes) and
// the one local expert runs fc1 64 rows x 64 outputs (FFN 128 / 2) x 64; its weights are
// 2 x 64 x 64 = 8,192 elements. ETP 1: no gather, 32 rows x 128 x 64, weights 2 x 128 x 64 =
// 16,384 elements, their gradient (fp16, 32,768 bytes) all-reduced over the expert-DP pair.
TEST(ExpertTp, ExpertShapesAndDispatchBytes) {
  const IterationPlan etp2 = tinyPlan(2);
  const StagePlan& s2 = etp2.stages[0];
  EXPECT_EQ(eventOf(etp2, findOp(s2.forward, "moe_dispatch_alltoall", 0)).message_bytes, 4'096);
  const Event& gather = eventOf(etp2, findOp(s2.forward, "moe_dispatch_allgather", 0));
  EXPECT_EQ(gather.message_bytes, 8'192);
  EXPECT_EQ(gather.placement.group_size, 2);
  EXPECT_EQ(test::dimValues(eventOf(etp2, findOp(s2.forward, "expert_fc1_gemm", 0))),
            (V{1, 64, 64, 64}));
  EXPECT_EQ(findOp(s2.forward, "expert_fc1_gemm", 0).weights, 4'096);
  EXPECT_EQ(s2.expert_grad_sync, -1);  // expert DP of one rank: nothing to reduce

  const IterationPlan etp1 = tinyPlan(1);
  const StagePlan& s1 = etp1.stages[0];
  const Event& a2a = eventOf(etp1, findOp(s1.forward, "moe_dispatch_alltoall", 0));
  EXPECT_EQ(a2a.message_bytes, 4'096);
  EXPECT_EQ(a2a.placement.group_size, 4);
  EXPECT_EQ(test::countOps(s1.forward, "moe_dispatch_allgather"), 0);
  EXPECT_EQ(test::countOps(s1.backward, "moe_dispatch_grad_reduce_scatter"), 0);
  EXPECT_EQ(test::dimValues(eventOf(etp1, findOp(s1.forward, "expert_fc1_gemm", 0))),
            (V{1, 32, 128, 64}));
  EXPECT_EQ(findOp(s1.forward, "expert_fc2_gemm", 0).weights, 8'192);
  ASSERT_GE(s1.expert_grad_sync, 0);
  const Event& sync = etp1.events[s1.expert_grad_sync].event;
  EXPECT_EQ(sync.message_bytes, 32'768);
  EXPECT_EQ(sync.placement.group_size, 2);
  // The routed experts' weights per GPU double at ETP 1 (expert parameters / ETP): 8,192 more
  // fp16 elements, 16,384 bytes; everything else is the same.
  EXPECT_EQ(
      estimateMemory(etp1).stages[0].weight_bytes - estimateMemory(etp2).stages[0].weight_bytes,
      16'384);
}

// Router load imbalance: dropless with moe_load_imbalance 1.5, the busiest expert rank (which the
// lockstep EP group waits for) gets 1.5 x the balanced rows: at ETP 1, ceil(16 x 2 x 1.5) = 48
// rows instead of 32 for its one expert, and its all-to-all 48 x 64 x 2 = 6,144 bytes.
TEST(ExpertTp, TheBusiestExpertRankSetsTheRows) {
  const std::string yaml = kTinyMoe;
  const ModelConfig model =
      parseModelConfig(yaml.substr(0, yaml.find("layers:")) + "moe_load_imbalance: 1.5\n" +
                           yaml.substr(yaml.find("layers:")),
                       "imbalanced");
  const IterationPlan plan = buildIterationPlan(model, test::cluster(8), tinyStrategy(1));
  const StagePlan& s = plan.stages[0];
  EXPECT_EQ(test::dimValues(eventOf(plan, findOp(s.forward, "expert_fc1_gemm", 0))),
            (V{1, 48, 128, 64}));
  EXPECT_EQ(test::dimValues(eventOf(plan, findOp(s.backward, "expert_fc1_wgrad", 0))),
            (V{1, 128, 64, 48}));
  EXPECT_EQ(eventOf(plan, findOp(s.forward, "moe_dispatch_alltoall", 0)).message_bytes, 6'144);
}

TEST(ExpertTp, RefusedByMegatronsRules) {
  const ModelConfig model = parseModelConfig(kTinyMoe, "tiny-moe");
  auto why = [&](Strategy st) {
    return strategyViolation(model, test::cluster(8), st).value_or("no violation");
  };
  Strategy st = tinyStrategy(3);  // 3 does not divide the expert FFN 128
  EXPECT_NE(why(st).find("--etp 3: does not divide moe_ffn_hidden_size=128"), std::string::npos)
      << why(st);
  st = tinyStrategy(8);  // ETP x E = 32 does not divide M x D = 8
  EXPECT_NE(why(st).find("ETP x E = 32 does not divide M x D = 8"), std::string::npos) << why(st);
  Strategy dense = test::strategy("2M1P4D", 1, 4);
  dense.sequence_parallel = true;
  dense.etp = 1;
  const std::string dense_why =
      strategyViolation(parseModelConfig(test::modelYaml(64, 4, 256, 32, 512, 1), "tiny"),
                        test::cluster(8), dense)
          .value_or("no violation");
  EXPECT_NE(dense_why.find("has no experts"), std::string::npos) << dense_why;
}

}  // namespace
}  // namespace evsim

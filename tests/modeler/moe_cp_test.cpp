// Mixture of experts, expert parallelism and context parallelism (issue 13): Mixtral-8x7B's
// parameter counts and FLOPs per token against closed forms, the all-to-all volume of one MoE
// layer and the CP ring's transfers by hand, the tp-cp-ep-dp-pp rank layout, model states under
// EP and ZeRO, the overlap of the ring exchange with attention, and the one-line refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "modeler/memory_model.h"
#include "modeler/simulation.h"
#include "ops/layer_footprint.h"
#include "ops/parameter_counts.h"
#include "plan/iteration_plan.h"
#include "plan/rank_layout.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig bundled(const std::string& name) {
  return loadModelConfig(test::configPath("models", name));
}

// Mixtral-8x7B's config.json: h 4096, 32 layers, 32 heads, 8 K/V heads, FFN 14336, 8 experts,
// top-2, vocabulary 32000 (a multiple of 128: no padding at t = 1), untied, no biases.
constexpr double kH = 4096, kLayers = 32, kHeads = 32, kGroups = 8, kFfn = 14336, kExperts = 8,
                 kTopK = 2, kVocab = 32000;

double mixtralExpert() { return 3 * kH * kFfn; }  // gate, up and down projections
double mixtralAttention() {
  const double d = kH / kHeads;
  return kH * (kH + 2 * kGroups * d) + kH * kH;  // Q, K, V and the output projection
}
// Attention, the router (E x h), all experts, two RMSNorm gains.
double mixtralBlock() {
  return mixtralAttention() + kExperts * kH + kExperts * mixtralExpert() + 2 * kH;
}

TEST(Moe, MixtralParameterCountsMatchThePublishedOnes) {
  const ModelConfig model = bundled("mixtral-8x7b");
  // Untied embedding and output layer (V x h each) and the final norm.
  const double total = kLayers * mixtralBlock() + 2 * kVocab * kH + kH;
  const double active = total - kLayers * (kExperts - kTopK) * mixtralExpert();
  EXPECT_EQ(static_cast<double>(totalParameters(model)), total);
  EXPECT_EQ(static_cast<double>(activeParameters(model)), active);
  EXPECT_NEAR(total / 46.7e9, 1.0, 0.005);
  EXPECT_NEAR(active / 12.9e9, 1.0, 0.005);
}

TEST(Moe, ParameterCountAgreesWithMegatronsMoeFormula) {
  // Megatron-LM's compute_weight_and_optimizer_memory with num_experts: 2 L h^2 [(1 + g/a) +
  // (f/h) E 3/2 + 2/h + 1/(L h)] + 2 V h (untied). It counts no router and two vectors per norm
  // (gain and bias); Mixtral's router adds E h per layer, its RMSNorms carry one vector (h less
  // per norm: 2 per layer and the final one).
  const double megatron =
      2 * kLayers * kH * kH *
          ((1 + kGroups / kHeads) + (kFfn / kH) * kExperts * 1.5 + 2 / kH + 1 / (kLayers * kH)) +
      2 * kVocab * kH;
  EXPECT_NEAR(static_cast<double>(totalParameters(bundled("mixtral-8x7b"))),
              megatron + kLayers * kExperts * kH - 2 * kLayers * kH - kH, 1.0);
}

TEST(Moe, TrainingFlopsPerTokenAreSixActiveParametersPlusAttention) {
  // Per token: 6 x the active parameters without the input embedding (forward 2, backward 4 per
  // weight: the router and the k experts a token passes through, the output layer), plus the
  // attention core, 4 s h forward and 8 s h backward per layer (QK^T and PV over the whole
  // sequence) halved by the causal mask (NeMo's count). Norms, SwiGLU, routing and the loss add
  // element-wise work well under 1%.
  const ModelConfig model = bundled("mixtral-8x7b");
  const double s = static_cast<double>(model.seq_length);
  const double active_non_embedding = static_cast<double>(activeParameters(model)) - kVocab * kH;
  const double hand = 6 * active_non_embedding + kLayers * 6 * s * kH;
  const ModelFootprint f = unsplitFootprint(model);  // b = 1: one sequence of s tokens
  double flops = f.embedding.model_flops + f.head.model_flops;
  for (const TransformerBlock& b : model.blocks) flops += f.block(b).model_flops;
  EXPECT_NEAR(flops / s / hand, 1.0, 0.01);
  EXPECT_GT(flops / s, hand);  // the element-wise work only adds
}

// E = 8 SwiGLU experts without biases, top-2, fp32, h = 64, f = 128, s = 64, 2 layers; on 1M1P4D
// with EP = 4 each rank's 64 tokens send 64 x 2 copies of 64 floats = 32768 bytes each way and
// its 2 local experts get 128 / 2 = 64 rows.
ModelConfig smallMoe(const std::string& extra = "") {
  return parseModelConfig(test::modelYaml(64, 4, 128, 64, 512, 2, "fp32") +
                              "activation: swiglu\nadd_bias_linear: false\n"
                              "num_experts: 8\nmoe_router_topk: 2\n" +
                              extra,
                          "moe.yaml");
}

TEST(Moe, AllToAllVolumeOfOneLayerByHand) {
  Strategy s = test::strategy("1M1P4D", 1, 4);
  s.ep = 4;
  const IterationPlan plan = buildIterationPlan(smallMoe(), test::cluster(4), s);
  const StagePlan& stage = plan.stages[0];
  int forward = 0, backward = 0;
  for (const OpList* ops : {&stage.forward, &stage.backward}) {
    for (const OpInstance& op : *ops) {
      const Event& e = test::eventOf(plan, op);
      if (e.kind != EventKind::kAllToAll) continue;
      EXPECT_EQ(op.stream, Stream::kEpComm);
      EXPECT_EQ(e.message_bytes, 64 * 2 * 64 * 4);
      EXPECT_EQ(e.placement.group_size, 4);
      (ops == &stage.forward ? forward : backward) += 1;
    }
  }
  EXPECT_EQ(forward, 2 * 2);  // dispatch and combine, 2 layers
  EXPECT_EQ(backward, 2 * 2);
  const Event& fc1 = test::eventOf(plan, test::findOp(stage.forward, "expert_fc1_gemm", 0));
  // [gate | up] of 2 x 128 per local expert, 2 local experts of 64 rows each.
  EXPECT_EQ(test::dimValues(fc1), (std::vector<int64_t>{2, 64, 256, 64}));
  // Expert weights on one rank: 2 layers x 2 local experts x 3 x 64 x 128.
  EXPECT_EQ(stage.expert_parameters, 2 * 2 * 3 * 64 * 128);
}

TEST(Moe, ActivationBytesOfTheExpertsByHand) {
  // One dense and one MoE block of the small model above (fp32, T = 64 tokens, t = 1, E = 1):
  // same attention, so the difference is the MLPs'. Dense SwiGLU MLP keeps its norm input T h,
  // fc1 input T h, SwiGLU input T 2f, fc2 input T f (x 4 bytes) and the dropout mask T h bytes:
  // 4 (4096 + 4096 + 16384 + 8192) + 4096 = 135168. The MoE MLP keeps the norm input 4 T h, the
  // router input 4 T h, the fp32 probabilities 4 T E, each grouped GEMM's input over
  // 8 experts x ceil(128 / 8) = 128 rows (fc1 4 x 128 h, SwiGLU 4 x 128 x 2f, fc2 4 x 128 f), the
  // unpermute's expert outputs 4 T k h and the mask: 16384 + 16384 + 2048 + 32768 + 131072 +
  // 65536 + 32768 + 4096 = 301056.
  const std::string yaml = test::modelYaml(64, 4, 128, 64, 512, 1, "fp32");
  const ModelConfig model = parseModelConfig(
      yaml.substr(0, yaml.find("layers:")) +
          "activation: swiglu\nadd_bias_linear: false\nnum_experts: 8\nmoe_router_topk: 2\n"
          "layers:\n  - {type: embedding}\n"
          "  - {type: decoder, count: 1, cross_attention: false, moe: false}\n"
          "  - {type: decoder, count: 1, cross_attention: false}\n  - {type: head}\n",
      "mixed.yaml");
  const ModelFootprint f = unsplitFootprint(model);
  EXPECT_EQ(f.block(model.blocks[1]).saved_bytes - f.block(model.blocks[0]).saved_bytes,
            301056 - 135168);
}

TEST(Moe, CapacityFactorPadsTheRoutedRows) {
  Strategy s = test::strategy("1M1P4D", 1, 4);
  s.ep = 4;
  const IterationPlan plan =
      buildIterationPlan(smallMoe("moe_expert_capacity_factor: 1.25\n"), test::cluster(4), s);
  const OpInstance& dispatch = test::findOp(plan.stages[0].forward, "moe_dispatch_alltoall", 0);
  // 64 tokens x 2 x 1.25 = 160 copies of 64 floats.
  EXPECT_EQ(test::eventOf(plan, dispatch).message_bytes, 160 * 64 * 4);
}

TEST(Moe, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  // 1M1P8D, EP = 2: dense gradients over 8 ranks, the experts' over 8 / 2 = 4.
  Strategy s = test::strategy("1M1P8D", 1, 8);
  s.ep = 2;
  const IterationPlan plan = buildIterationPlan(smallMoe(), test::cluster(8), s);
  const StagePlan& stage = plan.stages[0];
  ASSERT_GE(stage.dp_allreduce, 0);
  ASSERT_GE(stage.expert_grad_sync, 0);
  const Event& dense = plan.events[stage.dp_allreduce].event;
  const Event& expert = plan.events[stage.expert_grad_sync].event;
  EXPECT_EQ(dense.placement.group_size, 8);
  EXPECT_EQ(expert.placement.group_size, 4);
  EXPECT_EQ(expert.message_bytes, stage.expert_parameters * 4);
  EXPECT_EQ(dense.message_bytes, (stage.parameters - stage.expert_parameters) * 4);
}

TEST(Moe, ModelStatesShardExpertsOverTheExpertDataParallelGroup) {
  // Mixtral on 1M1P8D with EP = 8 and ZeRO-1: each device holds one expert per layer. Dense
  // states shard over D = 8 ranks (2 + 4 + 12/8 bytes), the experts' over 8 / 8 = 1 (2 + 4 + 12).
  const ModelConfig model = bundled("mixtral-8x7b");
  Strategy s = test::strategy("1M1P8D", 1, 8);
  s.ep = 8;
  s.zero_stage = 1;
  const IterationPlan plan = buildIterationPlan(model, test::cluster(8), s);
  const double experts = kLayers * mixtralExpert();  // one of 8 per layer on this device
  const double dense =
      static_cast<double>(totalParameters(model)) - kLayers * kExperts * mixtralExpert();
  EXPECT_EQ(static_cast<double>(plan.stages[0].parameters), dense + experts);
  const MemoryEstimate mem = estimateMemory(plan);
  EXPECT_NEAR(static_cast<double>(mem.stages[0].model_state_bytes),
              dense * (6 + 12.0 / 8) + experts * 18, 1.0);
}

TEST(ContextParallel, RingTransfersPerLayerByHand) {
  // tiny-llama (h 64, 4 heads of 16, 2 K/V heads, s 32, fp32), b = 2, C = 4: each rank holds
  // 8 tokens; per layer 2C - 1 = 7 exchanges: forward 3 of K and V, 2 x (2 x 2) heads x 8 x 16
  // x 4 bytes = 4096; backward 4, one beside each step, as Transformer Engine sends them: K and V
  // (4096), K, V and their gradients twice (8192), the gradients alone (4096).
  const ModelConfig model = bundled("tiny-llama");
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.cp = 4;
  const IterationPlan plan = buildIterationPlan(model, test::cluster(2, 2), s);
  const StagePlan& stage = plan.stages[0];
  for (int layer = 0; layer < 4; ++layer) {
    int fwd = 0, bwd = 0;
    for (const OpInstance& op : stage.forward) {
      if (op.layer != layer || op.stream != Stream::kCpComm) continue;
      ++fwd;
      EXPECT_EQ(op.overlap_ops, 1);
      EXPECT_EQ(test::eventOf(plan, op).message_bytes, 4096);
      EXPECT_EQ(test::eventOf(plan, op).kind, EventKind::kP2P);
    }
    std::vector<int64_t> bwd_bytes;
    for (const OpInstance& op : stage.backward) {
      if (op.layer != layer || op.stream != Stream::kCpComm) continue;
      ++bwd;
      bwd_bytes.push_back(test::eventOf(plan, op).message_bytes);
    }
    EXPECT_EQ(bwd_bytes, (std::vector<int64_t>{4096, 8192, 8192, 4096})) << "layer " << layer;
    EXPECT_EQ(fwd + bwd, 2 * 4 - 1) << "layer " << layer;
  }
  // 4 causal steps of the rank's 8 queries per layer: batch b x heads = 8, K/V heads 4.
  const OpInstance& step = test::findOp(stage.forward, "flash_attention", 0);
  EXPECT_EQ(test::dimValues(test::eventOf(plan, step)), (std::vector<int64_t>{8, 4, 8, 16, 1}));
  EXPECT_EQ(test::countOps(stage.forward, "flash_attention_ring_step"), 4 * 3);
  // 4 CP ranks of 2 per node span 2 nodes: the ring runs at its inter-node link.
  EXPECT_EQ(test::eventOf(plan, test::findOp(stage.forward, "cp_kv_exchange", 0)).placement.nodes,
            2);
}

TEST(ContextParallel, TheExchangeOverlapsItsAttentionStep) {
  // Every op costs 1 us, the ring exchanges 5: an exchange and its step take 5, not 6, so a
  // forward task is (ops other than exchanges) + 4 per exchange.
  const ModelConfig model = bundled("tiny-llama");
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.cp = 2;
  IterationPlan plan = buildIterationPlan(model, test::cluster(2), s);
  std::vector<EventCost> costs;
  for (const UniqueEvent& u : plan.events.events()) {
    costs.push_back(EventCost{u.event.kind == EventKind::kP2P ? 5.0 : 1.0});
  }
  const int exchanges = test::countOps(plan.stages[0].forward, "cp_kv_exchange");
  const int others = static_cast<int>(plan.stages[0].forward.size()) - exchanges;
  ASSERT_EQ(exchanges, 4);  // one per layer at C = 2
  const Simulation sim = simulate(std::move(plan), std::move(costs));
  EXPECT_DOUBLE_EQ(sim.input.stages[0].forward_us, others + 4.0 * exchanges);
}

TEST(RankLayout, TpCpEpDpPpOrderByHand) {
  // M 2, C 2, D 4 (E 2), P 2 on 8 GPUs per node: rank = tp + 2 (cp + 2 (dp + 4 pp)).
  Strategy s = test::strategy("2M2P4D", 1, 4);
  s.cp = 2;
  s.ep = 2;
  const RankLayout layout(s, 8);
  EXPECT_EQ(layout.rank(1, 3, 1, 1), 31);
  const RankCoord c = layout.coord(31);
  EXPECT_EQ(std::make_tuple(c.tp, c.cp, c.dp, c.pp), std::make_tuple(1, 1, 3, 1));
  EXPECT_EQ(layout.tpRanks(c), (std::vector<int64_t>{30, 31}));
  EXPECT_EQ(layout.cpRanks(c), (std::vector<int64_t>{29, 31}));
  EXPECT_EQ(layout.epRanks(c), (std::vector<int64_t>{27, 31}));                // DP indices 2 and 3
  EXPECT_EQ(layout.expertDpRanks(c), (std::vector<int64_t>{21, 23, 29, 31}));  // dp 1, 3
  EXPECT_EQ(layout.dpRanks(c).size(), 8u);                                     // D x C
}

TEST(MoeErrors, BadModelsAndStrategiesGetOneLineNamingTheRule) {
  try {
    smallMoe("moe_ffn_hidden_size: 0\n");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "moe.yaml: moe_ffn_hidden_size");
  }
  try {
    parseModelConfig(
        test::modelYaml(64, 4, 128, 64, 512, 2, "fp32") + "num_experts: 4\nmoe_router_topk: 5\n",
        "moe.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "moe_router_topk: 5 is more than num_experts 4");
  }
  try {
    parseModelConfig(test::modelYaml(64, 4, 128, 64, 512, 2, "fp32") + "moe_router_topk: 2\n",
                     "moe.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "moe_router_topk: needs num_experts");
  }
  const ClusterConfig cluster = test::cluster(8);
  Strategy s = test::strategy("1M1P6D", 1, 6);
  s.ep = 3;
  EXPECT_CONTAINS(strategyViolation(smallMoe(), cluster, s).value_or(""),
                  "--ep 3: does not divide num_experts=8");
  s = test::strategy("1M1P2D", 1, 2);
  s.ep = 4;
  EXPECT_CONTAINS(strategyViolation(smallMoe(), cluster, s).value_or(""),
                  "--ep 4: does not divide D=2");
  s.ep = 2;
  EXPECT_CONTAINS(strategyViolation(bundled("tiny-llama"), cluster, s).value_or(""),
                  "--ep 2: tiny-llama has no experts");
  s = test::strategy("2M1P1D", 1, 1);
  EXPECT_CONTAINS(strategyViolation(smallMoe(), cluster, s).value_or(""),
                  "only with --sequence-parallel");
  s = test::strategy("1M1P1D", 1, 1);
  s.cp = 3;  // 2 x 3 does not divide 32
  EXPECT_CONTAINS(strategyViolation(bundled("tiny-llama"), cluster, s).value_or(""),
                  "--cp 3: 2 x C = 6 does not divide seq_length=32");
  s.cp = 2;
  EXPECT_CONTAINS(strategyViolation(bundled("tiny-gpt"), cluster, s).value_or(""),
                  "--cp 2: context parallelism needs flash_attention: true");
}

}  // namespace
}  // namespace evsim

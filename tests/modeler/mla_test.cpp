// Multi-head latent attention (issue 30, item 4a): DeepSeek-V3's parameter count against the
// published 671 B total / 37 B activated, worked out by hand from its config.json; MLA's op list
// under tensor and sequence parallelism (GEMM shapes, the latents' collectives, the core's FLOPs);
// and model FLOP utilisation against named peaks (item 5).
#include <gtest/gtest.h>

#include <string>

#include "modeler/simulation.h"
#include "ops/parameter_counts.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::dimValues;
using test::eventOf;
using test::findOp;
using V = std::vector<int64_t>;

// DeepSeek-V3 (config.json): h = 7168, a = 128, r_q = 1536, r_kv = 512, d_nope = 128,
// d_rope = 64, d_v = 128; 61 layers, the first 3 dense (FFN 18432), 58 MoE (256 routed experts of
// FFN 2048, top-8, one shared expert of 2048, router 256 x h); vocabulary 129280 (= 128 x 1010, no
// padding at t = 1), untied; RMSNorm, no biases.
//
// MLA per layer:
//   q_down   h x r_q                  = 7168 x 1536        =  11,010,048
//   q_norm   r_q                                          =       1,536
//   q_up     r_q x a (d_nope + d_rope) = 1536 x 128 x 192   =  37,748,736
//   kv_down  h x (r_kv + d_rope)       = 7168 x 576         =   4,128,768
//   kv_norm  r_kv                                         =         512
//   kv_up    r_kv x a (d_nope + d_v)   = 512 x 128 x 256    =  16,777,216
//   o_proj   a d_v x h                 = 16384 x 7168       = 117,440,512
//   sum                                                   = 187,107,328
// plus the block's two RMSNorm gains (2 x 7168): 187,121,664 per layer, x 61 = 11,414,421,504.
// Dense MLP: 3 x 7168 x 18432 = 396,361,728, x 3 = 1,189,085,184.
// MoE MLP: one expert 3 x 7168 x 2048 = 44,040,192; 256 routed = 11,274,289,152; shared
// 44,040,192; router 256 x 7168 = 1,835,008: 11,320,164,352 per layer, x 58 = 656,569,532,416.
// Embedding and output layer 129280 x 7168 = 926,679,040 each, final norm 7168: 1,853,365,248.
// Total 671,026,404,352 (DeepSeek: 671 B). Activated: 248 of 256 routed experts idle per token,
// 248 x 44,040,192 x 58 = 633,474,121,728 fewer: 37,552,282,624 (DeepSeek: 37 B).
TEST(Mla, DeepSeekV3ParametersAreThePublished671BAnd37BActivated) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "deepseek-v3"));
  ASSERT_TRUE(model.mla.enabled());
  EXPECT_EQ(totalParameters(model), 671'026'404'352);
  EXPECT_EQ(activeParameters(model), 37'552'282'624);
  EXPECT_NEAR(static_cast<double>(totalParameters(model)) / 671e9, 1.0, 0.001);
  EXPECT_NEAR(static_cast<double>(activeParameters(model)) / 37e9, 1.0, 0.02);
}

// Multi-token prediction (depth 1): one more block of the model's last kind (MLA + MoE:
// 187,121,664 + 11,320,164,352 = 11,507,286,016), eh_proj 2h x h = 14336 x 7168 = 102,760,448,
// enorm, hnorm and the final norm 3 x 7168 = 21,504: 11,610,067,968 of its own, outside the
// 671 B. With its copies of the embedding and the output layer (2 x 926,679,040), as DeepSeek
// counts its 14 B: 13,463,426,048; main + MTP = 684,489,830,400 (DeepSeek: 685 B).
TEST(Mla, DeepSeekV3MultiTokenPredictionIsTheRest) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "deepseek-v3"));
  ASSERT_EQ(model.mtp_layers, 1);
  EXPECT_EQ(mtpParameters(model), 11'610'067'968);
  const int64_t copies = 2 * int64_t{129280} * 7168;
  EXPECT_EQ(totalParameters(model) + mtpParameters(model) + copies, 684'489'830'400);
  EXPECT_NEAR(static_cast<double>(mtpParameters(model) + copies) / 14e9, 1.0, 0.04);
  EXPECT_NEAR(static_cast<double>(totalParameters(model) + mtpParameters(model) + copies) / 685e9,
              1.0, 0.001);
}

// A small MLA model: h = 256, a = 8, r_q = 64, r_kv = 32, d_nope = 16, d_rope = 8 (Q/K head dim
// 24), d_v = 16, s = 64, b = 2 (T = 128 tokens), bf16, TP 2 with sequence parallelism (region
// R = T/2 = 64 tokens).
constexpr const char* kSmallMla =
    "name: small-mla\ndtype: bf16\nhidden_size: 256\nnum_heads: 8\nffn_hidden_size: 512\n"
    "seq_length: 64\nvocab_size: 1100\nnormalization: rmsnorm\nactivation: swiglu\n"
    "position_embedding: rope\nadd_bias_linear: false\nflash_attention: true\n"
    "hidden_dropout: 0.0\nattention_dropout: 0.0\nmulti_latent_attention: true\n"
    "q_lora_rank: 64\nkv_lora_rank: 32\nqk_head_dim: 16\nqk_pos_emb_head_dim: 8\n"
    "v_head_dim: 16\nlayers:\n  - {type: embedding}\n"
    "  - {type: decoder, count: 2, cross_attention: false}\n  - {type: head}\n";

IterationPlan smallMlaPlan() {
  Strategy st = test::strategy("2M1P1D", 2, 2);
  st.sequence_parallel = true;
  return buildIterationPlan(parseModelConfig(kSmallMla, "small-mla"), test::cluster(8), st);
}

TEST(Mla, OpListUnderTensorAndSequenceParallelism) {
  const IterationPlan plan = smallMlaPlan();
  const OpList& fwd = plan.stages[0].forward;
  const OpList& bwd = plan.stages[0].backward;
  // Duplicated down projections on the region's 64 tokens: gemm m n k.
  EXPECT_EQ(dimValues(eventOf(plan, findOp(fwd, "kv_down_gemm", 0))), (V{64, 32 + 8, 256}));
  EXPECT_EQ(dimValues(eventOf(plan, findOp(fwd, "q_down_gemm", 0))), (V{64, 64, 256}));
  // Column-parallel up projections on all 128 tokens: a/t = 4 heads of 24 (Q), of 16 + 16 (K, V).
  EXPECT_EQ(dimValues(eventOf(plan, findOp(fwd, "q_up_gemm", 0))), (V{128, 4 * 24, 64}));
  EXPECT_EQ(dimValues(eventOf(plan, findOp(fwd, "kv_up_gemm", 0))), (V{128, 4 * 32, 32}));
  // Row-parallel output projection from 4 heads x d_v = 64.
  EXPECT_EQ(dimValues(eventOf(plan, findOp(fwd, "attn_proj_gemm", 0))), (V{128, 256, 64}));
  // The latents are all-gathered (bf16: T x channels x 2 bytes), not the h-wide input.
  EXPECT_EQ(eventOf(plan, findOp(fwd, "q_latent_allgather", 0)).message_bytes, 128 * 64 * 2);
  EXPECT_EQ(eventOf(plan, findOp(fwd, "kv_latent_allgather", 0)).message_bytes, 128 * 40 * 2);
  EXPECT_EQ(eventOf(plan, findOp(bwd, "q_latent_grad_reduce_scatter", 0)).message_bytes,
            128 * 64 * 2);
  EXPECT_EQ(eventOf(plan, findOp(bwd, "kv_latent_grad_reduce_scatter", 0)).message_bytes,
            128 * 40 * 2);
  // The fused core: b a / t = 8 heads, Q/K 24 and V 16 channels; forward FLOPs
  // 2 x 8 x 64^2 x (24 + 16) = 2,621,440 halved by the causal mask, backward twice that.
  const Event& core = eventOf(plan, findOp(fwd, "flash_attention", 0));
  EXPECT_EQ(core.op, "mla_attn_fwd");
  EXPECT_EQ(dimValues(core), (V{8, 64, 24, 16, 1}));
  EXPECT_DOUBLE_EQ(core.flops, 2'621'440.0 / 2);
  EXPECT_DOUBLE_EQ(eventOf(plan, findOp(bwd, "flash_attention_bwd", 0)).flops, 2'621'440.0);
  // Saved by the core: Q (8 x 64 x 24), K (same), V (8 x 64 x 16) in bf16, fp32 LSE (8 x 64):
  // 2 x (12288 + 12288 + 8192) + 4 x 512 = 67,584 bytes.
  EXPECT_EQ(findOp(fwd, "flash_attention", 0).saved_bytes, 67'584);
}

// MTP on the last of two stages (TP 2, SP): per rank its own weights are enorm + hnorm + final
// norm 3 x 256, eh_proj h/t x 2h = 128 x 512 = 65,536, and one block like the model's last:
// attention 256 (norm) + kv_down 256 x 40 + q_down 256 x 64 (duplicated) + 64 + q_up 64 x 96 + 32
// + kv_up 32 x 128 + projection 64 x 256 = 53,600, SwiGLU MLP 256 + 256 x 512 + 256 x 256 =
// 196,864: 316,768 in all; plus its copy of the embedding table (vocabulary 1100 padded to 1280,
// / 2 x 256 = 163,840), as the embedding sits on the first stage: 480,608 more parameters.
TEST(Mla, MultiTokenPredictionOnTheLastStage) {
  Strategy st = test::strategy("2M2P1D", 2, 2);
  st.sequence_parallel = true;
  const std::string yaml = kSmallMla;
  const IterationPlan with = buildIterationPlan(
      parseModelConfig(yaml + "mtp_num_layers: 1\n", "mtp"), test::cluster(8), st);
  const IterationPlan without =
      buildIterationPlan(parseModelConfig(yaml, "m"), test::cluster(8), st);
  EXPECT_EQ(with.stages[1].parameters - without.stages[1].parameters, 480'608);
  EXPECT_EQ(with.stages[0].parameters, without.stages[0].parameters);
  const OpList& fwd = with.stages[1].forward;
  EXPECT_EQ(dimValues(eventOf(with, findOp(fwd, "mtp_eh_proj_gemm"))), (V{128, 128, 512}));
  // Its concatenated [embedding | hidden] input gathered over TP: 2 x 128 x 256 x 2 bytes.
  EXPECT_EQ(eventOf(with, findOp(fwd, "mtp_eh_proj_input_allgather")).message_bytes, 131'072);
  // Its block's MLA core and its own loss run after the main head's.
  EXPECT_EQ(eventOf(with, findOp(fwd, "flash_attention", kHeadLayer)).op, "mla_attn_fwd");
  EXPECT_EQ(dimValues(eventOf(with, findOp(fwd, "mtp_lm_head_gemm"))), (V{128, 640, 256}));
}

TEST(Mla, ModelKeysNeedTheSwitchAndMhaHeads) {
  const std::string base =
      "name: m\ndtype: bf16\nhidden_size: 256\nnum_heads: 8\nffn_hidden_size: 512\n"
      "seq_length: 64\nvocab_size: 1100\nlayers:\n  - {type: embedding}\n"
      "  - {type: decoder, count: 1, cross_attention: false}\n  - {type: head}\n";
  EXPECT_THROW(parseModelConfig(base + "kv_lora_rank: 32\n", "m"), InputError);
  EXPECT_THROW(parseModelConfig(base + "multi_latent_attention: true\n", "m"), InputError);
  EXPECT_THROW(parseModelConfig(base + "multi_latent_attention: true\nkv_lora_rank: 32\n"
                                       "qk_head_dim: 16\nqk_pos_emb_head_dim: 8\nv_head_dim: 16\n"
                                       "num_query_groups: 2\n",
                                "m"),
               InputError);
}

// Item 5: MFU names its peak. 400 TFLOP/s per GPU on a device of 989 (bf16) and 1979 (fp8)
// TFLOP/s: a bf16 model 400/989 = 40.4%; an fp8 model 400/1979 = 20.2% of the fp8 peak first,
// then 40.4% of the bf16 one.
TEST(Mfu, NamesItsPeakAndFp8RunsShowBoth) {
  DeviceSpec device;
  device.peak_tflops = {{DType::kBf16, 989}, {DType::kFp8, 1979}};
  ModelConfig model;
  model.dtype = DType::kBf16;
  std::vector<MfuFigure> bf16 = mfuFigures(device, model, 400e12);
  ASSERT_EQ(bf16.size(), 1u);
  EXPECT_DOUBLE_EQ(bf16[0].mfu, 400.0 / 989);
  EXPECT_EQ(mfuText(bf16), "40.4% of 989 TFLOP/s bf16");
  model.spec.fp8 = true;
  std::vector<MfuFigure> fp8 = mfuFigures(device, model, 400e12);
  ASSERT_EQ(fp8.size(), 2u);
  EXPECT_EQ(fp8[0].dtype, DType::kFp8);
  EXPECT_DOUBLE_EQ(fp8[0].mfu, 400.0 / 1979);
  EXPECT_DOUBLE_EQ(fp8[1].mfu, 400.0 / 989);
  EXPECT_EQ(mfuText(fp8), "20.2% of 1979 TFLOP/s fp8, 40.4% of 989 TFLOP/s bf16");
}

// A simulated FP8 run: model FLOPs F over an iteration of t seconds on N = 2 GPUs of peaks 200
// (fp8) and 100 (fp16) TFLOP/s: MFU F / (t N 2e14) first, F / (t N 1e14) second.
TEST(Mfu, SimulatedFp8RunDividesByTheFp8PeakFirst) {
  std::string cluster_yaml = test::clusterYaml(8);
  const std::string peaks = "fp32: 20}";
  cluster_yaml.replace(cluster_yaml.find(peaks), peaks.size(), "fp32: 20, fp8: 200}");
  const ModelConfig model =
      parseModelConfig(test::modelYaml(64, 4, 256, 32, 512, 2, "fp16") + "fp8: true\n", "fp8");
  IterationPlan p = buildIterationPlan(model, parseClusterConfig(cluster_yaml, "c"),
                                       Strategy::of(1, 2, 1, 1, 4, Schedule::kGpipe));
  std::vector<EventCost> costs;
  for (const UniqueEvent& u : p.events.events()) {
    costs.push_back({u.event.kind == EventKind::kCompute ? 1.0 : 0.0, Provenance::kMeasured});
  }
  const Simulation sim = simulate(std::move(p), std::move(costs));
  const double per_gpu = sim.summary.model_flops / (sim.summary.iteration_us * 1e-6) / 2;
  ASSERT_EQ(sim.summary.mfu_by_peak.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.summary.mfu, per_gpu / 2e14);
  EXPECT_DOUBLE_EQ(sim.summary.mfu_by_peak[0].peak_tflops, 200);
  EXPECT_DOUBLE_EQ(sim.summary.mfu_by_peak[1].mfu, per_gpu / 1e14);
  EXPECT_EQ(sim.summary.mfu_by_peak[1].dtype, DType::kFp16);
}

}  // namespace
}  // namespace evsim

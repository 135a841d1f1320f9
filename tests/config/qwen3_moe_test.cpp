// Qwen3-MoE (issue 30, item 4): a head size of its own (kv_channels, Hugging Face's head_dim),
// the per-head Q/K norm (qk_layernorm), 128 routed experts top-8 and no shared expert. The
// parameter counts are worked by hand from the published config.json values and checked against
// Qwen's 30.5 B / 3.3 B active and 235 B / 22 B active; the Hugging Face import of
// Qwen3MoeForCausalLM gives the same model as the bundled YAML; the QKV GEMM, the norms and the
// projection of one block take their widths from a x d, not h.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "config/hf_config.h"
#include "config/model_config.h"
#include "ops/layer_ops.h"
#include "ops/parameter_counts.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// Qwen/Qwen3-30B-A3B's config.json as published.
constexpr const char* kQwen3_30b = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen3-30B-A3B: h = 2048, a = 32, g = 4, d = 128, 48 layers, 128 experts of FFN 768 (top-8),
// vocabulary 151936 (= 128 x 1187: no padding at t = 1), untied, RMSNorm, no biases.
//   q        h x a d  = 2048 x 4096 =   8,388,608
//   k, v     h x g d  = 2048 x 512  =   1,048,576 each
//   o        a d x h  = 4096 x 2048 =   8,388,608
//   q_norm, k_norm    d each        =         256
//   two block norms   2 h           =       4,096
//   router   h x 128                =     262,144
//   experts  128 x 3 x 2048 x 768   = 603,979,776
//   per layer                         623,120,640; x 48 = 29,909,790,720
// Embedding and output layer 151936 x 2048 = 311,164,928 each, final norm 2048.
// Total 30,532,122,624 (Qwen: 30.5 B). Active: 120 of 128 experts idle, 120 x 4,718,592 x 48 =
// 27,179,089,920 fewer: 3,353,032,704 (Qwen: 3.3 B).
TEST(Qwen3Moe, ThirtyBParametersAreThePublished30_5BAnd3_3BActive) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "qwen3-30b-a3b"));
  EXPECT_EQ(model.headDim(), 128);
  EXPECT_TRUE(model.spec.qk_layernorm);
  EXPECT_EQ(model.moe.shared_ffn, 0);
  EXPECT_EQ(totalParameters(model), 30'532'122'624);
  EXPECT_EQ(activeParameters(model), 3'353'032'704);
  EXPECT_NEAR(static_cast<double>(totalParameters(model)) / 30.5e9, 1.0, 0.002);
  EXPECT_NEAR(static_cast<double>(activeParameters(model)) / 3.3e9, 1.0, 0.02);
}

// Qwen3-235B-A22B: h = 4096, a = 64, g = 4, d = 128 (a d = 8192 = 2h), 94 layers, 128 experts of
// FFN 1536 (top-8).
//   q, o     4096 x 8192 each       =  33,554,432 each
//   k, v     4096 x 512 each        =   2,097,152 each
//   q_norm, k_norm 256; block norms 8,192; router 4096 x 128 = 524,288
//   experts  128 x 3 x 4096 x 1536  = 2,415,919,104
//   per layer                         2,487,755,008; x 94 = 233,848,970,752
// Embedding and output layer 151936 x 4096 = 622,329,856 each, final norm 4096.
// Total 235,093,634,560 (Qwen: 235 B). Active: 120 x 18,874,368 x 94 = 212,902,871,040 fewer:
// 22,190,763,520 (Qwen: 22 B).
TEST(Qwen3Moe, TwoThirtyFiveBParametersAreThePublished235BAnd22BActive) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "qwen3-235b-a22b"));
  EXPECT_EQ(model.headDim(), 128);
  EXPECT_EQ(totalParameters(model), 235'093'634'560);
  EXPECT_EQ(activeParameters(model), 22'190'763'520);
  EXPECT_NEAR(static_cast<double>(totalParameters(model)) / 235e9, 1.0, 0.001);
  EXPECT_NEAR(static_cast<double>(activeParameters(model)) / 22e9, 1.0, 0.01);
}

TEST(Qwen3Moe, HuggingFaceImportIsTheBundledModel) {
  const ModelConfig imported = parseModelConfig(
      huggingFaceModelYaml(kQwen3_30b, "config.json", "Qwen3-30B-A3B"), "config.json");
  EXPECT_EQ(imported.kv_channels, 128);
  EXPECT_TRUE(imported.spec.qk_layernorm);
  EXPECT_EQ(imported.moe.num_experts, 128);
  EXPECT_EQ(imported.moe.top_k, 8);
  EXPECT_EQ(imported.moe.expert_ffn, 768);
  EXPECT_EQ(imported.moe.shared_ffn, 0);
  EXPECT_EQ(totalParameters(imported), 30'532'122'624);
  EXPECT_EQ(activeParameters(imported), 3'353'032'704);
}

// One block's attention at b = 1, s = 4096, TP 2 (T = 4096 tokens, no SP): the QKV GEMM has
// (a + 2g) d / t = (32 + 8) x 128 / 2 = 2560 outputs from h = 2048; the Q/K norm runs over
// T (a + g) / t = 4096 x 36 / 2 = 73,728 rows of d = 128, owns 2 d = 256 gains and keeps its
// bf16 input (73,728 x 128 x 2 = 18,874,368 bytes); the projection reads a d / t = 2048 features
// (h / t would be 1024) into h = 2048: 2048 x 2048 = 4,194,304 weights.
TEST(Qwen3Moe, AttentionWidthsComeFromTheHeadSize) {
  const ModelConfig model = loadModelConfig(test::configPath("models", "qwen3-30b-a3b"));
  const LayerShape shape = modelLayerShape(model, 1, 2);
  EventTable table;
  LayerOpBuilder builder(shape, table);
  OpList fwd, bwd;
  builder.blockForward(model.blocks[0], 0, fwd);
  builder.blockBackward(model.blocks[0], 0, bwd);
  const Event& qkv = table[test::findOp(fwd, "qkv_gemm").event].event;
  EXPECT_EQ(qkv.dim("m"), 4096);
  EXPECT_EQ(qkv.dim("n"), 2560);
  EXPECT_EQ(qkv.dim("k"), 2048);
  const OpInstance& qk_norm = test::findOp(fwd, "qk_layernorm");
  EXPECT_EQ(table[qk_norm.event].event.dim("rows"), 73'728);
  EXPECT_EQ(table[qk_norm.event].event.dim("cols"), 128);
  EXPECT_EQ(qk_norm.weights, 256);
  EXPECT_EQ(qk_norm.saved_bytes, 18'874'368);
  EXPECT_EQ(test::countOps(bwd, "qk_layernorm_bwd"), 1);
  const OpInstance& proj = test::findOp(fwd, "attn_proj_gemm");
  EXPECT_EQ(table[proj.event].event.dim("k"), 2048);
  EXPECT_EQ(table[proj.event].event.dim("n"), 2048);
  EXPECT_EQ(proj.weights, 4'194'304);
  EXPECT_EQ(table[test::findOp(bwd, "attn_proj_dgrad").event].event.dim("n"), 2048);
}

TEST(Qwen3Moe, RefusesAHeadSizeWithLatentAttention) {
  const std::string mla =
      "name: m\ndtype: bf16\nhidden_size: 256\nnum_heads: 8\nffn_hidden_size: 512\n"
      "seq_length: 64\nvocab_size: 1100\nkv_channels: 64\nmulti_latent_attention: true\n"
      "kv_lora_rank: 32\nqk_head_dim: 16\nqk_pos_emb_head_dim: 8\nv_head_dim: 16\n"
      "layers:\n  - {type: embedding}\n  - {type: decoder, count: 1, cross_attention: false}\n"
      "  - {type: head}\n";
  try {
    parseModelConfig(mla, "m.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kv_channels"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace evsim

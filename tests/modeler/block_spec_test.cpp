// The block spec (issue 13): the bundled Llama configs against their published parameter counts
// and against Megatron-LM's own formulas (megatron/training/theoretical_memory_usage.py and
// training.py's FLOP count, re-derived here from their public source), the FLOPs per token of a
// training step, and the activation bytes of a grouped-query + SwiGLU + FlashAttention block worked
// out op by op. Every sum the planner uses comes from op lists (ops/layer_footprint.h); the
// numbers here come from closed forms.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "modeler/memory_model.h"
#include "ops/layer_footprint.h"
#include "ops/parameter_counts.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig bundled(const std::string& name) {
  return loadModelConfig(test::configPath("models", name));
}

struct LlamaShape {
  const char* name;
  double h, a, g, f, layers, published_billions;
};

// Shapes from the models' published config.json (hidden, heads, kv heads, intermediate, layers);
// vocabulary 128256 (a multiple of 128: no padding at t = 1).
constexpr LlamaShape kLlamas[] = {
    {"llama3-8b", 4096, 32, 8, 14336, 32, 8.03},
    {"llama3-70b", 8192, 64, 8, 28672, 80, 70.6},
    {"llama3.1-405b", 16384, 128, 8, 53248, 126, 405.9},
};
constexpr double kLlamaVocab = 128256;

// One Llama block without biases: Q, K, V projections h x (h + 2 g d) with d = h / a, the output
// projection h x h, SwiGLU's gate, up and down h x f each, two RMSNorm gains of h.
double llamaBlockParameters(const LlamaShape& m) {
  const double d = m.h / m.a;
  return m.h * (m.h + 2 * m.g * d) + m.h * m.h + 3 * m.h * m.f + 2 * m.h;
}

TEST(BlockSpec, LlamaParameterCountsMatchThePublishedOnes) {
  for (const LlamaShape& m : kLlamas) {
    const ModelConfig model = bundled(m.name);
    // Untied: the embedding table and the output layer are V x h each; plus the final RMSNorm.
    const double hand = m.layers * llamaBlockParameters(m) + 2 * kLlamaVocab * m.h + m.h;
    EXPECT_EQ(static_cast<double>(totalParameters(model)), hand) << m.name;
    const double published = m.published_billions * 1e9;
    EXPECT_NEAR(static_cast<double>(totalParameters(model)) / published, 1.0, 0.005) << m.name;
  }
  // 8,030,261,248 for Llama-3-8B (the figure Hugging Face prints for the checkpoint).
  EXPECT_EQ(totalParameters(bundled("llama3-8b")), 8'030'261'248);
}

// Megatron-LM's compute_weight_and_optimizer_memory (no MoE): 2 L h^2 [(1 + g/a) q + f/h * 3/2
// (SwiGLU) or f/h + 2/h + 1/(L h)] + the embedding (twice when untied); it counts two norms of h
// per layer and one final norm, no biases.
double megatronParameters(double h, double a, double g, double f, double layers, double vocab,
                          bool swiglu, bool untied) {
  const double gated = swiglu ? 1.5 : 1.0;
  const double layers_part =
      2 * layers * h * h * ((1 + g / a) + (f / h) * gated + 2 / h + 1 / (layers * h));
  return layers_part + (untied ? 2 : 1) * h * vocab;
}

TEST(BlockSpec, ParameterCountsAgreeWithMegatronsFormula) {
  // Megatron counts no linear biases, no learned positions, and two vectors (gain and bias) per
  // norm. GPT-3 has biases (QKV 3h, projection h, fc1 4h, fc2 h per layer) and learned positions
  // (s x h): exactly that much more here.
  const ModelConfig gpt3 = bundled("gpt3-175b");
  const double h = 12288, layers = 96, s = 2048;
  EXPECT_NEAR(static_cast<double>(totalParameters(gpt3)) -
                  megatronParameters(h, 96, 96, 49152, layers, 51200, false, false),
              9 * h * layers + s * h, 1.0);
  // Llama's RMSNorms carry one vector: h per norm less than Megatron's count, two per layer and
  // the final one.
  for (const LlamaShape& m : kLlamas) {
    EXPECT_NEAR(megatronParameters(m.h, m.a, m.g, m.f, m.layers, kLlamaVocab, true, true) -
                    static_cast<double>(totalParameters(bundled(m.name))),
                2 * m.h * m.layers + m.h, 1.0)
        << m.name;
  }
}

TEST(BlockSpec, TrainingFlopsPerTokenAreSixTimesParametersPlusAttention) {
  // Forward + backward per token: 6 x (block parameters + the output layer; the embedding lookup
  // does no GEMM) + attention 6 L s h (QK^T and PV: 4 s h forward, twice that backward, halved
  // by the causal mask, as NeMo's flops_utils count them). GQA and SwiGLU enter through the
  // parameters:
  // K and V are g/a as wide, the MLP has three h x f GEMMs. Norms, RoPE, SwiGLU and the loss add
  // under 0.1%.
  for (const LlamaShape& m : kLlamas) {
    const ModelConfig model = bundled(m.name);
    const double s = static_cast<double>(model.seq_length);
    const double hand =
        6 * (m.layers * llamaBlockParameters(m) + kLlamaVocab * m.h) + 6 * m.layers * s * m.h;
    const ModelFootprint fp = unsplitFootprint(model);
    const double per_token = (fp.embedding.model_flops + fp.head.model_flops +
                              m.layers * fp.block(model.blocks[0]).model_flops) /
                             s;
    EXPECT_NEAR(per_token / hand, 1.0, 0.01) << m.name;
    EXPECT_GT(per_token, hand) << m.name;  // the element-wise ops only add
  }
}

TEST(BlockSpec, GroupedQuerySwiGluFlashBlockActivationsByHand) {
  // Llama-3-70B, t = 8, b = 1, s = 8192, bf16 (e = 2), no SP, no recomputation, no dropout.
  const ModelConfig model = bundled("llama3-70b");
  const double e = 2, s = 8192, h = 8192, a = 64, g = 8, d = 128, f = 28672, t = 8;
  const double sbh = s * h;
  // Not split by TP: the two RMSNorm inputs and the QKV and fc1 inputs, e*s*b*h each.
  const double unsplit = 4 * e * sbh;
  // Flash attention keeps Q (a heads) and K, V (g heads each) of d channels, over t, and the fp32
  // log-sum-exp per query row; the output projection keeps its input.
  const double attention = e * s * (a + 2 * g) * d / t + 4 * a / t * s + e * sbh / t;
  // SwiGLU keeps its input, the fused [gate | up] fc1 output (2f / t); fc2 its input (f / t).
  const double mlp = e * s * 2 * f / t + e * s * f / t;
  EXPECT_EQ(static_cast<double>(blockActivationBytes(model, model.blocks[0], 1, 8)),
            unsplit + attention + mlp);
  // Selective recomputation has nothing to drop under flash attention (no s x s tensor is kept).
  EXPECT_EQ(blockActivationBytes(model, model.blocks[0], 1, 8, Recompute::kSelective),
            blockActivationBytes(model, model.blocks[0], 1, 8));
  // Full recomputation keeps the block input only.
  EXPECT_EQ(
      static_cast<double>(blockActivationBytes(model, model.blocks[0], 1, 8, Recompute::kFull)),
      e * sbh);
}

TEST(BlockSpec, UnfusedGroupedQueryAttentionKeepsBroadcastKeysAndValues) {
  // Llama-3-70B without flash attention (t = 8, b = 1, s = 8192, e = 2, no dropout): the batched
  // GEMMs of the unfused core keep K and V broadcast to all a heads, and the softmax output once
  // (no dropout: x V's input is the softmax output already kept).
  ModelConfig model = bundled("llama3-70b");
  model.spec.flash_attention = false;
  const double e = 2, s = 8192, h = 8192, a = 64, f = 28672, t = 8;
  const double sbh = s * h;
  const double unsplit = 4 * e * sbh;                         // two norms, QKV, fc1 inputs
  const double core = 3 * e * sbh / t + e * (a / t) * s * s;  // Q, K, V broadcast; softmax
  const double projection = e * sbh / t;
  const double mlp = e * s * 2 * f / t + e * s * f / t;
  EXPECT_EQ(static_cast<double>(blockActivationBytes(model, model.blocks[0], 1, 8)),
            unsplit + core + projection + mlp);
}

TEST(BlockSpec, GptActivationsMatchMegatronsTheoreticalMemory) {
  // theoretical_memory_usage.py assumes sequence parallelism and selective recomputation:
  // s b h (18 + 4 f/h) / t per layer. GPT-3 175B at t = 8, b = 1.
  const ModelConfig gpt3 = bundled("gpt3-175b");
  const double s = 2048, h = 12288, f = 49152, t = 8;
  EXPECT_EQ(static_cast<double>(
                blockActivationBytes(gpt3, gpt3.blocks[0], 1, 8, Recompute::kSelective, true)),
            s * h * (18 + 4 * f / h) / t);
}

TEST(BlockSpec, Fp8MakesTheLinearLayersGemmsFp8) {
  ModelConfig model = bundled("llama3-8b");
  model.spec.fp8 = true;
  Strategy strategy = Strategy::of(1, 1, 1, 1, 1);
  const IterationPlan plan =
      buildIterationPlan(model, test::cluster(8, 1, test::kSlowLinks), strategy);
  int fp8_gemms = 0, bf16_gemms = 0;
  for (const UniqueEvent& u : plan.events.events()) {
    if (u.event.op != "gemm") continue;
    (u.event.dtype == DType::kFp8 ? fp8_gemms : bf16_gemms)++;
  }
  // Linear layers (QKV, projection, fc1, fc2: forward, dgrad, wgrad) are fp8; the LM head's three
  // GEMMs stay bf16, as Transformer Engine runs Megatron's output layer.
  EXPECT_GT(fp8_gemms, 0);
  EXPECT_EQ(bf16_gemms, 3);
  // Transformer Engine keeps the fp8 cast of a linear layer's input: one byte for each of the four
  // GEMM inputs (QKV, projection, fc1, fc2) instead of two.
  ModelConfig bf16 = bundled("llama3-8b");
  const double s = 8192, h = 4096, f = 14336;
  const double gemm_inputs = s * h + s * h + s * h + s * f;  // elements, t = 1, b = 1
  EXPECT_EQ(static_cast<double>(blockActivationBytes(bf16, bf16.blocks[0], 1, 1) -
                                blockActivationBytes(model, model.blocks[0], 1, 1)),
            gemm_inputs);
}

TEST(BlockSpec, BadSpecsNameTheKey) {
  const std::string base = test::modelYaml(64, 4, 256, 32, 512, 2);
  auto error = [&](const std::string& extra) {
    try {
      parseModelConfig(base + extra, "m.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(error("num_query_groups: 3\n"),
                  "m.yaml: num_query_groups: 3 does not divide num_heads 4");
  EXPECT_CONTAINS(error("normalization: batchnorm\n"),
                  "m.yaml: normalization: 'batchnorm': must be layernorm or rmsnorm");
  EXPECT_CONTAINS(error("activation: relu\n"),
                  "m.yaml: activation: 'relu': must be gelu or swiglu");
  EXPECT_CONTAINS(error("hidden_dropout: 1.5\n"), "m.yaml: hidden_dropout: 1.5");
  EXPECT_CONTAINS(error("flash_attention: maybe\n"), "m.yaml: flash_attention");
  // M must divide the K/V heads as well as the query heads (Megatron's rule).
  const ModelConfig gqa = parseModelConfig(base + "num_query_groups: 2\n", "m.yaml");
  EXPECT_CONTAINS(
      *strategyViolation(gqa, test::cluster(8, 1, test::kSlowLinks), Strategy::of(4, 1, 1, 1, 1)),
      "M=4 does not divide num_query_groups=2");
}

}  // namespace
}  // namespace evsim

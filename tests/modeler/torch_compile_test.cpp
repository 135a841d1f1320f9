// torch.compile on and off under the fsdp framework (Strategy::torch_compile): the iteration
// differs by exactly the eager kernels' time less the fused kernels' they replace, each timed by
// the device's memory model (bytes / (2000 GB/s x 0.8) + 2 us per kernel on the round test GPU),
// every byte count worked by hand below. Megatron keeps its fused list and takes no setting.
#include <gtest/gtest.h>

#include <string>

#include "config/model_config.h"
#include "modeler/cost_model.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "support/round_gpu.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// The round GPU without host time: one device's step is the sum of its kernels.
ClusterConfig roundGpuNoHost() {
  // bf16 for the model's kernels, fp32 for the optimizer step (the same in both runs).
  std::string yaml =
      test::roundGpuYaml("round-gpu", "Round GPU", "", "fp16: 324, bf16: 324, fp32: 19.5");
  yaml.replace(yaml.find("host_op_us: {value: 20"), 22, "host_op_us: {value: 0");
  return test::roundGpuCluster(yaml);
}

// torchtitan's way on one GPU: FSDP with torch.compile on.
Strategy compiledFsdp() {
  Strategy s = Strategy::of(1, 1, 1, 1, 1);
  s.framework = Framework::kFsdp;
  s.torch_compile = TorchCompile::kOn;
  return s;
}

// tiny-llama in bf16: grouped-query attention (4 query, 2 K/V heads of d = 16), T = 32 tokens.
ModelConfig tinyLlamaBf16() {
  ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  model.dtype = DType::kBf16;
  return model;
}

double iterationUs(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& s) {
  IterationPlan plan = buildIterationPlan(model, cluster, s);
  CostModel costs(cluster, nullptr, true);
  std::vector<EventCost> event_costs = costs.costAll(plan.events);
  return simulate(std::move(plan), std::move(event_costs)).summary.iteration_us;
}

// One memory-bound kernel of `bytes` on the round GPU: 1.6e6 bytes per us, 2 us to launch.
double kernelUs(double bytes) { return bytes / 1.6e6 + 2; }

TEST(TorchCompile, EagerMinusCompiledIsTheEagerKernelsLessTheFusedOnes) {
  // tiny-llama in bf16 (e = 2) on one GPU, micro-batch 1: T = 32 tokens, h = 64, 4 query and 2
  // K/V heads of d = 16, ffn f = 192, vocabulary v = 512, 4 blocks.
  const ModelConfig model = tinyLlamaBf16();
  const ClusterConfig cluster = roundGpuNoHost();
  Strategy s = compiledFsdp();
  ASSERT_FALSE(strategyViolation(model, cluster, s));
  const double compiled = iterationUs(model, cluster, s);
  s.torch_compile = TorchCompile::kOff;
  const double eager = iterationUs(model, cluster, s);
  s.torch_compile = TorchCompile::kDefault;  // torchtitan's default: compile off
  EXPECT_DOUBLE_EQ(iterationUs(model, cluster, s), eager);

  const double e = 2, T = 32, h = 64, F = 32 * 192, L = 32 * 512, N = T * h;
  // Per block, forward, eager: two RMSNorms of 8 kernels, N (28 + 4e) + 24 T + e h bytes each;
  // SwiGLU's 2 kernels, 5 e F. RoPE's complex kernels and repeat_kv's copies run compiled or
  // not (Inductor falls back on complex tensors): no difference.
  double block_us = 2 * (8 * 2 + (N * (28 + 4 * e) + 24 * T + e * h) / 1.6e6);
  block_us += 2 * 2 + 5 * e * F / 1.6e6;
  // ... backward: two RMSNorms of 16 kernels, N (8e + 76) + 40 T + 2 e h each; SwiGLU's 3
  // kernels, 9 e F; autograd's sums of the input gradients of wq, wk, wv (2) and w1, w3 (1),
  // 3 e N each.
  block_us += 2 * (16 * 2 + (N * (8 * e + 76) + 40 * T + 2 * e * h) / 1.6e6);
  block_us += 3 * 2 + 9 * e * F / 1.6e6;
  block_us += 3 * kernelUs(3 * e * N);
  // ... less the fused kernels: rmsnorm_fwd 2eN (x2), swiglu_fwd 3eF; rmsnorm_bwd 3eN (x2),
  // swiglu_bwd 5eF.
  block_us -= 2 * kernelUs(2 * e * N) + kernelUs(3 * e * F);
  block_us -= 2 * kernelUs(3 * e * N) + kernelUs(5 * e * F);
  // The loss: eager forward 3 kernels, (e + 4) L + 16 L + 12 T + 8; backward 4 kernels,
  // 4 L + 12 T + 8 + 16 L + (4 + e) L; fused cross_entropy_fwd e L and _bwd 2 e L.
  double loss_us = 3 * 2 + ((e + 4) * L + 16 * L + 12 * T + 8) / 1.6e6;
  loss_us += 4 * 2 + (4 * L + 12 * T + 8 + 16 * L + (4 + e) * L) / 1.6e6;
  loss_us -= kernelUs(e * L) + kernelUs(2 * e * L);
  // The final norm sits outside torchtitan's compiled blocks: eager both ways, no difference.
  EXPECT_NEAR(eager - compiled, 4 * block_us + loss_us, 1e-6);
  EXPECT_GT(eager - compiled, 0);
  // Compiled blocks with the loss eager (torchtitan before 2025-04): the loss's difference alone.
  s.torch_compile = TorchCompile::kBlocks;
  EXPECT_NEAR(iterationUs(model, cluster, s) - compiled, loss_us, 1e-6);
}

TEST(TorchCompile, ComplexRopeAndRepeatKvAreKernelsOfTheirOwnCompiledOrNot) {
  // tiny-llama as above, compiled. Against Megatron's fused list on the same model, a block's
  // FSDP list has, forward: RoPE's 3 kernels on Q (n = T x 4 x d) and on K (T x 2 x d) instead of
  // the fused rope_fwd (2e(q + k) bytes); repeat_kv's copies of K and V, each e k read and 2 e k
  // written (n_rep = 2). Backward: RoPE's 3 + 3 kernels instead of rope_bwd; the copies' sums,
  // 2 e k read and e k written each. Counted on the plans' op lists.
  const ModelConfig model = tinyLlamaBf16();
  const ClusterConfig cluster = roundGpuNoHost();
  Strategy s = compiledFsdp();
  const IterationPlan plan = buildIterationPlan(model, cluster, s);
  const int64_t e = 2, T = 32, d = 16, k = T * 2 * d;
  int repeat = 0, repeat_bwd = 0, rope_kernels = 0, fused_rope = 0;
  for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
    for (const OpInstance& op : *ops) {
      if (op.layer < 0) continue;
      const Event& ev = plan.events[op.event].event;
      if (op.name == "repeat_kv_k" || op.name == "repeat_kv_v") {
        ++repeat;
        EXPECT_EQ(ev.dim("read_bytes"), e * k);
        EXPECT_EQ(ev.dim("write_bytes"), 2 * e * k);
      } else if (op.name == "repeat_kv_k_bwd" || op.name == "repeat_kv_v_bwd") {
        ++repeat_bwd;
        EXPECT_EQ(ev.dim("read_bytes"), 2 * e * k);
        EXPECT_EQ(ev.dim("write_bytes"), e * k);
      } else if (op.name.starts_with("rope_") && op.name != "rope_bwd") {
        ++rope_kernels;
      } else if (op.name == "rope" || op.name == "rope_bwd") {
        ++fused_rope;
      }
    }
  }
  EXPECT_EQ(repeat, 4 * 2);      // 4 blocks, K and V
  EXPECT_EQ(repeat_bwd, 4 * 2);
  EXPECT_EQ(rope_kernels, 4 * (3 + 3) * 2);  // Q and K, forward and backward
  EXPECT_EQ(fused_rope, 0);
  // Megatron's fused attention takes GQA as it is: no copies, and its fused RoPE.
  s.framework = Framework::kMegatron;
  s.torch_compile = TorchCompile::kDefault;
  for (const OpInstance& op : buildIterationPlan(model, cluster, s).stages[0].forward) {
    EXPECT_FALSE(op.name.starts_with("repeat_kv")) << op.name;
    EXPECT_NE(op.name, "rope_float");
  }
}

// SDPA takes repeat_kv's copies: the fused attention saves Q, K and V all at the query heads'
// width under FSDP (tiny-llama, bf16, b = 1: T = 32, a = 4, g = 2, d = 16), beside its fp32
// log-sum-exp: 2 x 32 x 16 x (4 + 4 + 4) + 4 x 4 x 32 = 12,800 bytes; Megatron's fused kernel
// takes K and V at g heads: 2 x 32 x 16 x (4 + 2 + 2) + 512 = 8,704.
TEST(TorchCompile, FusedAttentionSavesTheRepeatedKeysAndValues) {
  const ModelConfig model = tinyLlamaBf16();
  const ClusterConfig cluster = roundGpuNoHost();
  auto savedByAttention = [&](Framework framework) {
    Strategy s = Strategy::of(1, 1, 1, 1, 1);
    s.framework = framework;
    const IterationPlan plan = buildIterationPlan(model, cluster, s);
    for (const OpInstance& op : plan.stages[0].forward) {
      if (op.layer >= 0 && op.name == "flash_attention") return op.saved_bytes;
    }
    ADD_FAILURE() << "no flash_attention op";
    return int64_t{-1};
  };
  EXPECT_EQ(savedByAttention(Framework::kFsdp), 12'800);
  EXPECT_EQ(savedByAttention(Framework::kMegatron), 8'704);
}

TEST(TorchCompile, MegatronKeepsItsFusedKernelsAndRefusesTheSetting) {
  ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  const ClusterConfig cluster = roundGpuNoHost();
  Strategy s = Strategy::of(1, 1, 1, 1, 1);
  EXPECT_FALSE(s.eagerKernels());
  for (const OpInstance& op : buildIterationPlan(model, cluster, s).stages[0].forward) {
    EXPECT_EQ(op.name.find("rmsnorm_float"), std::string_view::npos);
  }
  s.torch_compile = TorchCompile::kOff;
  const auto why = strategyViolation(model, cluster, s);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("--torch-compile off: only with --framework fsdp"), std::string::npos);
  EXPECT_THROW(parseTorchCompile("maybe"), InputError);
  EXPECT_EQ(parseTorchCompile("blocks"), TorchCompile::kBlocks);
}

}  // namespace
}  // namespace evsim

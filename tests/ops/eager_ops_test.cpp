// Eager PyTorch's kernels (ops/eager_ops.h) and FSDP2's copies (ops/fsdp_copies.h): kernel counts
// and bytes against closed forms worked by hand from the aten ops they lower to, and where the
// op lists place them.
#include "ops/eager_ops.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "config/model_config.h"
#include "ops/fsdp_copies.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

int64_t bytesOf(const EagerKernels& kernels) {
  int64_t sum = 0;
  for (const EagerKernel& k : kernels) sum += k.read_bytes + k.write_bytes;
  return sum;
}

TEST(EagerOps, RmsNormIsEightKernelsForwardAndSixteenBackward) {
  // rows R = 4, cols C = 8 (N = 32), bf16 (e = 2). Forward, per kernel: float eN + 4N, pow 8N,
  // mean 4N + 4R, + eps 8R, rsqrt 8R, x * r 8N + 4R, type_as 4N + eN, * weight 2eN + eC:
  // N (28 + 4e) + 24 R + e C = 32 x 36 + 96 + 16 = 1264.
  const int64_t R = 4, C = 8, N = R * C, e = 2;
  const EagerKernels fwd = eagerRmsNormForward(R, C, e);
  EXPECT_EQ(fwd.size(), 8u);
  EXPECT_EQ(bytesOf(fwd), N * (28 + 4 * e) + 24 * R + e * C);
  EXPECT_EQ(bytesOf(fwd), 1264);
  // Backward: * weight's two products 2eN + eC and 3eN, the weight's sum eN + eC, type_as's
  // eN + 4N, x * r's products 8N + 4R and 12N, r's sum 4N + 4R, rsqrt's pow, scale and product
  // 8R + 8R + 12R, mean's expand-divide 4R + 4N, pow's copy, scale and product 8N + 8N + 12N, the
  // two gradients of x.float() summed 12N, x.float()'s cast back 4N + eN:
  // N (8e + 76) + 40 R + 2 e C = 32 x 92 + 160 + 32 = 3136.
  const EagerKernels bwd = eagerRmsNormBackward(R, C, e);
  EXPECT_EQ(bwd.size(), 16u);
  EXPECT_EQ(bytesOf(bwd), N * (8 * e + 76) + 40 * R + 2 * e * C);
  EXPECT_EQ(bytesOf(bwd), 3136);
  // The fused kernel reads x and writes y: 2 e N = 128 bytes, a tenth of the eager forward.
  EXPECT_EQ(makeCompute("rmsnorm_fwd", {{"rows", R}, {"cols", C}}, "", DType::kBf16).memory_bytes,
            2 * e * N);
  // Kept for the backward: x.float() (4N), the rsqrt (4R) and type_as's output (eN).
  EXPECT_EQ(eagerRmsNormSavedBytes(R, C, e), 4 * N + 4 * R + e * N);
}

TEST(EagerOps, RopeSwiGluAndTheLoss) {
  const int64_t e = 2;
  // RoPE on 8 tokens of 3 heads of 16 (n = 384), positions 8 (freqs_cis 8 x 8 complex64 = 512 B):
  // float en + 4n, complex multiply 8n + 512, type_as 4n + en: (2e + 16) n + 512 each way.
  const int64_t n = 8 * 3 * 16;
  EXPECT_EQ(eagerRopeForward(8, 3, 16, 8, e).size(), 3u);
  EXPECT_EQ(bytesOf(eagerRopeForward(8, 3, 16, 8, e)), (2 * e + 16) * n + 4 * 8 * 16);
  EXPECT_EQ(bytesOf(eagerRopeBackward(8, 3, 16, 8, e)), 20 * n + 512);
  // SwiGLU over F = 1000 outputs: silu 2eF, multiply 3eF; backward three products of 3eF.
  EXPECT_EQ(eagerSwiGluForward(1000, e).size(), 2u);
  EXPECT_EQ(bytesOf(eagerSwiGluForward(1000, e)), 10'000);
  EXPECT_EQ(eagerSwiGluBackward(1000, e).size(), 3u);
  EXPECT_EQ(bytesOf(eagerSwiGluBackward(1000, e)), 18'000);
  // Cross-entropy over T = 4 rows of v = 100 (L = 400): .float() eL + 4L, log_softmax 3 reads of
  // 4L and a 4L write, nll_loss 8T labels + 4T picked -> 8; backward: zeroed gradient 4L,
  // nll_loss_backward 8T + 8 -> 4T, log_softmax_backward 12L + 4L, cast back 4L + eL.
  const int64_t T = 4, L = 400;
  EXPECT_EQ(eagerCrossEntropyForward(T, 100, e).size(), 3u);
  EXPECT_EQ(bytesOf(eagerCrossEntropyForward(T, 100, e)), (e + 4) * L + 16 * L + 12 * T + 8);
  EXPECT_EQ(eagerCrossEntropyBackward(T, 100, e).size(), 4u);
  EXPECT_EQ(bytesOf(eagerCrossEntropyBackward(T, 100, e)),
            4 * L + 12 * T + 8 + 16 * L + (4 + e) * L);
  // A fill reads nothing: read_bytes 0 is a valid memory_pass, a negative one is not.
  EXPECT_EQ(makeCompute("memory_pass", {{"read_bytes", 0}, {"write_bytes", 16}}, "", DType::kBf16)
                .memory_bytes,
            16);
  EXPECT_THROW(
      makeCompute("memory_pass", {{"read_bytes", -1}, {"write_bytes", 16}}, "", DType::kBf16),
      InputError);
}

TEST(EagerOps, RepeatKvCopiesKAndVToEveryQueryHeadAndSumsThemBack) {
  // 8 tokens, 2 K/V heads of 16 on this rank, each to n_rep = 4 query heads, bf16: K (and V) is
  // 8 x 2 x 16 x 2 = 512 bytes, its copy 2,048. Forward, per tensor: 512 read + 2,048 written;
  // backward, the sum over the 4 copies: 2,048 read + 512 written.
  const EagerKernels fwd = eagerRepeatKvForward(8, 2, 4, 16, 2);
  ASSERT_EQ(fwd.size(), 2u);
  for (const EagerKernel& k : fwd) {
    EXPECT_EQ(k.read_bytes, 512);
    EXPECT_EQ(k.write_bytes, 2048);
  }
  const EagerKernels bwd = eagerRepeatKvBackward(8, 2, 4, 16, 2);
  ASSERT_EQ(bwd.size(), 2u);
  for (const EagerKernel& k : bwd) {
    EXPECT_EQ(k.read_bytes, 2048);
    EXPECT_EQ(k.write_bytes, 512);
  }
  EXPECT_EQ(bytesOf(fwd), 2 * (512 + 2048));
}

TEST(EagerOps, FsdpCopiesMoveTheGatheredBufferAndWidenTheGradients) {
  // Copy-out: the whole gathered buffer read and written; copy-in: bf16 gradients read, fp32
  // written.
  EXPECT_EQ(fsdpAllGatherCopyOut(1000, DType::kBf16).event.memory_bytes, 2000);
  EXPECT_EQ(fsdpReduceScatterCopyIn(1000, DType::kBf16).event.memory_bytes, 2000 + 4000);
}

// tiny-llama in bf16 on 2 GPUs, FSDP (ZeRO-3 over D = 2): one block's parameters are wq 64 x 64,
// wk and wv 64 x 32 each, wo 64 x 64, w1 and w3 64 x 192 each, w2 192 x 64 and two norm gains of
// 64: 4096 + 4096 + 4096 + 24576 + 12288 + 128 = 49,280.
TEST(EagerOps, FsdpPlansCopyOutAfterEveryGatherAndCopyInBeforeEveryScatter) {
  ModelConfig model = loadModelConfig(test::configPath("models", "tiny-llama"));
  model.dtype = DType::kBf16;
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "cpu-local"));
  Strategy s = Strategy::of(1, 1, 2, 1, 2);
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  ASSERT_FALSE(strategyViolation(model, cluster, s));
  const IterationPlan plan = buildIterationPlan(model, cluster, s);
  const int64_t block = 49'280;
  std::map<std::string, int> count;
  for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
    for (size_t i = 0; i < ops->size(); ++i) {
      const OpInstance& op = (*ops)[i];
      if (op.name != "fsdp_copy_out" && op.name != "fsdp_copy_in") continue;
      EXPECT_EQ(op.stream, Stream::kCompute);
      const Event& e = plan.events[op.event].event;
      if (op.layer >= 0 && op.name == "fsdp_copy_out") {
        EXPECT_EQ(e.dim("read_bytes"), 2 * block);
        EXPECT_EQ(e.dim("write_bytes"), 2 * block);
      } else if (op.layer >= 0) {
        EXPECT_EQ(e.dim("read_bytes"), 2 * block);
        EXPECT_EQ(e.dim("write_bytes"), 4 * block);
      }
      count[std::string(op.name)] += op.layer >= 0 ? 1 : 0;
    }
  }
  // Four blocks, each gathered for its forward and again for its backward (reshard after
  // forward without PP), each reduce-scattered once.
  EXPECT_EQ(count["fsdp_copy_out"], 8);
  EXPECT_EQ(count["fsdp_copy_in"], 4);
  // Megatron's ZeRO-3 (DeepSpeed-like) has no such copies.
  Strategy megatron = s;
  megatron.framework = Framework::kMegatron;
  for (const OpInstance& op : buildIterationPlan(model, cluster, megatron).stages[0].forward) {
    EXPECT_NE(op.name, "fsdp_copy_out");
  }
}

}  // namespace
}  // namespace evsim

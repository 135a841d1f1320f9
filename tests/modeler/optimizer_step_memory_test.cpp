// The optimizer step as a moment of its own (modeler/memory_components.h): foreach AdamW's
// exp_avg_sq_sqrt (torch/optim/adamw.py _multi_tensor_adamw), half the Adam state of the rank's
// largest model part, beside the model states and what stays to the next step. Worked by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "modeler/memory_components.h"
#include "modeler/memory_model.h"
#include "support/test_support.h"

namespace evsim {
namespace {

constexpr int64_t kWorkspace = int64_t{32} << 20;  // the default cuBLAS workspace, 33,554,432

Strategy fsdp(int tp, int pp, int dp, int64_t micro_batch, int64_t global_batch,
              Schedule schedule = Schedule::kDapple) {
  Strategy s = Strategy::of(tp, pp, dp, micro_batch, global_batch, schedule);
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  return s;
}

TEST(OptimizerStepMemory, ForeachTemporaryIsHalfTheAdamState) {
  // exp_avg_sq_sqrt is shaped like exp_avg_sq: half of Adam's two equal moments.
  Strategy s = fsdp(1, 1, 4, 2, 64);
  s.optimizer_impl = OptimizerImpl::kForeach;
  EXPECT_EQ(optimizerStepTransientBytes(s, 8000), 4000);
  s.optimizer_impl = OptimizerImpl::kFused;  // one kernel, no temporary
  EXPECT_EQ(optimizerStepTransientBytes(s, 8000), 0);
  s.framework = Framework::kMegatron;  // Apex / TE fused Adam
  EXPECT_EQ(optimizerStepTransientBytes(s, 8000), 0);
}

TEST(OptimizerStepMemory, ForeachStepIsThePeakWhenActivationsAreSmall) {
  // FSDP over G = 4, no PP, one chunk of 400,000,000 parameters: states 16 / 4 x 4e8 =
  // 1,600,000,000, Adam moments 8 / 4 x 4e8 = 800,000,000, so exp_avg_sq_sqrt 400,000,000.
  // The step moment: states + 400,000,000 + the workspace = 2,033,554,432. The backward's
  // moment holds 1,000,000 of activations and, at a block's backward (no root group here), the DP
  // buffers (2 g + e + 4) B = 10 x 1,000,000, above the loss's moment (its transient < 3 MB and
  // g B): under 100 MB beside the states, so the step peaks.
  const ModelConfig model = test::model(64, 4, 256, 128, 1000, 2, "bf16");
  Strategy s = fsdp(1, 1, 4, 2, 64);
  s.optimizer_impl = OptimizerImpl::kForeach;
  ChunkMemoryInput chunk;
  chunk.parameters = 400000000;
  chunk.activation_bytes = 1000000;
  chunk.largest_layer_parameters = 1000000;
  chunk.largest_block_parameters = 1000000;
  const StageMemory m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.model_state_bytes, 1600000000);
  EXPECT_EQ(m.optimizer_step_bytes, 400000000);
  EXPECT_EQ(m.step_allocated_bytes, 1600000000 + 400000000 + kWorkspace);
  EXPECT_TRUE(m.peak_at_optimizer_step);
  EXPECT_EQ(m.allocated_bytes, 2033554432);
  // Reserved: the states + 1.1 x (400,000,000 + the workspace) + the copy-in pool's idle block
  // (2 g B less the one in use at a block's backward, resharding without PP: 2,000,000):
  // 1,600,000,000 + 476,909,875 + 2,000,000.
  EXPECT_EQ(m.reserved_bytes, 2078909875);
  // The search's peak-only estimate (the closed-form tier) sees the step's moment too: its peak
  // is the step's 2,033,554,432 plus what lies outside the allocator, and a card of exactly that
  // fits (no headroom) where one byte less does not.
  const std::vector<DeviceChunkSums> sums = deviceChunkSums(s, 8, {chunk});
  const int64_t device = m.allocated_bytes + m.overhead_bytes;
  const MemoryPeak peak = estimateMemoryPeak(model, s, device, sums, 0.0);
  EXPECT_EQ(peak.peak_bytes, device);
  EXPECT_EQ(peak.peak_stage, 0);
  EXPECT_TRUE(peak.fits);
  EXPECT_FALSE(estimateMemoryPeak(model, s, device - 1, sums, 0.0).fits);

  // Fused: no temporary; the step holds the states and the workspace, below the backward.
  s.optimizer_impl = OptimizerImpl::kFused;
  const StageMemory f = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(f.optimizer_step_bytes, 0);
  EXPECT_EQ(f.step_allocated_bytes, 1600000000 + kWorkspace);
  EXPECT_FALSE(f.peak_at_optimizer_step);
  EXPECT_GT(f.allocated_bytes, f.step_allocated_bytes);
  EXPECT_LT(f.allocated_bytes, 1700000000);
}

TEST(OptimizerStepMemory, OneOptimizerPerModelPart) {
  // P = 2 interleaved, v = 2, G = 2: device 0 holds virtual stages 0 (300,000,000 parameters) and
  // 2 (100,000,000). torchtitan steps one optimizer per model part, each freeing its temporary:
  // 4 / 2 x 300,000,000 = 600,000,000 (not 800,000,000 for both). States 16 / 2 x 4e8 =
  // 3,200,000,000. Pipelining keeps to the next step (nothing in flight): a = 2 x 128 x 64 =
  // 16,384 bytes a stage input; device 0 receives in one chunk (m = 4 buffers and their .grad,
  // 8a) and sends from two (4 gradient receive buffers each, 8a): 16a = 262,144. Step moment:
  // 3,200,000,000 + 600,000,000 + 262,144 + the workspace = 3,833,816,576. Under PP the
  // backward holds the fp32 accumulated gradients (4 bytes a chunk parameter), far above: the
  // step is not the peak.
  const ModelConfig model = test::model(64, 4, 256, 128, 1000, 8, "bf16");
  Strategy s = fsdp(1, 2, 2, 1, 8, Schedule::kInterleaved);
  s.virtual_stages = 2;
  s.optimizer_impl = OptimizerImpl::kForeach;
  ChunkMemoryInput big, small;
  big.parameters = 300000000;
  small.parameters = 100000000;
  for (ChunkMemoryInput* c : {&big, &small}) {
    c->activation_bytes = 1000000;
    c->largest_layer_parameters = 1000000;
  }
  const MemoryEstimate e =
      estimateMemory(model, s, 4, int64_t{80} << 30, {big, small, small, small}, 0.0);
  const StageMemory& d0 = e.stages[0];
  EXPECT_EQ(d0.model_state_bytes, 3200000000);
  EXPECT_EQ(d0.optimizer_step_bytes, 600000000);
  EXPECT_EQ(d0.step_allocated_bytes, 3833816576);
  EXPECT_FALSE(d0.peak_at_optimizer_step);
  EXPECT_GT(d0.allocated_bytes, d0.step_allocated_bytes);
  // Device 1: virtual stages 1 and 3, 100,000,000 each: 200,000,000.
  EXPECT_EQ(e.stages[1].optimizer_step_bytes, 200000000);
}

TEST(OptimizerStepMemory, MegatronFp32GradientCopyUnderBf16Reduction) {
  // Megatron, D = 4, ZeRO-1 (distributed optimizer), --grad-reduce-in-bf16, one chunk of
  // 400,000,000 parameters: states 2 (weights) + 2 (bf16 main gradients) + 12 / 4 = 7 bytes a
  // parameter, 2,800,000,000. At the step the optimizer's shard of the gradients is copied to
  // fp32 (shard_main_param.grad = shard_model_grad.float()): 4 x 400,000,000 / 4 =
  // 400,000,000. Step: 2,800,000,000 + 400,000,000 + the workspace = 3,233,554,432, above the
  // backward's moment (1,000,000 of activations and a loss transient under 1 MB beside the
  // states and the workspace). With fp32 main gradients .float() copies nothing: states 9 bytes a
  // parameter, 3,600,000,000, and the step only adds the workspace. ZeRO-0 (the float16
  // optimizer): every parameter's gradient, 1,600,000,000, beside 2 + 2 + 12 = 16 bytes a
  // parameter.
  const ModelConfig model = test::model(64, 4, 256, 128, 1000, 2, "bf16");
  Strategy s = Strategy::of(1, 1, 4, 2, 64);
  s.zero_stage = 1;
  s.grad_reduce_in_bf16 = true;
  ChunkMemoryInput chunk;
  chunk.parameters = 400000000;
  chunk.activation_bytes = 1000000;
  chunk.largest_layer_parameters = 1000000;
  StageMemory m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.model_state_bytes, 2800000000);
  EXPECT_EQ(m.gradient_copy_bytes, 400000000);
  EXPECT_EQ(m.step_allocated_bytes, 2800000000 + 400000000 + kWorkspace);
  EXPECT_TRUE(m.peak_at_optimizer_step);
  EXPECT_EQ(m.allocated_bytes, 3233554432);
  s.grad_reduce_in_bf16 = false;
  m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.model_state_bytes, 3600000000);
  EXPECT_EQ(m.gradient_copy_bytes, 0);
  EXPECT_EQ(m.step_allocated_bytes, 3600000000 + kWorkspace);
  EXPECT_FALSE(m.peak_at_optimizer_step);
  s.grad_reduce_in_bf16 = true;
  s.zero_stage = 0;
  m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.model_state_bytes, 6400000000);
  EXPECT_EQ(m.gradient_copy_bytes, 1600000000);
  EXPECT_EQ(m.step_allocated_bytes, 6400000000 + 1600000000 + kWorkspace);
}

TEST(OptimizerStepMemory, PipelineOutputMergeAtTheLastStage) {
  // FSDP, P = 2 (1F1B), D = 2, m = 8 / (1 x 2) = 4 micro-batches of T = 128 tokens, V = 1,000
  // padded to 1,024, h = 64, two chunks of 1,000,000 parameters: states 16 / 2 x 1e6 =
  // 8,000,000. After the last backward the last stage concatenates its 4 outputs: 4 x 2 x 128 x
  // 1,024 = 1,048,576, beside what pipelining keeps (nothing in flight): the 4 receive buffers
  // and their .grad, 8 a with a = 2 x 128 x 64 = 16,384 (131,072), and output_chunks, another
  // 1,048,576. Fused AdamW: no step temporary, so that moment is the larger: 8,000,000 +
  // 1,048,576 + 1,179,648 + the workspace = 43,782,656. Stage 0 has no head: no merge.
  const ModelConfig model = test::model(64, 4, 256, 128, 1000, 8, "bf16");
  Strategy s = fsdp(1, 2, 2, 1, 8);
  s.optimizer_impl = OptimizerImpl::kFused;
  ChunkMemoryInput chunk;
  chunk.parameters = 1000000;
  chunk.activation_bytes = 1000;
  chunk.largest_layer_parameters = 1000;
  const MemoryEstimate e = estimateMemory(model, s, 4, int64_t{80} << 30, {chunk, chunk}, 0.0);
  EXPECT_EQ(e.stages[0].output_merge_bytes, 0);
  const StageMemory& last = e.stages[1];
  EXPECT_EQ(last.model_state_bytes, 8000000);
  EXPECT_EQ(last.output_merge_bytes, 1048576);
  EXPECT_EQ(last.step_allocated_bytes, 43782656);
}

}  // namespace
}  // namespace evsim

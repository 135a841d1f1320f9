// What PyTorch holds under --framework fsdp (torchtitan) beside Megatron's accounting, each worked
// by hand on memory_components_test's small GPT: h = 1024, a = 16 (MHA, d = 64), f = 4096,
// s = 1024, V = 50257 (padded to 50304 at t = 1, 50432 at t = 2), bf16, micro-batch 2.
#include <gtest/gtest.h>

#include <vector>

#include "modeler/memory_components.h"
#include "modeler/memory_model.h"
#include "ops/layer_footprint.h"
#include "plan/layer_shape.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig smallModel() { return test::model(1024, 16, 4096, 1024, 50257, 4, "bf16"); }

Strategy fsdp(int tp, int pp, int dp) {
  Strategy s = Strategy::of(tp, pp, dp, 2, 2 * dp * 8);
  s.framework = Framework::kFsdp;
  return s;
}

// cross_entropy(pred.float()): beside the held fp32 log-softmax output, the backward's nll
// gradient and log_softmax_backward output (8 bytes per logit); DTensor's loss_parallel under TP
// keeps zeros_like(x), exp(x) and their sum (12). Megatron's vocab-parallel loss: e.
TEST(TorchMemory, CrossEntropyTransient) {
  const ModelConfig model = smallModel();
  const int64_t T = 2 * 1024;
  EXPECT_EQ(lossTransientBytes(model, fsdp(1, 1, 8), true), 8 * T * 50304);
  EXPECT_EQ(lossTransientBytes(model, fsdp(2, 1, 4), true), 12 * T * 25216);
  Strategy megatron = Strategy::of(2, 1, 4, 2, 64);
  EXPECT_EQ(lossTransientBytes(model, megatron, true), 2 * T * 25216);
  EXPECT_EQ(lossTransientBytes(model, fsdp(2, 1, 4), false), 0);
}

// PyTorch's ring attention backward, K at the query heads' width (torchtitan repeats K and V):
// CP 4, t = 1: T = 2 x 1024 / 4 = 512 tokens, 16 x 64 = 1024 columns, k = 2 x 512 x 1024 bytes.
// fp32 dQ, dK, dV (6k), fp32 dK|dV sent and received (8k), one step's bf16 dQ, dK, dV (3k), and
// the all-gathered K and V of all 4 ranks (8k) or the ring's pair sent and received (4k).
TEST(TorchMemory, ContextParallelBuffers) {
  const ModelConfig model = smallModel();
  const int64_t k = int64_t{2} * 512 * 1024;
  Strategy s = fsdp(1, 1, 2);
  s.cp = 4;
  EXPECT_EQ(tensorContextBufferBytes(model, s), 21 * k);  // torch's ALL_TO_ALL ring
  s.cp_comm = CpComm::kAllGather;
  EXPECT_EQ(tensorContextBufferBytes(model, s), 25 * k);  // ALL_GATHER, the Dec 2024 default
  // TP 2 with SP: T = 512 tokens, 512 columns: k halves, and the SP gather e T h comes first
  // (the backward's gathered input gradient: DTensor keeps the gathered input as an activation).
  s = fsdp(2, 1, 2);
  s.cp = 4;
  s.sequence_parallel = true;
  s.cp_comm = CpComm::kAllGather;
  EXPECT_EQ(tensorContextBufferBytes(model, s), int64_t{2} * 512 * 1024 + 25 * (k / 2));
  s.cp = 1;
  EXPECT_EQ(torchContextParallelBytes(1000, s), 0);
}

// torch.distributed.pipelining, m = 8 micro-batches, t = 1: one stage input or output is
// a = e T h = 2 x 2048 x 1024 bytes.
TEST(TorchMemory, PipelineStageBuffers) {
  const ModelConfig model = smallModel();
  const Strategy s = fsdp(1, 4, 2);
  const int64_t a = int64_t{2} * 2048 * 1024;
  // First stage, 4 in flight: 8 gradient receive buffers and the 4 outputs kept for backward.
  EXPECT_EQ(torchPipelineBufferBytes(model, s, {8, 1, true, false, 4}), 12 * a);
  // Middle stage, 3 in flight: 5 idle receive buffers and 5 kept input gradients, 8 gradient
  // receive buffers, 3 outputs.
  EXPECT_EQ(torchPipelineBufferBytes(model, s, {8, 1, false, false, 3}), 21 * a);
  // Last stage, 1 in flight: 7 idle receive buffers and 7 input gradients, and the bf16 logits
  // of all 8 micro-batches, 8 x 2 x 2048 x 50304.
  EXPECT_EQ(torchPipelineBufferBytes(model, s, {8, 1, false, true, 1}),
            14 * a + int64_t{8} * 2 * 2048 * 50304);
  // Two chunks, the first one among them, 10 in flight: no idle receive buffer (the 8 of the
  // second chunk are in flight), 16 gradient receive buffers, 10 outputs.
  EXPECT_EQ(torchPipelineBufferBytes(model, s, {8, 2, true, false, 10}), 26 * a);
  EXPECT_EQ(torchPipelineBufferBytes(model, fsdp(1, 1, 8), {8, 1, true, true, 1}), 0);
}

// DTensor TP keeps the all-gathered input of QKV and FC1 (T tokens), Megatron/TE the T / t shard:
// t = 2 with SP, T = 2048: 2 linears x e x (2048 - 1024) x h more per block.
TEST(TorchMemory, DTensorKeepsGatheredInputs) {
  const ModelConfig model = smallModel();
  Strategy s = fsdp(2, 1, 4);
  s.sequence_parallel = true;
  s.torch_compile = TorchCompile::kOn;  // the same kernels as Megatron's: only the inputs differ
  Strategy megatron = s;
  megatron.framework = Framework::kMegatron;
  megatron.torch_compile = TorchCompile::kDefault;
  const Placement group{2, 1, 2};
  const int64_t torch_block =
      modelFootprint(model, layerShape(model, s, group)).block(model.blocks[0]).saved_bytes;
  const int64_t megatron_block =
      modelFootprint(model, layerShape(model, megatron, group)).block(model.blocks[0]).saved_bytes;
  EXPECT_EQ(torch_block - megatron_block, int64_t{2} * 2 * 1024 * 1024);
}

// A block's gathers and the loss never coincide under FSDP: the peak adds the larger of the loss
// and (recompute + gathers); Megatron's SP buffer is kept for the step, beside the loss too.
TEST(TorchMemory, LossAndBlockTransientsApart) {
  const ModelConfig model = smallModel();
  Strategy s = fsdp(2, 1, 1);
  s.sequence_parallel = true;
  const int64_t loss = int64_t{12} * 2048 * 25216;       // 619,708,416
  // The backward's gathered input gradient (e T h); the gathered input is a saved activation.
  const int64_t gathers = int64_t{2} * 2048 * 1024;  // 4,194,304
  ChunkMemoryInput chunk;
  MemoryEstimate m = estimateMemory(model, s, 1, int64_t{80} << 30, {chunk});
  ASSERT_EQ(m.stages.size(), 1u);
  EXPECT_EQ(m.stages[0].loss_bytes, loss);
  EXPECT_EQ(m.stages[0].activation_transient_bytes, loss);
  EXPECT_EQ(m.stages[0].comm_transient_bytes, 0);
  chunk.recompute_transient_bytes = 700'000'000;  // + gathers > loss: the block's moment wins
  m = estimateMemory(model, s, 1, int64_t{80} << 30, {chunk});
  EXPECT_EQ(m.stages[0].activation_transient_bytes, 700'000'000);
  EXPECT_EQ(m.stages[0].comm_transient_bytes, gathers);
  Strategy megatron = s;
  megatron.framework = Framework::kMegatron;
  chunk.recompute_transient_bytes = 0;
  m = estimateMemory(model, megatron, 1, int64_t{80} << 30, {chunk});
  EXPECT_EQ(m.stages[0].activation_transient_bytes, int64_t{2} * 2048 * 25216);
  EXPECT_EQ(m.stages[0].comm_transient_bytes, 2 * gathers);  // Megatron's input and its gradient
}

}  // namespace
}  // namespace evsim

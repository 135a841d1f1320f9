// Each memory component of modeler/memory_components.h worked by hand for one small configuration:
// h = 1024, a = 16, f = 4096, s = 1024, V = 50257 (padded to 50304 at t = 1, 50432 at t = 2),
// bf16, micro-batch 2; and how memory_model.h adds them up. Plus the two behaviours the issue
// names: FSDP's states fall as 16 bytes/parameter / D, and the dev set's schedule ranking.
#include "modeler/memory_components.h"

#include <gtest/gtest.h>

#include <vector>

#include "plan/iteration_plan.h"
#include "modeler/memory_model.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig smallModel() { return test::model(1024, 16, 4096, 1024, 50257, 4, "bf16"); }

Strategy strategy(int tp, int pp, int dp, Framework framework = Framework::kMegatron) {
  Strategy s = Strategy::of(tp, pp, dp, 2, 2 * dp * 8);
  s.framework = framework;
  return s;
}

// One chunk of 1,000,000 parameters (largest layer 200,000) saving 50,000,000 activation bytes.
ChunkMemoryInput millionParameterChunk() {
  ChunkMemoryInput chunk;
  chunk.parameters = 1000000;
  chunk.activation_bytes = 50000000;
  chunk.largest_layer_parameters = 200000;
  return chunk;
}

TEST(MemoryComponents, StateBytesPerParameter) {
  // Megatron bf16: 2 / 4 / 12; distributed optimizer over 4: 2 / 4 / 3; ZeRO-3 over 4: all / 4.
  StateBytesPerParameter m =
      stateBytesPerParameter(Framework::kMegatron, DType::kBf16, 0, 1, false);
  EXPECT_DOUBLE_EQ(m.weights, 2);
  EXPECT_DOUBLE_EQ(m.gradients, 4);
  EXPECT_DOUBLE_EQ(m.optimizer, 12);
  m = stateBytesPerParameter(Framework::kMegatron, DType::kBf16, 1, 4, false);
  EXPECT_DOUBLE_EQ(m.total(), 2 + 4 + 3);
  m = stateBytesPerParameter(Framework::kMegatron, DType::kBf16, 3, 4, false);
  EXPECT_DOUBLE_EQ(m.total(), 18.0 / 4);
  // ZeRO-2 over 4 (DeepSpeed's grads_in_partition in the model dtype): 2 / 2/4 / 12/4; an fp32
  // model 4 / 4/4 / 8/4; with the optimizer offloaded the gradient keeps its 4/4 (not re-read).
  m = stateBytesPerParameter(Framework::kMegatron, DType::kBf16, 2, 4, false);
  EXPECT_DOUBLE_EQ(m.weights, 2);
  EXPECT_DOUBLE_EQ(m.gradients, 0.5);
  EXPECT_DOUBLE_EQ(m.optimizer, 3);
  m = stateBytesPerParameter(Framework::kMegatron, DType::kFp32, 2, 4, false);
  EXPECT_DOUBLE_EQ(m.gradients, 1);
  EXPECT_DOUBLE_EQ(m.optimizer, 2);
  EXPECT_DOUBLE_EQ(stateBytesPerParameter(Framework::kMegatron, DType::kBf16, 2, 4, true).gradients,
                   1);
  // FSDP: fp32 parameters, gradients and two moments, all sharded: 16 / G.
  m = stateBytesPerParameter(Framework::kFsdp, DType::kBf16, 3, 8, false);
  EXPECT_DOUBLE_EQ(m.weights, 0.5);
  EXPECT_DOUBLE_EQ(m.gradients, 0.5);
  EXPECT_DOUBLE_EQ(m.optimizer, 1.0);
  EXPECT_DOUBLE_EQ(stateBytesPerParameter(Framework::kFsdp, DType::kBf16, 0, 1, false).total(), 16);
}

TEST(MemoryComponents, DataParallelBuffers) {
  const ModelConfig model = smallModel();
  StageLayerFacts facts;
  facts.parameters = 5000;
  facts.largest_layer_parameters = 1000;
  // Megatron ZeRO-0/1: views of the contiguous buffers, whatever the DDP bucket size (the
  // timing's max(40M, 1M x D x C) parameters or --ddp-bucket-size): nothing added.
  EXPECT_EQ(dataParallelBufferBytes(model, strategy(1, 1, 4), 1, facts), 0);
  Strategy big_buckets = strategy(1, 1, 4);
  big_buckets.dp_bucket_bytes = int64_t{1} << 30;
  EXPECT_EQ(dataParallelBufferBytes(model, big_buckets, 1, facts), 0);
  EXPECT_EQ(dataParallelBufferBytes(model, big_buckets, 0, facts), 0);
  // ZeRO-2 (DeepSpeed, plan/zero2_buckets.h): one IPG buffer of reduce_bucket_size = 5e8
  // elements in bf16, 1e9 bytes, whatever the model's size; two with overlap_comm (--dp-overlap);
  // --dp-bucket-mb 1: 1 MiB of the fp32 wire (Megatron's bf16 reduction), 262,144 elements, a
  // bf16 buffer of 524,288 bytes each.
  Strategy zero2 = strategy(1, 1, 4);
  EXPECT_EQ(dataParallelBufferBytes(model, zero2, 2, facts), 1'000'000'000);
  zero2.dp_overlap = true;
  EXPECT_EQ(dataParallelBufferBytes(model, zero2, 2, facts), 2'000'000'000);
  zero2.dp_bucket_bytes = 1 << 20;
  EXPECT_EQ(dataParallelBufferBytes(model, zero2, 2, facts), 2 * 524288);
  zero2.dp_overlap = false;
  EXPECT_EQ(dataParallelBufferBytes(model, zero2, 2, facts), 524288);
  // DeepSpeed ZeRO-3 (reduce in bf16): 2 gathered (2 x 2 L) + gradient 2 L + reduce input 2 L.
  EXPECT_EQ(dataParallelBufferBytes(model, strategy(1, 1, 4), 3, facts), 8 * 1000);
  // FSDP, no PP, at a block's backward, with torchtitan 9dec370's root group (--fsdp-wrap root;
  // R = 1,200: embedding 600 and output 600, H = 600) and blocks of B = 800: the root gathered,
  // e R = 2,400, the output's gradient e H = 1,200, and, resharding after forward, 2 x 2 B + 2 B +
  // fp32 reduce input 4 B = 10 B = 8,000: 11,600.
  facts.largest_block_parameters = 800;
  facts.root_parameters = 1200;
  facts.head_gradient_parameters = 600;
  Strategy fsdp = strategy(1, 1, 4, Framework::kFsdp);
  fsdp.fsdp_wrap = FsdpWrap::kRoot;
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp, 3, facts), 2400 + 1200 + 8000);
  // Never reshard: every block stays gathered, 2 (S - R) = 7,600, plus one block's (2 + 4) B.
  fsdp.reshard = Reshard::kNever;
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp, 3, facts), 2400 + 1200 + 7600 + 4800);
  // With PP: gathered chunk 2 S and one group's bf16 autograd gradients 2 L before they are added
  // into the fp32 accumulation (whose 4 S the order walk places: accumulated_gradients_test).
  Strategy fsdp_pp = strategy(1, 2, 4, Framework::kFsdp);
  EXPECT_FALSE(fsdp_pp.reshardsAfterForward());
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp_pp, 3, facts), 2 * 5000 + 2 * 1000);
}

// The FSDP tests' stage: S = 5,000 parameters, the largest layer 1,000, the largest block B = 800,
// the root group's R = 1,200, the head's gradient 600.
StageLayerFacts fsdpFacts() {
  StageLayerFacts facts;
  facts.parameters = 5000;
  facts.largest_layer_parameters = 1000;
  facts.largest_block_parameters = 800;
  facts.root_parameters = 1200;
  facts.head_gradient_parameters = 600;
  return facts;
}

// At the loss, before any block's backward (torchtitan's FSDP2 wrapping, no PP): the root group
// gathered (e R = 2 x 1,200) and the blocks the forward left gathered: the last (default, 2 x
// 800), none (always), all (never: 2 x (5,000 - 1,200)). No gradient exists yet.
TEST(MemoryComponents, FsdpBuffersAtTheLoss) {
  const ModelConfig model = smallModel();
  StageLayerFacts facts = fsdpFacts();
  Strategy fsdp = strategy(1, 1, 4, Framework::kFsdp);
  fsdp.fsdp_wrap = FsdpWrap::kRoot;
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 2400 + 1600);
  fsdp.reshard = Reshard::kAlways;
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 2400);
  fsdp.reshard = Reshard::kNever;
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 2400 + 7600);
  // Under PP, and for Megatron, the one figure of dataParallelBufferBytes.
  Strategy fsdp_pp = strategy(1, 2, 4, Framework::kFsdp);
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp_pp, 3, facts), 2 * 5000 + 2 * 1000);
  EXPECT_EQ(fsdpLossBufferBytes(model, strategy(1, 1, 4), 3, facts), 8 * 1000);
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 0, facts), 0);
}

// torchtitan's current wrapping (--fsdp-wrap separate, the default): the embedding (E = 600) and
// [final norm, output] (H' = 1,000) FSDP groups of their own, blocks of B = 800, S = 5,000, bf16
// gathers, fp32 reduce-scatters, no root group (the root's 1,200 is not read).
TEST(MemoryComponents, FsdpSeparateEmbeddingAndHeadGroups) {
  const ModelConfig model = smallModel();
  StageLayerFacts facts = fsdpFacts();
  facts.embedding_parameters = 600;
  facts.head_parameters = 1000;
  Strategy fsdp = strategy(1, 1, 4, Framework::kFsdp);
  ASSERT_EQ(fsdp.fsdp_wrap, FsdpWrap::kSeparate);
  // At the last block's backward, resharding: two blocks gathered 2 x 2 B = 3,200, its gradient
  // 2 B = 1,600 and the reduce-scatter input FSDP keeps of the group before, the head's 4 H' =
  // 4,000 (larger than a block's 4 B): 8,800. Neither the embedding nor the head is gathered.
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp, 3, facts), 3200 + 1600 + 4000);
  // Never reshard: the embedding's group 2 E = 1,200 and every block 2 (S - E - H') = 6,800
  // stay gathered (the head's was resharded after its backward): 1,200 + 6,800 + 1,600 + 4,000.
  fsdp.reshard = Reshard::kNever;
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp, 3, facts), 1200 + 6800 + 1600 + 4000);
  // At the loss: the head's group kept since its forward, 2 H' = 2,000 (default and never), with
  // never the embedding's and every block too; under always nothing (the head resharded too).
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 2000 + 1200 + 6800);
  fsdp.reshard = Reshard::kDefault;
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 2000);
  fsdp.reshard = Reshard::kAlways;
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 0);
  // The copy-in stream's pool (memory_components.h): the embedding's output 2 E = 1,200 with
  // the first block's 2 B = 1,600 (1,200 < 1,600: a second block's too, 1,600), and the head's
  // 2 H' = 2,000, larger than a block's: 6,400; at a block's backward (resharding) one block's
  // output in use, 1,600 less.
  fsdp.reshard = Reshard::kDefault;
  EXPECT_EQ(allGatherStreamPoolBytes(model, fsdp, 3, facts, false), 1200 + 1600 + 1600 + 2000);
  EXPECT_EQ(allGatherStreamPoolBytes(model, fsdp, 3, facts, true), 1200 + 1600 + 2000);
  // The root wrapping: e R = 2,400 >= 2 B, so the root's block and one block's: 4,000.
  fsdp.fsdp_wrap = FsdpWrap::kRoot;
  EXPECT_EQ(allGatherStreamPoolBytes(model, fsdp, 3, facts, false), 2400 + 1600);
}

// With tied embeddings on one chunk [embedding, norm, output] is one group kept through the
// step (torchtitan's fully_shard of the three, resharded only under "always"): the separate
// wrapping then holds what the root group held, R = 1,200 and the head's gradient H = 600, but
// no kept last block: at the loss 2 R = 2,400, at a block's backward 2 R + 2 H + 10 B = 11,600.
TEST(MemoryComponents, FsdpSeparateWithTiedEmbeddingsKeepsOneEdgeGroup) {
  const ModelConfig model = smallModel();
  ASSERT_FALSE(model.spec.untied_output);
  StageLayerFacts facts = fsdpFacts();
  facts.embedding_parameters = 1000;
  facts.head_parameters = 200;
  facts.has_embedding = facts.has_head = true;
  Strategy fsdp = strategy(1, 1, 4, Framework::kFsdp);
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 2400);
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp, 3, facts), 2400 + 1200 + 8000);
  // Under "always" the group is resharded after the forward (none at the loss) and gathered again
  // for the head's backward, then kept to the embedding's: the block's moment is unchanged.
  fsdp.reshard = Reshard::kAlways;
  EXPECT_EQ(fsdpLossBufferBytes(model, fsdp, 3, facts), 0);
  EXPECT_EQ(dataParallelBufferBytes(model, fsdp, 3, facts), 2400 + 1200 + 8000);
}

// The stage takes the larger moment. T = 2 x 1,024 = 2,048 tokens, V = 50,304 at t = 1: the
// loss transient 8 T V = 824,180,736 (FSDP, no TP). Blocks of B = 10,000,000, root R =
// 100,000,000 (H = 50,000,000), S = 500,000,000, no recompute, no SP/CP: at the loss 2 R + 2 B
// = 220,000,000 beside 824,180,736 (1,044,180,736); at a block's backward 2 R + 2 H + 10 B =
// 400,000,000: the loss's moment is the peak, its DP buffers 220,000,000. With B = 100,000,000
// the block's moment, 2 R + 2 H + 10 B = 1,300,000,000, passes the loss's 824,180,736 + 400,000,000.
TEST(MemoryComponents, FsdpPeakTakesTheLargerMoment) {
  const ModelConfig model = smallModel();
  Strategy s = strategy(1, 1, 4, Framework::kFsdp);
  s.fsdp_wrap = FsdpWrap::kRoot;  // torchtitan 9dec370: the root group and the kept last block
  s.zero_stage = 3;
  ChunkMemoryInput chunk;
  chunk.parameters = 500000000;
  chunk.activation_bytes = 1000000;
  chunk.largest_layer_parameters = 100000000;
  chunk.largest_block_parameters = 10000000;
  chunk.root_parameters = 100000000;
  chunk.head_gradient_parameters = 50000000;
  StageMemory m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.loss_bytes, 824180736);
  EXPECT_EQ(m.activation_transient_bytes, 824180736);
  EXPECT_EQ(m.dp_buffer_bytes, 220000000);
  // The copy-in pool at the loss: the root's output and a block's, 2 R + 2 B, all idle.
  EXPECT_EQ(m.stream_pool_bytes, 220000000);
  chunk.largest_block_parameters = 100000000;
  m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.activation_transient_bytes, 0);  // the recompute transient (none)
  EXPECT_EQ(m.dp_buffer_bytes, 1300000000);
  // At a block's backward one block's gather is in use: 2 R + 2 B less 2 B idle.
  EXPECT_EQ(m.stream_pool_bytes, 200000000);
}

TEST(MemoryComponents, LossAndEmbeddingTransients) {
  const ModelConfig model = smallModel();
  // T = b s = 2048 tokens; t = 2: V/t = 50432 / 2 = 25216.
  const int64_t logits = int64_t{2048} * 25216;
  EXPECT_EQ(lossTransientBytes(model, strategy(2, 1, 1), true), 2 * logits);  // Megatron: e
  // FSDP under TP (loss_parallel): zeros_like, exp and their sum beside the held output, 12.
  EXPECT_EQ(lossTransientBytes(model, strategy(2, 1, 1, Framework::kFsdp), true), 12 * logits);
  EXPECT_EQ(lossTransientBytes(model, strategy(2, 1, 1), false), 0);
  EXPECT_EQ(embeddingGradientBytes(model, strategy(2, 1, 1), true), int64_t{2} * 25216 * 1024);
  EXPECT_EQ(embeddingGradientBytes(model, strategy(2, 1, 1, Framework::kFsdp), true), 0);
}

// Megatron's fp32 copy of the stepped gradients (--grad-reduce-in-bf16) and pipelining's merged
// last-stage outputs, by hand.
TEST(MemoryComponents, StepGradientCopyAndOutputMerge) {
  const ModelConfig model = smallModel();
  // 4 bytes a stepped parameter: 1,000,000 -> 4,000,000; none with fp32 main gradients, under
  // FSDP, or with the optimizer on the host.
  Strategy megatron = strategy(1, 1, 4);
  EXPECT_EQ(megatronGradientCopyBytes(megatron, true, 1000000), 4000000);
  EXPECT_EQ(megatronGradientCopyBytes(megatron, false, 1000000), 0);
  EXPECT_EQ(megatronGradientCopyBytes(strategy(1, 1, 4, Framework::kFsdp), true, 1000000), 0);
  megatron.offload = Offload::kOptimizer;
  EXPECT_EQ(megatronGradientCopyBytes(megatron, true, 1000000), 0);
  // m = 4 micro-batches of T = 2,048 tokens' e-byte logits, V / t = 50,432 / 2: 4 x 2 x 2,048 x
  // 25,216 = 413,138,944 on the stage with the head, FSDP with PP only.
  const Strategy fsdp_pp = strategy(2, 2, 1, Framework::kFsdp);
  EXPECT_EQ(pipelineOutputMergeBytes(model, fsdp_pp, 4, true), 413138944);
  EXPECT_EQ(pipelineOutputMergeBytes(model, fsdp_pp, 4, false), 0);
  EXPECT_EQ(pipelineOutputMergeBytes(model, strategy(2, 2, 1), 4, true), 0);
  EXPECT_EQ(pipelineOutputMergeBytes(model, strategy(2, 1, 1, Framework::kFsdp), 4, true), 0);
}

TEST(MemoryComponents, CommunicationBuffers) {
  const ModelConfig model = smallModel();
  Strategy s = strategy(2, 2, 1);
  EXPECT_EQ(tensorContextBufferBytes(model, s), 0);  // TP all-reduce works in place
  s.sequence_parallel = true;
  // SP: gathered input and input gradient, 2 x e x T x h = 2 x 2 x 2048 x 1024.
  EXPECT_EQ(tensorContextBufferBytes(model, s), int64_t{2} * 2 * 2048 * 1024);
  // PP: one activation and one gradient received, of the SP region (T / t = 1024 tokens).
  EXPECT_EQ(pipelineBufferBytes(model, s), int64_t{2} * 2 * 1024 * 1024);
  // CP = 2: T = 1024; K and V of g d / t = 16 x 64 / 2 = 512 columns, double-buffered, and their
  // gradients: 2 x 2 x 2 x e x T x 512.
  Strategy c = strategy(2, 1, 1);
  c.cp = 2;
  EXPECT_EQ(tensorContextBufferBytes(model, c), int64_t{8} * 2 * 1024 * 512);
  EXPECT_EQ(communicatorCount(c), 3);  // TP, CP, and DP x CP (the gradient group: D = 1, C = 2)
  EXPECT_EQ(communicatorCount(strategy(2, 2, 4)), 3);  // TP, PP, DP
}

TEST(MemoryComponents, MoeDispatchWithImbalance) {
  ModelConfig model = smallModel();
  model.moe.num_experts = 8;
  model.moe.top_k = 2;
  model.moe.load_imbalance = 1.5;
  // 2 x e x T x k x 1.5 x h = 2 x 2 x 2048 x 2 x 1.5 x 1024.
  EXPECT_EQ(moeDispatchBytes(model, strategy(1, 1, 1), true), int64_t{2} * 2 * 2048 * 3 * 1024);
  EXPECT_EQ(moeDispatchBytes(model, strategy(1, 1, 1), false), 0);
}

TEST(MemoryComponents, Fp8WeightCopies) {
  ModelConfig model = smallModel();
  StageLayerFacts facts;
  facts.block_parameters = 4000;
  facts.largest_layer_parameters = 1500;
  EXPECT_EQ(fp8WeightBytes(model, strategy(1, 1, 4), facts), 0);  // no fp8
  model.spec.fp8 = true;
  // Transformer Engine (Megatron): each block weight's fp8 copy and its transpose, 2 bytes.
  EXPECT_EQ(fp8WeightBytes(model, strategy(1, 1, 4), facts), 2 * 4000);
  // FSDP Float8 all-gather: the gathered layer is fp8 already; its transpose, 1 byte.
  EXPECT_EQ(fp8WeightBytes(model, strategy(1, 1, 4, Framework::kFsdp), facts), 1500);
}

// The recompute transient: under full recomputation one block's activations are rebuilt for its
// backward. GPT block (dropout, no flash attention), s = 1024, b = 2, h = 1024, a = 16, t = 1:
// without recomputation s b h (34 + 5 a s / h) = 2,097,152 x (34 + 80) bytes; kept, its input
// 2 s b h: the transient is 2,097,152 x 112 = 234,881,024 bytes, on every stage with blocks.
TEST(MemoryComponents, RecomputeTransientOfOneBlock) {
  const ModelConfig model = smallModel();
  const int64_t sbh = int64_t{1024} * 2 * 1024;
  ASSERT_EQ(blockActivationBytes(model, model.blocks[0], 2, 1), sbh * 114);
  ASSERT_EQ(blockActivationBytes(model, model.blocks[0], 2, 1, Recompute::kFull), sbh * 2);
  Strategy s = Strategy::of(1, 2, 1, 2, 4);
  s.recompute = Recompute::kFull;
  const IterationPlan p = buildIterationPlan(model, test::cluster(8), s);
  const MemoryEstimate e = estimateMemory(p, 0.0);
  for (const StageMemory& m : e.stages) {
    EXPECT_EQ(m.recompute_bytes, sbh * 112) << "stage " << m.stage;
    EXPECT_GE(m.activation_transient_bytes, m.recompute_bytes);
  }
  s.recompute = Recompute::kNone;
  const MemoryEstimate none = estimateMemory(buildIterationPlan(model, test::cluster(8), s), 0.0);
  EXPECT_EQ(none.stages[0].recompute_bytes, 0);
}

// One stage from a hand-made chunk: every sum of memory_model.h, with the defaults of
// MemoryOverheads (600 MiB context, 32 MiB workspace, 256 MiB per communicator, f = 0.10).
TEST(MemoryComponents, StageSumsAllocatedReservedDevice) {
  const ModelConfig model = smallModel();
  const Strategy s = strategy(1, 1, 4);  // one DP communicator
  const ChunkMemoryInput chunk = millionParameterChunk();
  const MemoryEstimate e = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0);
  const StageMemory& m = e.stages[0];
  EXPECT_EQ(m.weight_bytes, 2000000);
  EXPECT_EQ(m.gradient_bytes, 4000000);
  EXPECT_EQ(m.optimizer_bytes, 12000000);
  EXPECT_EQ(m.activation_bytes, 50000000);  // one micro-batch in flight at P = 1
  // Last and first stage at once: loss e T V = 2 x 2048 x 50304 > embedding gradient
  // 2 x 50304 x 1024.
  EXPECT_EQ(m.loss_bytes, int64_t{2} * 2048 * 50304);
  EXPECT_EQ(m.activation_transient_bytes, m.loss_bytes);
  const int64_t workspace = int64_t{32} << 20;
  EXPECT_EQ(m.bufferBytes(), workspace);
  const int64_t dynamic = 50000000 + m.loss_bytes + workspace;
  EXPECT_EQ(m.allocated_bytes, 18000000 + dynamic);
  EXPECT_EQ(m.reserved_bytes, 18000000 + std::llround(dynamic * 1.1));
  EXPECT_EQ(m.overhead_bytes, int64_t{600 + 256} << 20);
  EXPECT_EQ(m.peak_bytes, m.allocated_bytes + m.overhead_bytes);
  EXPECT_EQ(e.marginBytes(), (int64_t{80} << 30) - m.peak_bytes);
}

// --grad-reduce-in-bf16: Megatron-core's gradient buffer in the parameters' bf16, 2 bytes a
// parameter where --bf16 alone holds the fp32 main gradient's 4 (weights, optimizer unchanged);
// ZeRO-2 holds its partition in the model dtype anyway: 2 / 4 bytes a parameter over D = 4.
TEST(MemoryComponents, GradReduceInBf16HoldsTwoByteGradients) {
  const ModelConfig model = smallModel();
  const ChunkMemoryInput chunk = millionParameterChunk();
  Strategy s = strategy(1, 1, 4);
  s.grad_reduce_in_bf16 = true;
  const StageMemory m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.weight_bytes, 2000000);
  EXPECT_EQ(m.gradient_bytes, 2000000);
  EXPECT_EQ(m.optimizer_bytes, 12000000);
  s.zero_stage = 2;
  EXPECT_EQ(estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0].gradient_bytes,
            500000);
}

// ZeRO-2 as DeepSpeed runs it (memory_components.h), the 1,000,000-parameter chunk over D = 4 in
// bf16, b = 2: the rank's partition is 250,000 parameters. Model states 2 + 2/4 + 12/4 = 5.5 bytes
// a parameter; at a backward after the first micro-batch a fresh partition, 2 x 250,000, beside
// the IPG buffer (5e8 bf16 elements, 1e9 bytes); at the step the flat bf16 copy and its fp32 cast,
// (2 + 4) x 250,000. One micro-batch a step (global batch 8 = b x D): no fresh partition.
TEST(MemoryComponents, Zero2HoldsModelDtypePartitionAndFp32OnlyAtTheStep) {
  const ModelConfig model = smallModel();
  const ChunkMemoryInput chunk = millionParameterChunk();
  Strategy s = strategy(1, 1, 4);
  s.zero_stage = 2;
  s.global_batch = 64;  // 8 micro-batches
  StageMemory m = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.weight_bytes, 2000000);
  EXPECT_EQ(m.gradient_bytes, 500000);
  EXPECT_EQ(m.optimizer_bytes, 3000000);
  EXPECT_EQ(m.dp_buffer_bytes, 1'000'000'000 + 500000);
  EXPECT_EQ(m.gradient_copy_bytes, 1500000);
  EXPECT_EQ(zero2LaterBackwardPartitionBytes(model, s, 2, 250000, 8), 500000);
  EXPECT_EQ(zero2StepGradientBytes(model, s, 2, 250000), 1500000);
  // One micro-batch: only the first backward's partition (in the model states).
  s.global_batch = 8;
  m = estimateMemory(model, s, 1, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.dp_buffer_bytes, 1'000'000'000);
  EXPECT_EQ(m.gradient_copy_bytes, 1500000);
  // --grad-reduce-in-bf16 changes the wire, not the partition (no Megatron fp32 main-grad copy).
  s.grad_reduce_in_bf16 = true;
  m = estimateMemory(model, s, 1, int64_t{80} << 30, {chunk}, 0.0).stages[0];
  EXPECT_EQ(m.gradient_bytes, 500000);
  EXPECT_EQ(m.gradient_copy_bytes, 1500000);
  // An fp32 model: .to(fp32) returns the flat copy itself, 4 x 250,000 at the step.
  const ModelConfig fp32 = test::model(1024, 16, 4096, 1024, 50257, 4, "fp32");
  EXPECT_EQ(zero2StepGradientBytes(fp32, s, 2, 250000), 1000000);
  // Other stages, and ZeRO-2 with the optimizer offloaded: none.
  EXPECT_EQ(zero2StepGradientBytes(model, s, 1, 250000), 0);
  EXPECT_EQ(zero2LaterBackwardPartitionBytes(model, s, 3, 250000, 8), 0);
  s.offload = Offload::kOptimizer;
  EXPECT_EQ(zero2StepGradientBytes(model, s, 2, 250000), 0);
  EXPECT_EQ(zero2LaterBackwardPartitionBytes(model, s, 2, 250000, 8), 0);
}

// FSDP's model states are 16 bytes per parameter / D: doubling D halves them, and nothing else in
// the peak changes (the buffers depend on the layer sizes, not on D).
TEST(MemoryComponents, FsdpPeakFallsAsSixteenBytesPerParameterOverD) {
  const ModelConfig model = smallModel();
  ChunkMemoryInput chunk;
  chunk.parameters = 8000000;
  chunk.activation_bytes = 1000000;
  chunk.largest_layer_parameters = 1000000;
  int64_t previous = 0;
  for (int d : {2, 4, 8, 16}) {
    Strategy s = strategy(1, 1, d, Framework::kFsdp);
    s.zero_stage = 3;
    const MemoryEstimate e = estimateMemory(model, s, 8, int64_t{80} << 30, {chunk}, 0.0);
    EXPECT_EQ(e.stages[0].model_state_bytes, 16 * 8000000 / d) << d;
    if (previous > 0) {
      EXPECT_EQ(previous - e.peak_bytes, 16 * 8000000 / d) << d;
    }
    previous = e.peak_bytes;
  }
}

// The dev set's ranking (calibration/memory, 1.5B row: 22 layers, h 2304, 24 heads, P = 8, b = 6):
// 1F1B < ZB-H1 < interleaved < ZB-H2 in peak memory.
TEST(MemoryComponents, DevSetScheduleRanking) {
  const ModelConfig model = test::model(2304, 24, 4 * 2304, 1024, 50257, 22, "bf16");
  const ClusterConfig cluster = test::cluster(8, 0, {300, 3, 25, 5, 80});
  // As Megatron ran them: the embedding and the loss count as a layer each, (22 + 2) / 8 = 3
  // layers per stage, the first and last stage 2 blocks; interleaved with one layer per chunk,
  // v = 3, the first and last chunks hold no block.
  auto peak = [&](Schedule schedule, int v) {
    Strategy s = Strategy::of(1, 8, 1, 6, 6 * 24, schedule);
    s.virtual_stages = v;
    s.stage_layers = v == 1 ? std::vector<int>{2, 3, 3, 3, 3, 3, 3, 2} : std::vector<int>(24, 1);
    if (v > 1) s.stage_layers.front() = s.stage_layers.back() = 0;
    return estimateMemory(buildIterationPlan(model, cluster, s), 0.0).peak_bytes;
  };
  const int64_t dapple = peak(Schedule::kDapple, 1), zbh1 = peak(Schedule::kZbh1, 1);
  const int64_t interleaved = peak(Schedule::kInterleaved, 3), zbh2 = peak(Schedule::kZbh2, 1);
  EXPECT_LT(dapple, zbh1);
  EXPECT_LT(zbh1, interleaved);
  EXPECT_LT(interleaved, zbh2);
}

// FSDP's events: ZeRO-3's per-layer gathers and reduce-scatters, the reduce-scatter in fp32
// (4 bytes per parameter of the layer), and no second gather without reshard-after-forward. The
// model's output weight is the embedding's (tied), so under torchtitan's separate wrapping
// [embedding, norm, output] is one group (fsdp_pipeline_test's FsdpWrap tests untie it).
TEST(MemoryComponents, FsdpEvents) {
  const ModelConfig model = test::model(64, 4, 256, 32, 512, 2, "bf16");
  const ClusterConfig cluster = test::cluster(8);
  auto plan = [&](Framework framework, Reshard reshard) {
    Strategy s = Strategy::of(1, 1, 2, 1, 2);
    s.zero_stage = 3;
    s.framework = framework;
    s.reshard = reshard;
    return buildIterationPlan(model, cluster, s);
  };
  auto count = [](const OpList& ops, std::string_view name) {
    int n = 0;
    for (const OpInstance& op : ops) n += op.name == name;
    return n;
  };
  // Block parameters: QKV + proj 4h^2 + 4h = 16,640, MLP 2hf + f + h = 33,088, norms 4h = 256.
  const int64_t block = 49'984;
  for (Reshard reshard : {Reshard::kAlways, Reshard::kNever}) {
    const IterationPlan p = plan(Framework::kFsdp, reshard);
    const StagePlan& st = p.stages[0];
    // The tied group and 2 blocks gather before their forward (3), again before their backward
    // only when resharding (the group before the head's backward).
    EXPECT_EQ(count(st.forward, "zero3_param_allgather"), 3);
    EXPECT_EQ(count(st.backward, "zero3_param_allgather"), reshard == Reshard::kAlways ? 3 : 0);
    for (const OpInstance& op : st.backward) {
      if (op.name != "zero3_grad_reduce_scatter" || op.layer != 0) continue;
      EXPECT_EQ(p.events[op.event].event.dtype, DType::kFp32);
      EXPECT_EQ(p.events[op.event].event.message_bytes, 4 * block);
    }
  }
  // DeepSpeed-style ZeRO-3 (Megatron framework): reduce-scatter in the model dtype, 2 bytes.
  const IterationPlan z = plan(Framework::kMegatron, Reshard::kDefault);
  for (const OpInstance& op : z.stages[0].backward) {
    if (op.name == "zero3_grad_reduce_scatter" && op.layer == 0) {
      EXPECT_EQ(z.events[op.event].event.message_bytes, 2 * block);
    }
  }
}

}  // namespace
}  // namespace evsim

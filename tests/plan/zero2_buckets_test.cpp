// ZeRO-2 as DeepSpeed runs it (plan/zero2_buckets.h): buckets closed before the gradient that
// would overflow them, reduced in every micro-batch's backward, beside the backward with
// overlap_comm until the next bucket closes. Expected numbers worked by hand.
#include "plan/zero2_buckets.h"

#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "plan/optimizer_step.h"
#include "support/test_support.h"

namespace evsim {
namespace {

TEST(Zero2Buckets, ABucketClosesBeforeTheLayerThatWouldOverflowIt) {
  // Backward order: head 10, blocks 3..0 of 50, embedding 40; buckets of 100 elements.
  // 10 + 50 = 60, + 50 would be 110 > 100: close after block 3 (60). 50 + 50 = 100 is not over:
  // after block 1 (100), + 50 would be. 50 + 40 = 90, the end: close after the embedding (90).
  const std::vector<Zero2Bucket> b = zero2Buckets(
      {{kHeadLayer, 10}, {3, 50}, {2, 50}, {1, 50}, {0, 50}, {kEmbeddingLayer, 40}}, 100);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].last_layer, 3);
  EXPECT_EQ(b[0].elements, 60);
  EXPECT_EQ(b[1].last_layer, 1);
  EXPECT_EQ(b[1].elements, 100);
  EXPECT_EQ(b[2].last_layer, kEmbeddingLayer);
  EXPECT_EQ(b[2].elements, 90);
  // A layer larger than the bucket is one reduction of its own; what follows starts a new one.
  const std::vector<Zero2Bucket> big = zero2Buckets({{0, 250}, {kEmbeddingLayer, 10}}, 100);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].elements, 250);
  EXPECT_EQ(big[1].elements, 10);
}

TEST(Zero2Buckets, TheBucketIsDeepSpeedsDefaultOrTheSizeAskedFor) {
  Strategy s = test::strategy("1M1P4D", 1, 8);
  EXPECT_EQ(zero2BucketElements(s, 4), 500'000'000);
  EXPECT_EQ(zero2BufferBytes(s, 4, 2), 1'000'000'000);  // one bf16 buffer
  s.dp_overlap = true;
  EXPECT_EQ(zero2BufferBytes(s, 4, 2), 2'000'000'000);  // double-buffered
  // dp_bucket_bytes counts the wire's bytes: 1,000 bytes are 500 bf16 or 250 fp32 elements, and
  // a buffer of 250 elements in bf16 is 500 bytes (two with overlap).
  s.dp_bucket_bytes = 1000;
  EXPECT_EQ(zero2BucketElements(s, 2), 500);
  EXPECT_EQ(zero2BucketElements(s, 4), 250);
  EXPECT_EQ(zero2BufferBytes(s, 4, 2), 2 * 250 * 2);
}

// --ddp-bucket-size counts parameters (Megatron's bucket_size): 1,000 of them are a bucket of
// 1,000 elements whatever the wire (fp32 under bf16 by default, bf16 with --grad-reduce-in-bf16).
TEST(Zero2Buckets, DdpBucketSizeIsElements) {
  for (const bool bf16_wire : {false, true}) {
    Strategy s = test::strategy("1M1P4D", 1, 8);
    s.grad_reduce_in_bf16 = bf16_wire;
    const int64_t wire = dtypeBytes(
        dataParallelGradDtype(s.framework, DType::kBf16, s.grad_reduce_in_bf16));
    EXPECT_EQ(wire, bf16_wire ? 2 : 4);
    s.dp_bucket_bytes = 1000 * wire;  // what strategy_from_options stores for --ddp-bucket-size 1000
    EXPECT_EQ(zero2BucketElements(s, wire), 1000);
    EXPECT_EQ(zero2BufferBytes(s, wire, 2), 1000 * 2);  // one bf16 buffer of 1,000 elements
  }
}

// The tiny model (h 64, ffn 256, GPT blocks: QKV 3h^2 + 3h, projection h^2 + h, FC1 h f + f,
// FC2 f h + h, two layer norms of 2h: 49,984 parameters a block) in bf16, 4 blocks over 1M1P4D,
// b 1, B 8: 2 micro-batches a rank. Buckets of two blocks, 99,968 elements: dp_bucket_bytes counts
// the wire's bytes, fp32 under Megatron's bf16 (4 bytes an element).
IterationPlan zero2Plan(bool overlap) {
  Strategy s = test::strategy("1M1P4D", 1, 8);
  s.zero_stage = 2;
  s.dp_overlap = overlap;
  s.dp_bucket_bytes = 2 * 49'984 * 4;
  return buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "bf16"), test::cluster(4), s);
}

std::vector<int> reductions(const OpList& ops) {
  std::vector<int> at;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == kZero2ReduceName) at.push_back(static_cast<int>(i));
  }
  return at;
}

TEST(Zero2Buckets, ThePlanReducesEachBucketInEveryMicroBatchsBackward) {
  constexpr int64_t B = 49'984;
  const IterationPlan plan = zero2Plan(false);
  ASSERT_EQ(plan.micro_batches, 2);
  const StagePlan& st = plan.stages[0];
  // Head H (+ B of block 3) > ... : head + block 3 close before block 2 would overflow, blocks 2
  // and 1 fill the bucket exactly (2B), block 0 and the embedding E (at most 2B - B) close at
  // the end.
  const std::vector<int> at = reductions(st.backward);
  ASSERT_EQ(at.size(), 3u);
  const int expect_layer[] = {3, 1, kEmbeddingLayer};
  int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    const OpInstance& op = st.backward[at[i]];
    EXPECT_EQ(op.layer, expect_layer[i]);
    EXPECT_EQ(op.stream, Stream::kDpComm);
    EXPECT_TRUE(op.weight_grad);   // a zero-bubble W task's
    EXPECT_EQ(op.overlap_ops, 0);  // no overlap_comm: in order, blocking
    // Right after its layer's last op; the next op is another layer's (or none).
    EXPECT_EQ(st.backward[at[i] - 1].layer, op.layer);
    if (at[i] + 1 < static_cast<int>(st.backward.size())) {
      EXPECT_NE(st.backward[at[i] + 1].layer, op.layer);
    }
    const UniqueEvent& e = plan.events[op.event];
    EXPECT_EQ(e.event.kind, EventKind::kReduceScatter);
    // Reduced in fp32 (Megatron's bf16 model), m = 2 micro-batches on each of 4 ranks.
    EXPECT_EQ(e.count, 2 * 4);
    total += e.event.message_bytes;
  }
  EXPECT_EQ(plan.events[st.backward[at[1]].event].event.message_bytes, 4 * 2 * B);
  EXPECT_GT(plan.events[st.backward[at[0]].event].event.message_bytes, 4 * B);
  EXPECT_GT(plan.events[st.backward[at[2]].event].event.message_bytes, 4 * B);
  EXPECT_EQ(total, 4 * st.parameters);  // every gradient once per micro-batch
  // Nothing left for the step but the updated parameters' all-gather (bf16).
  EXPECT_TRUE(st.dp_buckets.empty());
  EXPECT_EQ(st.dp_reduce_scatter, -1);
  EXPECT_EQ(st.dp_allreduce, -1);
  ASSERT_GE(st.dp_allgather, 0);
  EXPECT_EQ(plan.events[st.dp_allgather].event.message_bytes, 2 * st.parameters);
}

TEST(Zero2Buckets, WithOverlapCommABucketRunsBesideTheBackwardUntilTheNextCloses) {
  const IterationPlan plan = zero2Plan(true);
  const StagePlan& st = plan.stages[0];
  const std::vector<int> at = reductions(st.backward);
  ASSERT_EQ(at.size(), 3u);
  // Bucket i beside every op up to bucket i + 1 (which waits for it: average_tensor's
  // wait_stream); the last one exposed, the epilogue waits for it.
  EXPECT_EQ(st.backward[at[0]].overlap_ops, at[1] - at[0] - 1);
  EXPECT_EQ(st.backward[at[1]].overlap_ops, at[2] - at[1] - 1);
  EXPECT_EQ(st.backward[at[2]].overlap_ops, 0);
  EXPECT_GT(st.backward[at[0]].overlap_ops, 0);
  // The same op list otherwise as without overlap.
  const IterationPlan plain = zero2Plan(false);
  ASSERT_EQ(plain.stages[0].backward.size(), st.backward.size());
}

}  // namespace
}  // namespace evsim

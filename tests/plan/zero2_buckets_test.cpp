// ZeRO-2 as DeepSpeed runs it (plan/zero2_buckets.h): buckets closed before the gradient that
// would overflow them, reduced in every micro-batch's backward, beside the backward with
// overlap_comm until the next bucket closes. Expected numbers worked by hand.
#include "plan/zero2_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "plan/iteration_plan.h"
#include "plan/optimizer_step.h"
#include "support/test_support.h"

namespace evsim {
namespace {

TEST(Zero2Buckets, ABucketIsReducedWhenTheGradientThatWouldOverflowItArrives) {
  // Gradients (after op, elements): 10, 30, 50 (a routed expert's), 20, 250, 5; buckets of 100,
  // the epilogue after op 15. 10 + 30 + 50 = 90; + 20 would be 110 > 100: reduced at op 9 (90, 50
  // experts); 20 + 250 > 100: at op 12 (20); 250 is larger than a bucket, reduced alone when the
  // next one arrives, at op 13 (250); the 5 left by the epilogue at op 15.
  const std::vector<Zero2Bucket> b = zero2Buckets(
      {{2, 10, 0}, {5, 30, 0}, {6, 50, 50}, {9, 20, 0}, {12, 250, 0}, {13, 5, 0}}, 100, 15);
  ASSERT_EQ(b.size(), 4u);
  const int after[] = {9, 12, 13, 15};
  const int64_t elements[] = {90, 20, 250, 5}, experts[] = {50, 0, 0, 0};
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].after_op, after[i]) << i;
    EXPECT_EQ(b[i].elements, elements[i]) << i;
    EXPECT_EQ(b[i].experts, experts[i]) << i;
  }
  // Exactly full is not over: 60 + 40 = 100 stays one bucket, reduced by the epilogue.
  const std::vector<Zero2Bucket> full = zero2Buckets({{0, 60, 0}, {1, 40, 0}}, 100, 3);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].elements, 100);
  EXPECT_EQ(full[0].after_op, 3);
}

// The gradients of a hand-made backward: each weight-gradient GEMM ("tn", weight out x in = m x
// n) after it, the rest of its layer after the layer's last op.
TEST(Zero2Buckets, GradientsArriveAfterTheirWeightGradientGemmAndTheRestAtTheLayersEnd) {
  EventTable table;
  auto op = [&](int layer, const Event& e, bool weight_grad) {
    OpInstance o{table.intern(e), Stream::kCompute, layer, "op"};
    o.weight_grad = weight_grad;
    return o;
  };
  const Event norm = makeCompute("layernorm_bwd", {{"rows", 8}, {"cols", 4}}, "", DType::kBf16);
  const OpList backward = {
      // Layer 1 (1,000 parameters): wgrads 10 x 30 and 20 x 30, a dgrad ("nn", no weight), a norm.
      op(1, makeGemm(10, 30, 8, "tn", DType::kBf16), true),   // 0: 300
      op(1, makeGemm(8, 30, 20, "nn", DType::kBf16), false),  // 1
      op(1, makeGemm(20, 30, 8, "tn", DType::kBf16), true),   // 2: 600
      op(1, norm, false),                                     // 3: the rest, 100
      // Layer 0 (1,000 parameters) whose wgrads claim 1,200 (a tied weight): all after op 5.
      op(0, makeGemm(40, 30, 8, "tn", DType::kBf16), true),  // 4
      op(0, norm, false),                                    // 5: 1,000
      // The embedding (500), no wgrad GEMM: after op 6.
      op(kEmbeddingLayer, norm, false),  // 6
      // Layer 2 (700 parameters, 400 of them routed experts' under expert parallelism) is put in
      // front below: a batched expert wgrad of 2 x 10 x 10, a dense one of 5 x 6, a norm.
  };
  OpList with_experts = backward;
  with_experts.insert(with_experts.begin(),
                      {op(2, makeBatchedGemm(2, 10, 10, 8, "tn", DType::kBf16), true),
                       op(2, makeGemm(5, 6, 8, "tn", DType::kBf16), true), op(2, norm, false)});
  const LayerParams params{{kEmbeddingLayer, 500}, {0, 1000}, {1, 1000}, {2, 700}};
  const std::vector<Zero2Arrival> a = zero2Arrivals(backward, table, params, {});
  ASSERT_EQ(a.size(), 5u);
  const int after[] = {0, 2, 3, 5, 6};
  const int64_t elements[] = {300, 600, 100, 1000, 500};
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].after_op, after[i]) << i;
    EXPECT_EQ(a[i].elements, elements[i]) << i;
    EXPECT_EQ(a[i].experts, 0) << i;
  }
  // Experts apart: 200 experts' after op 0, 30 dense after op 1, the rest after the norm: dense
  // 300 - 30 = 270 and experts 400 - 200 = 200. Layer 1 then starts at op 3.
  const std::vector<Zero2Arrival> e = zero2Arrivals(with_experts, table, params, {{2, 400}});
  ASSERT_EQ(e.size(), 8u);
  const int e_after[] = {0, 1, 2, 3};
  const int64_t e_elements[] = {200, 30, 470, 300}, e_experts[] = {200, 0, 200, 0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(e[i].after_op, e_after[i]) << i;
    EXPECT_EQ(e[i].elements, e_elements[i]) << i;
    EXPECT_EQ(e[i].experts, e_experts[i]) << i;
  }
  // Without expert parallelism the batched GEMM's weights are dense like the rest.
  const std::vector<Zero2Arrival> d = zero2Arrivals(with_experts, table, params, {});
  ASSERT_EQ(d.size(), 8u);
  EXPECT_EQ(d[0].elements, 200);
  EXPECT_EQ(d[0].experts, 0);
  EXPECT_EQ(d[2].elements, 470);
  EXPECT_EQ(d[2].experts, 0);
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

// The tiny model's gradients in backward order: the head's final norm (2h = 128; the tied output
// weight's lm_head_wgrad, V h = 32,768, belongs to the embedding, so the head arrives whole), per
// block fc2 (h f = 16,384), fc1 (f h = 16,384), projection (h^2 = 4,096), QKV (3h^2 = 12,288)
// after their wgrads and the rest (biases 3h + h + f + h = 576, norms 4h = 256: 832) after the
// block's last op, then the embedding (V h + s h = 34,816).
constexpr int64_t kHead = 128, kFc = 16'384, kProj = 4'096, kQkv = 12'288, kRest = 832,
                  kEmbedding = 34'816;

TEST(Zero2Buckets, ThePlanReducesEachBucketInEveryMicroBatchsBackward) {
  constexpr int64_t B = 49'984;
  static_assert(2 * kFc + kProj + kQkv + kRest == B);
  const IterationPlan plan = zero2Plan(false);
  ASSERT_EQ(plan.micro_batches, 2);
  const StagePlan& st = plan.stages[0];
  // Buckets of 2B: head + block 3 + block 2 up to its rest (128 + B + B - 832 = 99,264), which
  // would overflow: reduced after block 2's last op; 832 + block 1 + block 0 but its rest fills
  // 2B exactly (99,968), the rest of block 0 would overflow: after block 0's last op; 832 +
  // the embedding (35,648) by the epilogue.
  const std::vector<int> at = reductions(st.backward);
  ASSERT_EQ(at.size(), 3u);
  const int expect_layer[] = {2, 0, kEmbeddingLayer};
  const int64_t expect_elements[] = {kHead + 2 * B - kRest, 2 * B, kRest + kEmbedding};
  int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    const OpInstance& op = st.backward[at[i]];
    EXPECT_EQ(op.layer, expect_layer[i]);
    EXPECT_EQ(op.stream, Stream::kDpComm);
    EXPECT_TRUE(op.weight_grad);   // a zero-bubble W task's
    EXPECT_EQ(op.overlap_ops, 0);  // no overlap_comm: in order, blocking
    // Right after its layer's last op: the next op is another layer's (or none).
    if (at[i] + 1 < static_cast<int>(st.backward.size())) {
      EXPECT_NE(st.backward[at[i] + 1].layer, op.layer);
    }
    const UniqueEvent& e = plan.events[op.event];
    EXPECT_EQ(e.event.kind, EventKind::kReduceScatter);
    // Reduced in fp32 (Megatron's bf16 model), m = 2 micro-batches on each of 4 ranks.
    EXPECT_EQ(e.count, 2 * 4);
    EXPECT_EQ(e.event.message_bytes, 4 * expect_elements[i]) << i;
    total += e.event.message_bytes;
  }
  EXPECT_EQ(total, 4 * st.parameters);  // every gradient once per micro-batch
  // Nothing left for the step but the updated parameters' all-gather (bf16).
  EXPECT_TRUE(st.dp_buckets.empty());
  EXPECT_EQ(st.dp_reduce_scatter, -1);
  EXPECT_EQ(st.dp_allreduce, -1);
  ASSERT_GE(st.dp_allgather, 0);
  EXPECT_EQ(plan.events[st.dp_allgather].event.message_bytes, 2 * st.parameters);
}

// Buckets of 40,000 elements close inside blocks, at the weight gradient that would overflow them
// (running sums by hand): head + block 3's fc2, fc1, projection (36,992), + QKV would be 49,280:
// reduced after block 3's qkv_wgrad; QKV + rest + block 2's fc2 (29,504), + fc1: after block 2's
// fc1_wgrad; fc1 + projection + QKV + rest (33,600), + block 1's fc2: after it; fc2 + fc1 +
// projection (36,864), + QKV: after block 1's qkv_wgrad; QKV + rest + block 0's fc2 (29,504): after
// block 0's fc1_wgrad; fc1 + projection + QKV + rest (33,600), + the embedding: when the embedding
// arrives, after its backward; the embedding (34,816) by the epilogue, after the same op.
TEST(Zero2Buckets, BucketsCloseAtTheParameterThatWouldOverflowThemInsideALayer) {
  Strategy s = test::strategy("1M1P4D", 1, 8);
  s.zero_stage = 2;
  s.dp_bucket_bytes = 40'000 * 4;
  const IterationPlan plan =
      buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "bf16"), test::cluster(4), s);
  const StagePlan& st = plan.stages[0];
  const std::vector<int> at = reductions(st.backward);
  ASSERT_EQ(at.size(), 7u);
  const int64_t elements[] = {kHead + 2 * kFc + kProj,
                              kQkv + kRest + kFc,
                              kFc + kProj + kQkv + kRest,
                              2 * kFc + kProj,
                              kQkv + kRest + kFc,
                              kFc + kProj + kQkv + kRest,
                              kEmbedding};
  const std::string_view after[] = {"qkv_wgrad", "fc1_wgrad", "fc2_wgrad", "qkv_wgrad",
                                     "fc1_wgrad", "word_embedding_bwd", kZero2ReduceName};
  const int layer[] = {3, 2, 1, 1, 0, kEmbeddingLayer, kEmbeddingLayer};
  int64_t total = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    const OpInstance& op = st.backward[at[i]];
    EXPECT_EQ(plan.events[op.event].event.message_bytes, 4 * elements[i]) << i;
    EXPECT_EQ(st.backward[at[i] - 1].name, after[i]) << i;
    EXPECT_EQ(op.layer, layer[i]) << i;
    total += elements[i];
  }
  EXPECT_EQ(total, st.parameters);
  EXPECT_EQ(at.back(), static_cast<int>(st.backward.size()) - 1);  // the epilogue's, last
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

// The search's least first bucket (zero2FirstBucketAtLeast), worked by hand with buckets of 100:
// - 30 + 40 fits one bucket: nothing closes it before the epilogue, F = 70 exactly.
// - 10 + 50 + 30 + 40 = 130 > 100: F + a_j > 100 for the a_j that closes it, and every later
//   arrival is at most 50, so F >= 100 + 1 - 50 = 51; the real first bucket is 10 + 50 + 30 = 90.
// - the same with a first arrival known to be at least 60: F >= 60.
// - a trailing 70 (the embedding, last): 20 + 30 + 70 = 120 > 100; F >= min(101 - 30, 120 - 70)
//   = 50, which is F (20 + 30, closed by the trailing 70).
// - a first arrival larger than the bucket (an output weight of 150): F >= 150, as zero2Buckets
//   reduces it alone.
TEST(Zero2Buckets, FirstBucketAtLeastByHand) {
  EXPECT_EQ(zero2FirstBucketAtLeast({70, 0, 40, 0}, 100), 70);
  EXPECT_EQ(zero2FirstBucketAtLeast({130, 0, 50, 0}, 100), 51);
  EXPECT_EQ(zero2Buckets({{0, 10, 0}, {1, 50, 0}, {2, 30, 0}, {3, 40, 0}}, 100, 3)[0].elements,
            90);
  EXPECT_EQ(zero2FirstBucketAtLeast({130, 60, 50, 0}, 100), 60);
  EXPECT_EQ(zero2FirstBucketAtLeast({120, 0, 30, 70}, 100), 50);
  EXPECT_EQ(zero2Buckets({{0, 20, 0}, {1, 30, 0}, {2, 70, 0}}, 100, 2)[0].elements, 50);
  EXPECT_EQ(zero2FirstBucketAtLeast({160, 150, 10, 0}, 100), 150);
  EXPECT_EQ(zero2Buckets({{0, 150, 0}, {1, 10, 0}}, 100, 1)[0].elements, 150);
  // A later arrival as large as the bucket says nothing beyond a_1 >= 1.
  EXPECT_EQ(zero2FirstBucketAtLeast({300, 0, 100, 0}, 100), 1);
}

// Never above the first bucket zero2Buckets makes, for any arrivals the facts describe: 20,000
// random arrival lists (1-12 arrivals of 1-150 elements, buckets of 1-200, with and without a
// trailing arrival), the facts taken from each list as the memory model takes them from a chunk
// (the sum, a_1 or 0, the largest later one, the trailing one). Each bound is also reached by
// some list (the bound is tight on average: at least a tenth of the lists meet it).
TEST(Zero2Buckets, FirstBucketAtLeastNeverPassesTheBuckets) {
  uint64_t state = 29;
  auto next = [&state](int64_t below) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(below));
  };
  int met = 0;
  constexpr int kLists = 20000;
  for (int i = 0; i < kLists; ++i) {
    const int n = 1 + static_cast<int>(next(12));
    const int64_t bucket = 1 + next(200);
    const bool trailing = n > 1 && next(2) == 1;
    const bool first_known = next(2) == 1;
    std::vector<Zero2Arrival> arrivals;
    Zero2ChunkGradients g;
    for (int j = 0; j < n; ++j) {
      const int64_t a = 1 + next(150);
      arrivals.push_back({j, a, 0});
      g.total += a;
      if (j == 0 && first_known) g.first_at_least = a;
      if (j > 0 && !(trailing && j == n - 1)) g.later_at_most = std::max(g.later_at_most, a);
      if (trailing && j == n - 1) g.trailing = a;
    }
    const int64_t first = zero2Buckets(arrivals, bucket, n - 1)[0].elements;
    const int64_t bound = zero2FirstBucketAtLeast(g, bucket);
    ASSERT_LE(bound, first) << "list " << i << ", bucket " << bucket;
    ASSERT_GE(bound, 1) << "list " << i;
    if (bound == first) ++met;
  }
  EXPECT_GT(met, kLists / 10);
}

}  // namespace
}  // namespace evsim

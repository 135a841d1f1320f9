// Where DDP gradient buckets close (plan/ddp_buckets.h): Megatron's default bucket of
// max(40M, 1M x D x C) parameters, bucketing only on the first chunk of pipeline rank 0 (one
// bucket per chunk elsewhere), PyTorch DDP's 25 MiB for FSDP. Expected numbers worked by hand.
#include "plan/ddp_buckets.h"

#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "plan/pipeline_schedule.h"
#include "support/test_support.h"

namespace evsim {
namespace {

TEST(DdpBuckets, MegatronDefaultIsFortyMillionParametersOrOneMillionPerDpRank) {
  EXPECT_EQ(megatronDefaultBucketParams(1), 40'000'000);
  EXPECT_EQ(megatronDefaultBucketParams(32), 40'000'000);
  EXPECT_EQ(megatronDefaultBucketParams(40), 40'000'000);
  EXPECT_EQ(megatronDefaultBucketParams(64), 64'000'000);
  EXPECT_EQ(megatronDefaultBucketParams(1024), 1'024'000'000);
}

TEST(DdpBuckets, MegatronBucketsOnlyTheFirstChunkOfPipelineRankZero) {
  Strategy s = test::strategy("4M4P32D", 1, 1024);
  s.cp = 2;  // the DP x CP group: 64 ranks -> 64,000,000 parameters
  s.dp_overlap = true;
  // fp32 main gradients (4 bytes): 256,000,000 bytes on rank 0's first chunk.
  EXPECT_EQ(ddpBucketCloseBytes(s, 0, 0, 4), 256'000'000);
  EXPECT_EQ(ddpBucketCloseBytes(s, 0, 0, 2), 128'000'000);
  // Every other chunk and every other pipeline rank: one bucket for the chunk.
  EXPECT_EQ(ddpBucketCloseBytes(s, 0, 1, 4), kWholeChunkBucket);
  EXPECT_EQ(ddpBucketCloseBytes(s, 1, 0, 4), kWholeChunkBucket);
  EXPECT_EQ(ddpBucketCloseBytes(s, 3, 2, 4), kWholeChunkBucket);
  // A size asked for applies on rank 0's first chunk only, as Megatron's --ddp-bucket-size does.
  s.dp_bucket_bytes = 1000;
  EXPECT_EQ(ddpBucketCloseBytes(s, 0, 0, 4), 1000);
  EXPECT_EQ(ddpBucketCloseBytes(s, 2, 0, 4), kWholeChunkBucket);
  s.cp = 1, s.dp = 8, s.dp_bucket_bytes = 0;
  EXPECT_EQ(ddpBucketCloseBytes(s, 0, 0, 4), 160'000'000);  // 40,000,000 x 4
}

TEST(DdpBuckets, OtherFrameworksKeepPyTorchDdpsTwentyFiveMebibytes) {
  Strategy s = test::strategy("1M2P4D", 1, 8);
  s.framework = Framework::kFsdp;
  EXPECT_EQ(ddpBucketCloseBytes(s, 1, 1, 4), 26'214'400);
  s.dp_bucket_bytes = 1000;
  EXPECT_EQ(ddpBucketCloseBytes(s, 1, 1, 4), 1000);
}

// The plan: 8 blocks of the tiny model in bf16 over 1M2P4D, interleaved v = 2 (chunks of two
// blocks), buckets of 1 byte (close at every layer end where buckets close at all).
TEST(DdpBuckets, ThePlanBucketsLayerByLayerOnlyOnVirtualStageZero) {
  Strategy s = test::strategy("1M2P4D", 1, 8);
  s.schedule = Schedule::kInterleaved;
  s.virtual_stages = 2;
  s.dp_overlap = true;
  s.dp_bucket_bytes = 1;
  const IterationPlan plan =
      buildIterationPlan(test::model(64, 4, 256, 32, 512, 8, "bf16"), test::cluster(8), s);
  ASSERT_EQ(plan.virtualStages(), 4);
  const PipelineLayout layout = pipelineLayout(s);
  for (int k = 0; k < 4; ++k) {
    const StagePlan& st = plan.stages[k];
    int64_t bytes = 0;
    for (const GradBucket& b : st.dp_buckets) bytes += b.bytes;
    // Every bucket together: the chunk's parameters in fp32 (bf16 reduced in fp32).
    EXPECT_EQ(bytes, 4 * st.parameters) << "virtual stage " << k;
    if (layout.device(k) == 0 && layout.chunk(k) == 0) {
      // Virtual stage 0: block 1, block 0, then the embedding, a bucket each.
      EXPECT_EQ(k, 0);
      EXPECT_EQ(st.dp_buckets.size(), 3u);
    } else {
      ASSERT_EQ(st.dp_buckets.size(), 1u) << "virtual stage " << k;
      // Ready after the chunk's last backward op (none on the host stream here).
      EXPECT_EQ(st.dp_buckets[0].ready_after_op, static_cast<int>(st.backward.size()) - 1);
    }
  }
}

TEST(DdpBuckets, TheDefaultHoldsASmallStageInOneBucket) {
  // Without a size: Megatron's 40,000,000-parameter floor holds all of the tiny model's stage
  // (well under 40M parameters), so one bucket of 4 x parameters bytes.
  Strategy s = test::strategy("1M1P4D", 1, 4);
  s.dp_overlap = true;
  const IterationPlan plan =
      buildIterationPlan(test::model(64, 4, 256, 32, 512, 2, "bf16"), test::cluster(8), s);
  const StagePlan& st = plan.stages[0];
  ASSERT_LT(st.parameters, 40'000'000);
  ASSERT_EQ(st.dp_buckets.size(), 1u);
  EXPECT_EQ(st.dp_buckets[0].bytes, 4 * st.parameters);
}

}  // namespace
}  // namespace evsim

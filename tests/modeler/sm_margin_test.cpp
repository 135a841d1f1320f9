// A GEMM launched beside a Transformer Engine userbuffers reduce-scatter keeps its SM margin
// (the gemm event's optional dim sm_margin; TE's set_sm_margin: the GEMM is launched on
// sm_count - num_sm SMs). Every time worked by hand beside it on the round test GPU (108 SMs,
// 3e6 flop/us per SM, tiles at 0.75 with 64 of k overhead, 5 us per GEMM) and on the H100 file.
#include <gtest/gtest.h>

#include "common/error.h"
#include "config/cluster_config.h"
#include "events/event.h"
#include "modeler/device_model.h"
#include "support/round_gpu.h"
#include "support/test_support.h"

namespace evsim {
namespace {

DeviceModel roundGpu() {
  static const ClusterConfig cluster =
      test::roundGpuCluster(test::roundGpuYaml("round-gpu", "Round GPU"));
  return DeviceModel(cluster);
}

TEST(SmMargin, TilesSpreadOverTheSmsLeft) {
  const DeviceModel model = roundGpu();
  // 1536 x 1152: 12 x 9 = 108 tiles. A tile: (4096 + 64) x 2 x 128 x 128 / (3e6 x 0.75) =
  // 60.5816 us. All 108 SMs: one wave, 65.5816 us. A margin of 8 leaves 100: two waves (the
  // per-SM rate unchanged), 2 x 60.5816 + 5.
  const double tile = 4160.0 * 32768 / 2.25e6;
  EXPECT_NEAR(model.gemmUs(1, 1536, 1152, 4096, DType::kFp16, 0), tile + 5, 1e-9);
  EXPECT_NEAR(model.gemmUs(1, 1536, 1152, 4096, DType::kFp16, 0, 8), 2 * tile + 5, 1e-9);
  // 1536 x 1024: 96 tiles, one wave on 108 or on the 100 left: the margin costs nothing.
  EXPECT_NEAR(model.gemmUs(1, 1536, 1024, 4096, DType::kFp16, 0, 8),
              model.gemmUs(1, 1536, 1024, 4096, DType::kFp16, 0), 1e-9);
}

TEST(SmMargin, SplitKCountsOnlyTheSmsLeft) {
  const DeviceModel model = roundGpu();
  // One 128 x 128 tile, k 4096: split-K min(floor(108 / 1), 4096 / 256) = 16 pieces of 256, one
  // wave: (256 + 64) x 32768 / 2.25e6 + 5. A margin of 8 leaves 100 SMs: still 16 pieces. A
  // margin of 100 leaves 8: min(8, 16) = 8 pieces of 512, (512 + 64) x 32768 / 2.25e6 + 5.
  EXPECT_NEAR(model.gemmUs(1, 128, 128, 4096, DType::kFp16, 0), 320.0 * 32768 / 2.25e6 + 5, 1e-9);
  EXPECT_NEAR(model.gemmUs(1, 128, 128, 4096, DType::kFp16, 0, 8), 320.0 * 32768 / 2.25e6 + 5,
              1e-9);
  EXPECT_NEAR(model.gemmUs(1, 128, 128, 4096, DType::kFp16, 0, 100), 576.0 * 32768 / 2.25e6 + 5,
              1e-9);
}

TEST(SmMargin, TheEventCarriesItAndEstimateUsReadsIt) {
  const DeviceModel model = roundGpu();
  const Event plain = makeGemm(1536, 1152, 4096, "nt", DType::kFp16);
  const Event kept = makeCompute(
      "gemm", {{"m", 1536}, {"n", 1152}, {"k", 4096}, {"sm_margin", 8}}, "nt", DType::kFp16);
  // The same work and traffic: 2 x 1536 x 1152 x 4096 flops either way.
  EXPECT_EQ(kept.flops, plain.flops);
  EXPECT_EQ(kept.flops, 2.0 * 1536 * 1152 * 4096);
  EXPECT_EQ(kept.memory_bytes, plain.memory_bytes);
  EXPECT_EQ(kept.dim("sm_margin"), 8);
  EXPECT_NEAR(model.estimateUs(kept), 2 * 4160.0 * 32768 / 2.25e6 + 5, 1e-9);
  // Its signature reads back to the same event.
  const Event again = parseEventSignature(kept.signature(), "test");
  EXPECT_EQ(again.signature(), kept.signature());
  EXPECT_EQ(again.dim("sm_margin"), 8);
}

TEST(SmMargin, BadMarginsAreNamed) {
  EXPECT_CONTAINS(test::inputErrorOf([] {
                    parseEventSignature("gemm m=16 n=16 k=16 sm_margin=0 layout=nt dtype=fp16",
                                        "t");
                  }),
                  "dim sm_margin=0 must be > 0");
  EXPECT_CONTAINS(test::inputErrorOf([] {
                    parseEventSignature("gemm m=16 n=16 k=16 sms=4 layout=nt dtype=fp16", "t");
                  }),
                  "expects dim 'sm_margin' in place 4, got 'sms'");
  // bgemm has no optional dim.
  EXPECT_CONTAINS(test::inputErrorOf([] {
                    parseEventSignature(
                        "bgemm batch=2 m=16 n=16 k=16 sm_margin=4 layout=nt dtype=fp16", "t");
                  }),
                  "takes dims batch m n k");
  const DeviceModel model = roundGpu();
  EXPECT_CONTAINS(test::inputErrorOf([&] { model.gemmUs(1, 128, 128, 128, DType::kFp16, 0, 108); }),
                  "sm_margin=108 leaves none of round-gpu's 108 SMs");
  // A device without a fitted model (the datasheet roofline) refuses it too.
  ClusterConfig bare = test::roundGpuCluster(test::roundGpuYaml("round-gpu", "Round GPU"));
  bare.device.model.reset();
  const DeviceModel roofline(bare);
  EXPECT_CONTAINS(
      test::inputErrorOf([&] { roofline.gemmUs(1, 128, 128, 128, DType::kFp16, 0, 108); }),
      "sm_margin=108 leaves none of round-gpu's 108 SMs");
}

TEST(SmMargin, TheH100ReduceScatterChunkOfLlama70bFc2) {
  // Llama-3-70B's fc2 at TP 4, CP 2 (4,096 tokens a rank), one of the four pipelined chunks:
  // 1024 x 8192 x 7168 bf16 = 8 x 64 = 512 tiles. 132 SMs: 4 waves; 132 - 16 = 116: 5 waves. The
  // chunk is compute-bound (its 148.9 MB at ~3 TB/s is ~50 us, its tiles ~30 us a wave), so its
  // time less the fixed kernel time grows by 5 / 4 exactly.
  const ClusterConfig h100 = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const DeviceModel model(h100);
  const double kernel_us = h100.device.model->gemm_kernel_us.value;
  const double all = model.gemmUs(1, 1024, 8192, 7168, DType::kBf16, 0) - kernel_us;
  const double kept = model.gemmUs(1, 1024, 8192, 7168, DType::kBf16, 0, 16) - kernel_us;
  EXPECT_NEAR(kept / all, 5.0 / 4.0, 1e-12);
  EXPECT_GT(all, 4 * 25.0);  // compute-bound: four waves of tiles over 100 us
}

}  // namespace
}  // namespace evsim

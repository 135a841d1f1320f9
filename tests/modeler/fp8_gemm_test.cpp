// FP8 GEMMs in the device model: their own tile fit per dtype (gemm_by_dtype), so the speedup over
// 16-bit GEMMs follows the fitted curve by shape rather than the peak ratio; the scaled forms run
// at the fp8 peak; MXFP8 needs a device that lists it. Every time worked by hand beside it.
#include <gtest/gtest.h>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/device_model.h"
#include "support/round_gpu.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// 108 SMs; fp16 324 TFLOP/s (3e6 flop/us per SM), fp8 648 (6e6); GEMM efficiency 0.75 with
// 64 of k tile overhead; fp8 tiles 0.7 with 256, fp8_block 0.6 with 512; 5 us per GEMM kernel;
// memory 2000 GB/s at 0.8 (1.6e6 bytes/us).
const std::string kDeviceYaml = test::roundGpuYaml("round-gpu", "Round GPU", R"(  gemm_by_dtype:
    fp8: {efficiency: {value: 0.7, source: "test"}, tile_overhead_k: {value: 256, source: "test"}}
    fp8_block: {efficiency: {value: 0.6, source: "t"}, tile_overhead_k: {value: 512, source: "t"}}
)",
                                                   "fp16: 324, fp8: 648");

double eventUs(const DeviceModel& m, int64_t n, DType dtype) {
  return m.estimateUs(makeGemm(n, n, n, "nt", dtype));
}

TEST(Fp8Gemm, SpeedupOverFp16FollowsTheFittedCurveByShape) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // 8192^3: 4096 tiles -> 38 waves of 108.
  //   fp16: (8192 + 64) * 2*128*128 / (3e6 * 0.75) = 120.236715 us per tile; 38 waves + 5 us.
  //   fp8:  (8192 + 256) * 32768 / (6e6 * 0.7) = 65.910491 us per tile; 38 waves + 5 us (its
  //   memory, 3 * 8192^2 bytes / 1.6e6 = 125.8 us, is less).
  const double fp16_us = 38 * (8192.0 + 64) * 32768 / 2.25e6 + 5;
  const double fp8_us = 38 * (8192.0 + 256) * 32768 / 4.2e6 + 5;
  EXPECT_NEAR(eventUs(model, 8192, DType::kFp16), fp16_us, 1e-6);
  EXPECT_NEAR(eventUs(model, 8192, DType::kFp8), fp8_us, 1e-6);
  EXPECT_NEAR(eventUs(model, 8192, DType::kFp16) / eventUs(model, 8192, DType::kFp8),
              4573.99517 / 2509.59866, 1e-6);  // 1.8226x, not the peaks' 2x
  // 1024^3: 64 tiles, one wave, no split-K (floor(108 / 64) = 1).
  //   fp16: (1024 + 64) * 32768 / 2.25e6 + 5 = 20.8452 us; fp8: (1024 + 256) * 32768 / 4.2e6 + 5
  //   = 14.9863 us: 1.391x.
  EXPECT_NEAR(eventUs(model, 1024, DType::kFp16) / eventUs(model, 1024, DType::kFp8),
              (1088.0 * 32768 / 2.25e6 + 5) / (1280.0 * 32768 / 4.2e6 + 5), 1e-9);
}

TEST(Fp8Gemm, BlockScaledTilesHaveTheirOwnFitAtTheFp8PeakAndRowwiseFallsBackToTheBaseFit) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // fp8_block: (8192 + 512) * 32768 / (6e6 * 0.6) = 79.2263 us per tile, 38 waves + 5 us.
  EXPECT_NEAR(eventUs(model, 8192, DType::kFp8Block), 38 * 8704.0 * 32768 / 3.6e6 + 5, 1e-6);
  // fp8_row has no entry here: the base tile fit (0.75, 64) at the fp8 peak (6e6 per SM).
  EXPECT_NEAR(eventUs(model, 8192, DType::kFp8Row), 38 * 8256.0 * 32768 / 4.5e6 + 5, 1e-6);
}

TEST(Fp8Gemm, Mxfp8NeedsADeviceThatListsItAndScaledFp8PeaksAreNotListed) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  EXPECT_CONTAINS(test::inputErrorOf([&] { eventUs(model, 1024, DType::kMxfp8); }),
                  "no entry for mxfp8");
  std::string yaml = kDeviceYaml;
  yaml.replace(yaml.find("fp8: 648"), 8, "fp8_row: 648");
  EXPECT_CONTAINS(test::inputErrorOf([&] { parseDeviceConfig(yaml, "bad.yaml"); }),
                  "fp8_row GEMMs run at the fp8 peak");
}

TEST(Fp8Gemm, TheGemmByDtypeFitReadsBack) {
  DeviceSpec spec = parseDeviceConfig(kDeviceYaml, "round-gpu.yaml");
  DeviceSpec again = parseDeviceConfig(deviceConfigYaml(spec), "again.yaml");
  ASSERT_EQ(again.model->gemm_by_dtype.size(), 2u);
  EXPECT_EQ(again.model->gemm_by_dtype.at(DType::kFp8Block).tile_overhead_k.value, 512);
  EXPECT_EQ(again.model->gemm_by_dtype.at(DType::kFp8).efficiency.value, 0.7);
}

TEST(Fp8Gemm, TheBundledH100FitGivesLessThanThePeakRatio) {
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  DeviceModel model(cluster);
  // 8192^3 on 132 SMs: 4096 tiles, 32 waves. bf16: (8192 + 75.6144) * 32768 / (989e6/132 *
  // 0.823583) per tile; fp8: (8192 + 276) * 32768 / (1979e6/132 * 0.779); both tiles at the
  // sustained clock (x 1980/1830, the device file's clocks); + 5.45469 us each.
  const double clock = 1980.0 / 1830.0;
  const double bf16 = 32 * (8192 + 75.6144) * 32768 / (989e6 / 132 * 0.823583) * clock + 5.45469;
  const double fp8 = 32 * (8192.0 + 276) * 32768 / (1979e6 / 132 * 0.779) * clock + 5.45469;
  EXPECT_NEAR(eventUs(model, 8192, DType::kBf16), bf16, 1e-3);
  EXPECT_NEAR(eventUs(model, 8192, DType::kFp8), fp8, 1e-3);
  EXPECT_NEAR(bf16 / fp8, 1.8423, 1e-3);  // not 1979 / 989 = 2.001
}

}  // namespace
}  // namespace evsim

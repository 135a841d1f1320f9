// Sustained clocks (device file `clocks`, modeler/device_model.h): compute-bound time scales by
// fit_mhz / sustained_mhz, byte-bound time and the fixed kernel times do not. Every time worked by
// hand beside it.
#include "modeler/calibration/sustained_clock.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/device_model.h"
#include "support/round_gpu.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// 108 SMs, fp16 324 TFLOP/s (3e6 flop/us per SM), tiles at 0.75 with 64 of k overhead, 5 us per
// GEMM; 2000 GB/s at 0.8, 2 us per memory-bound kernel; fitted at 2000 MHz, sustains 1600.
const std::string kDeviceYaml = test::roundGpuYaml("clocked-gpu", "Clocked GPU", R"(  clocks:
    fit_mhz: {value: 2000, source: "test"}
    sustained_mhz: {value: 1600, source: "test"}
)");

TEST(SustainedClock, ComputeBoundTilesRunAtTheSustainedClock) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml, "clocked-gpu.yaml");
  DeviceModel model(cluster);
  // 1536 x 1152: 12 x 9 = 108 tiles, one wave, no split-K. A tile: (4096 + 64) * 2 * 128 * 128 /
  // (3e6 * 0.75) = 60.5816 us at the fit's clock; at 1600 of 2000 MHz x 1.25 = 75.727 us, + 5.
  EXPECT_NEAR(model.gemmUs(1, 1536, 1152, 4096, DType::kFp16, 0),
              4160.0 * 32768 / 2.25e6 * 1.25 + 5, 1e-6);
  // A memory-bound op: 1.6e9 B at 2000 GB/s * 0.8 = 1000 us + 2, whatever the SM clock.
  EXPECT_NEAR(model.memoryBoundUs(0, 1'600'000'000, DType::kFp16, "add"), 1002, 1e-6);
  // A GEMM bound by its bytes (k = 16: 1.165 us of tiles x 1.25; 8e8 B: 500 us) keeps its time.
  EXPECT_NEAR(model.gemmUs(1, 1536, 1152, 16, DType::kFp16, 800'000'000), 505, 1e-6);
}

TEST(SustainedClock, WithoutClocksOrAtTheFitsClockNothingChanges) {
  std::string yaml = kDeviceYaml;
  yaml.replace(yaml.find("1600"), 4, "2000");
  EXPECT_NEAR(DeviceModel(test::roundGpuCluster(yaml, "clocked-gpu.yaml"))
                  .gemmUs(1, 1536, 1152, 4096, DType::kFp16, 0),
              4160.0 * 32768 / 2.25e6 + 5, 1e-6);
  // The bundled A100 fit came from whole training runs: fit_mhz = sustained_mhz, factor 1.
  const ClusterConfig a100 = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  EXPECT_EQ(a100.device.model->computeSlowdown(), 1.0);
  // The H100's short-kernel fit at the 1,980 MHz boost, a training step at 1,830.
  const ClusterConfig h100 = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  EXPECT_NEAR(h100.device.model->computeSlowdown(), 1980.0 / 1830.0, 1e-12);
}

TEST(SustainedClock, TheGrandTetonH100RunsSlowerByItsClockAndItsMemory) {
  // torchtitan's benchmark H100s (configs/devices/h100-sxm5-96gb-500w.yaml): the SXM5 fits, 1,690
  // instead of 1,830 MHz sustained, 2,400 instead of 3,350 GB/s.
  const ClusterConfig h100 = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const ClusterConfig teton = loadClusterConfig(test::configPath("clusters", "grand-teton-h100"));
  EXPECT_NEAR(teton.device.model->computeSlowdown(), 1980.0 / 1690.0, 1e-12);
  DeviceModel fast(h100), slow(teton);
  // A compute-bound GEMM: its tiles x 1830 / 1690, the fixed 5.45469 us per GEMM unchanged.
  const double kernel_us = 5.45469;
  const double gemm_us = fast.gemmUs(1, 8192, 8192, 8192, DType::kBf16, 0) - kernel_us;
  EXPECT_NEAR(slow.gemmUs(1, 8192, 8192, 8192, DType::kBf16, 0) - kernel_us,
              gemm_us * 1830.0 / 1690.0, 1e-6 * gemm_us);
  // An add of 1.6e9 B at the fitted 0.918431 of the bandwidth: 1.6e9 / (3350e3 x 0.918431) =
  // 520.03 us, 1.6e9 / (2400e3 x 0.918431) = 725.88 us; the kernel's fixed time cancels.
  const int64_t bytes = 1'600'000'000;
  EXPECT_NEAR(slow.memoryBoundUs(0, bytes, DType::kBf16, "add") -
                  fast.memoryBoundUs(0, bytes, DType::kBf16, "add"),
              1.6e9 / (2400e3 * 0.918431) - 1.6e9 / (3350e3 * 0.918431), 1e-6);
}

TEST(SustainedClock, ItReadsBackAndABadClockIsNamed) {
  const DeviceSpec spec = parseDeviceConfig(kDeviceYaml, "clocked-gpu.yaml");
  const DeviceSpec again = parseDeviceConfig(deviceConfigYaml(spec), "again.yaml");
  ASSERT_TRUE(again.model->clocks.has_value());
  EXPECT_EQ(again.model->clocks->sustained_mhz.value, 1600);
  std::string yaml = kDeviceYaml;
  yaml.replace(yaml.find("value: 1600"), 11, "value: 0");
  EXPECT_CONTAINS(test::inputErrorOf([&] { parseDeviceConfig(yaml, "bad.yaml"); }),
                  "sustained_mhz.value: must be > 0");
}

TEST(SustainedClock, EventprofsRecordSetsTheSustainedClock) {
  SustainedGemmRecord r;
  r.backend = "cuda";
  r.device = "GPU";
  r.date = "2026-11-26T01:00:00Z";
  r.gemm = "gemm m=8192 n=8192 k=8192 layout=nn dtype=bf16";
  r.seconds = 60;
  r.elapsed_s = 60;
  r.short_us = 1400;
  r.sustained_us = 1750;
  r.chunks = 40;
  r.max_clock_mhz = 1980;
  // The device's own fit clock (2000) is kept: sustained = 2000 x 1400 / 1750 = 1600 MHz.
  DeviceSpec device = parseDeviceConfig(kDeviceYaml, "clocked-gpu.yaml");
  applySustainedClock(r, "s.yaml", device);
  EXPECT_EQ(device.model->clocks->fit_mhz.value, 2000);
  EXPECT_NEAR(device.model->clocks->sustained_mhz.value, 1600, 1e-9);
  // Without clocks in the file, the measured device's maximum clock: 1980 x 0.8 = 1584 MHz.
  std::string yaml = kDeviceYaml;
  yaml.erase(yaml.find("  clocks:"));
  DeviceSpec plain = parseDeviceConfig(yaml, "plain.yaml");
  applySustainedClock(r, "s.yaml", plain);
  EXPECT_EQ(plain.model->clocks->fit_mhz.value, 1980);
  EXPECT_NEAR(plain.model->clocks->sustained_mhz.value, 1584, 1e-9);
  // A CPU's record has no clock: with no fit_mhz in the device either, one clear error.
  r.max_clock_mhz = 0;
  r.backend = "cpu";
  DeviceSpec again = parseDeviceConfig(yaml, "plain.yaml");
  EXPECT_CONTAINS(test::inputErrorOf([&] { applySustainedClock(r, "s.yaml", again); }),
                  "--sustained-gemm s.yaml: it reports no device clock (max_clock_mhz 0, backend "
                  "cpu) and device 'clocked-gpu' has no clocks.fit_mhz to scale");
}

}  // namespace
}  // namespace evsim

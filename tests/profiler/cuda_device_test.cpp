// The CUDA device's compute timing on a real GPU (label `gpu`; skipped without one): CUPTI kernel
// spans for a GEMM and a row-wise op, with the metadata the profile records.
#include "platform/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include "kernels/cuda/cuda_kernels.h"
#include "profiler/stats.h"

namespace evsim {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    device_ = makeCudaDevice(CudaDeviceOptions{});
  }
  std::unique_ptr<Device> device_;
};

TEST_F(CudaDeviceTest, DescribesItself) {
  EXPECT_EQ(device_->platform(), "cuda");
  EXPECT_FALSE(device_->deviceName().empty());
  auto versions = device_->versions();
  EXPECT_TRUE(versions.count("cuda"));
  EXPECT_TRUE(versions.count("nccl"));
}

TEST_F(CudaDeviceTest, TimesComputeEvents) {
  for (const char* signature : {"gemm m=1024 n=1024 k=1024 layout=nt dtype=bf16",
                                "softmax_fwd rows=4096 cols=512 dtype=fp16"}) {
    Event event = parseEventSignature(signature, "test");
    std::vector<double> us = device_->timeCompute(event, 2, 5);
    ASSERT_EQ(us.size(), 5u) << signature;
    TimingStats stats = computeStats(us);
    EXPECT_GT(stats.min_us, 0) << signature;
    EXPECT_LT(stats.median_us, 1e5) << signature;  // a tiny event takes far less than 0.1 s
  }
}

// Two independent timers of the same device work: CUPTI's kernel spans and CUDA events around
// groups of back-to-back repetitions (both behind the hold kernel). A compute-bound GEMM must agree
// within the 3% of issue 18. A memory-bound add gets 10%: on an H100 (2026-11-23) its CUPTI span
// was 6% longer than its event time, run after run, which the launch gap (~1 us of 228) does not
// explain (docs/VALIDATION.md reports it as a miss).
TEST_F(CudaDeviceTest, CudaEventTimingAgreesWithCupti) {
  if (device_->versions().count("cupti") == 0) GTEST_SKIP() << "CUPTI unavailable here";
  CudaDeviceOptions events_only;
  events_only.compute_timer = CudaComputeTimer::kCudaEvents;
  std::unique_ptr<Device> with_events = makeCudaDevice(events_only);
  // 2*4096^3 = 137 GFLOP: 0.1-1.4 ms on any GPU from 100 to 1000 TFLOP/s; 2^26 bf16 adds move
  // 384 MiB: 0.1-0.5 ms at 0.8-3.3 TB/s.
  const std::pair<const char*, double> cases[] = {
      {"gemm m=4096 n=4096 k=4096 layout=nt dtype=bf16", 0.03},
      {"add elems=67108864 dtype=bf16", 0.10}};
  for (const auto& [signature, tolerance] : cases) {
    Event event = parseEventSignature(signature, "test");
    const double cupti = computeStats(device_->timeCompute(event, 3, 20)).median_us;
    std::vector<double> samples = with_events->timeCompute(event, 3, 20);
    EXPECT_EQ(samples.size(), 5u) << "five groups of four repetitions";
    const double events = computeStats(samples).median_us;
    EXPECT_NEAR(events / cupti, 1.0, tolerance)
        << signature << ": CUPTI " << cupti << " us, events " << events << " us";
  }
  EXPECT_NE(with_events->timingNote().find("host time to enqueue one repetition"),
            std::string::npos);
  EXPECT_EQ(device_->timingNote(), "");  // CUPTI timing has no enqueue note
}

}  // namespace
}  // namespace evsim

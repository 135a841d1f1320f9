// The CUDA backend's compute timing on a real GPU (label `gpu`; skipped without one): CUPTI kernel
// spans for a GEMM and a row-wise op, with the metadata the profile records.
#include "profiler/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include "profiler/stats.h"

namespace evsim {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visibleCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
    backend_ = makeCudaBackend(CudaBackendOptions{});
  }
  std::unique_ptr<ProfilerBackend> backend_;
};

TEST_F(CudaBackendTest, DescribesItself) {
  EXPECT_EQ(backend_->name(), "cuda");
  EXPECT_FALSE(backend_->deviceName().empty());
  auto versions = backend_->versions();
  EXPECT_TRUE(versions.count("cuda"));
  EXPECT_TRUE(versions.count("nccl"));
}

TEST_F(CudaBackendTest, TimesComputeEvents) {
  for (const char* signature : {"gemm m=1024 n=1024 k=1024 layout=nt dtype=bf16",
                                "softmax_fwd rows=4096 cols=512 dtype=fp16"}) {
    Event event = parseEventSignature(signature, "test");
    std::vector<double> us = backend_->timeCompute(event, 2, 5);
    ASSERT_EQ(us.size(), 5u) << signature;
    TimingStats stats = computeStats(us);
    EXPECT_GT(stats.min_us, 0) << signature;
    EXPECT_LT(stats.median_us, 1e5) << signature;  // a tiny event takes far less than 0.1 s
  }
}

}  // namespace
}  // namespace evsim

// makeCpuKernel: every compute op of events/ constructs and runs; bad events are rejected.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "events/event.h"
#include "kernels/kernel.h"
#include "tests/kernels/small_events.h"

namespace evsim {
namespace {

TEST(CpuKernelFactory, EveryComputeOpConstructsAndRuns) {
  for (const std::string& op : computeOpNames()) {
    SCOPED_TRACE(op);
    if (test::hasNoKernel(op)) {
      const Event event = test::smallEvent(op);
      try {
        makeCpuKernel(event, 3);
        FAIL() << "expected InputError";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(event.signature()), std::string::npos) << e.what();
      }
      continue;
    }
    Event event = test::smallEvent(op);
    std::unique_ptr<ComputeKernel> kernel = makeCpuKernel(event, 3);
    ASSERT_NE(kernel, nullptr);
    kernel->run();
    kernel->run();
    kernel->synchronize();
  }
}

TEST(CpuKernelFactory, EveryGemmLayoutRuns) {
  for (const char* layout : {"nn", "nt", "tn", "tt"}) {
    makeCpuKernel(makeGemm(5, 3, 7, layout, DType::kFp16))->run();
    makeCpuKernel(makeBatchedGemm(2, 5, 3, 7, layout, DType::kFp32))->run();
  }
}

TEST(CpuKernelFactory, Fp8GemmsRunInFp32) {
  // The CPU computes every dtype in float32; fp8 GEMMs are no exception.
  for (const char* layout : {"nn", "nt", "tn", "tt"}) {
    makeCpuKernel(makeGemm(16, 32, 48, layout, DType::kFp8))->run();
    makeCpuKernel(makeBatchedGemm(2, 16, 32, 48, layout, DType::kFp8))->run();
  }
}

TEST(CpuKernelFactory, RejectsFp8NonGemmEventsNamingTheSignature) {
  for (const std::string& op : computeOpNames()) {
    Event event = test::smallEvent(op, DType::kFp8);
    // GEMMs take fp8; adam's dtype is always fp32 (makeCompute).
    if (isGemmOp(op) || event.dtype != DType::kFp8) continue;
    SCOPED_TRACE(op);
    try {
      makeCpuKernel(event);
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(event.signature()), std::string::npos) << e.what();
    }
  }
}

TEST(CpuKernelFactory, RopeRejectsAnOddDimNamingTheSignature) {
  Event event =
      makeCompute("rope_fwd", {{"tokens", 4}, {"heads", 2}, {"dim", 7}}, "", DType::kBf16, "test");
  try {
    makeCpuKernel(event);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rope_fwd tokens=4 heads=2 dim=7 dtype=bf16"),
              std::string::npos)
        << e.what();
  }
}

TEST(CpuKernelFactory, AttentionRejectsGroupsThatDoNotDivideBatch) {
  Event event = test::smallEvent("flash_attn_fwd");
  event.dims[1].value = 3;  // groups=3, batch=4: built by hand, past makeCompute's check
  EXPECT_THROW(makeCpuKernel(event), InputError);
}

TEST(CpuKernelFactory, RejectsUnknownOpNamingTheSignature) {
  Event event;
  event.kind = EventKind::kCompute;
  event.op = "conv2d";
  event.dims = {{"elems", 4}};
  try {
    makeCpuKernel(event);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d elems=4 dtype=fp16"), std::string::npos)
        << e.what();
  }
}

TEST(CpuKernelFactory, RejectsCommunicationEventsAndBadLayouts) {
  Event comm = makeCommunication(EventKind::kAllReduce, 1024, Placement{2, 1, 2}, DType::kFp16);
  EXPECT_THROW(makeCpuKernel(comm), InputError);
  Event gemm = makeGemm(2, 2, 2, "nn", DType::kFp16);
  gemm.layout = "xy";
  EXPECT_THROW(makeCpuKernel(gemm), InputError);
}

}  // namespace
}  // namespace evsim

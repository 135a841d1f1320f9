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

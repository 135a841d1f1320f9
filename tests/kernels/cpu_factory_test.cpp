// makeCpuKernel: every compute op of events/ constructs and runs; bad events are rejected.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim {
namespace {

// Small dims for each op, in the order events/ expects them.
Event smallEvent(const std::string& op) {
  static const std::map<std::string, std::vector<Dim>> dims = {
      {"gemm", {{"m", 8}, {"n", 6}, {"k", 4}}},
      {"bgemm", {{"batch", 3}, {"m", 8}, {"n", 6}, {"k", 4}}},
      {"layernorm_fwd", {{"rows", 4}, {"cols", 16}}},
      {"layernorm_bwd", {{"rows", 4}, {"cols", 16}}},
      {"softmax_fwd", {{"rows", 32}, {"cols", 8}}},
      {"softmax_bwd", {{"rows", 32}, {"cols", 8}}},
      {"cross_entropy_fwd", {{"rows", 4}, {"cols", 100}}},
      {"cross_entropy_bwd", {{"rows", 4}, {"cols", 100}}},
      {"gelu_fwd", {{"elems", 1000}}},
      {"gelu_bwd", {{"elems", 1000}}},
      {"dropout_fwd", {{"elems", 1000}}},
      {"dropout_bwd", {{"elems", 1000}}},
      {"add", {{"elems", 1000}}},
      {"embedding_fwd", {{"tokens", 16}, {"hidden", 8}, {"vocab", 50}}},
      {"embedding_bwd", {{"tokens", 16}, {"hidden", 8}, {"vocab", 50}}},
      {"adam", {{"params", 1000}}},
  };
  auto it = dims.find(op);
  if (it == dims.end()) ADD_FAILURE() << "no test dims for op '" << op << "'";
  std::vector<Dim> d = it == dims.end() ? std::vector<Dim>{} : it->second;
  bool gemm_like = op == "gemm" || op == "bgemm";
  return makeCompute(op, d, gemm_like ? "nt" : "", DType::kBf16, "test");
}

TEST(CpuKernelFactory, EveryComputeOpConstructsAndRuns) {
  for (const std::string& op : computeOpNames()) {
    SCOPED_TRACE(op);
    Event event = smallEvent(op);
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

// Built instead of eventrun_cuda_executor.cpp when the CUDA platform is not (EVSIM_WITH_CUDA off):
// platform/device_factory.cpp never makes a cuda device then, so this is never reached.
#include "common/error.h"
#include "runner/cuda/eventrun_cuda_executor.h"

namespace evsim {

std::unique_ptr<RankExecutor> makeCudaRankExecutor(const IterationPlan&, const RankProgram&,
                                                   const CudaExecutorOptions&) {
  EVSIM_THROW(Error, "unreachable: a CUDA executor in a build without the CUDA platform");
}

}  // namespace evsim

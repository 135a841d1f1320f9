// The only eventrun file compiled with EVSIM_WITH_CUDA: everything else sees RankExecutor.
#include "runner/eventrun_backend.h"

#include "mpi/mpi_env.h"
#include "runner/eventrun_backend_p2p.h"

#if EVSIM_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#include "runner/cuda/eventrun_cuda_executor.h"
#endif

namespace evsim {

void checkEventrunBackend(const EventrunBackendRequest& request,
                          [[maybe_unused]] const MpiWorld& world) {
  if (request.name == "cpu") return;
  if (request.name != "cuda") {
    EVSIM_THROW(CollectiveInputError, "--backend {}: must be cpu or cuda", request.name);
  }
#if !EVSIM_WITH_CUDA
  EVSIM_THROW(
      CollectiveInputError,
      "--backend cuda: this eventrun was built without CUDA (configure with -DEVSIM_BACKEND=cuda "
      "or auto on a machine with the CUDA toolkit, CUPTI and NCCL), or use --backend cpu");
#else
  const GpuShortage shortage = findGpuShortage(world, cudaDeviceCount());
  if (!shortage.none()) EVSIM_THROW(CollectiveInputError, "{}", shortage.message());
#endif
}

std::unique_ptr<RankExecutor> makeRankExecutor(const EventrunBackendRequest& request,
                                               const IterationPlan& plan,
                                               const RankProgram& program, const MpiWorld& world) {
  checkEventrunBackend(request, world);
  if (request.name == "cpu") {
    return std::make_unique<CpuRankExecutor>(plan, program, request.wait, request.seed);
  }
#if EVSIM_WITH_CUDA
  // Every rank derives the same fused pairs from all ranks' programs (no communication needed).
  std::vector<RankProgram> programs;
  for (int r = 0; r < world.size; ++r) programs.push_back(buildRankProgram(plan, r));
  std::vector<std::vector<size_t>> fused;
  try {
    fused = fuseP2P(programs);
  } catch (const Error& e) {
    // Every rank finds the same from the same programs: one message, exit 2.
    EVSIM_THROW(
        CollectiveInputError,
        "--backend cuda --schedule {}: this schedule's P2P order cannot run on NCCL's rendezvous "
        "send/receive yet ({}); use --backend cpu",
        scheduleName(plan.strategy.schedule), e.what());
  }
  return makeCudaRankExecutor(
      plan, program,
      CudaExecutorOptions{world.local_rank, request.seed, request.comm_timeout_s,
                          fused[static_cast<size_t>(world.rank)]});
#else
  EVSIM_THROW(Error, "unreachable: cuda chosen without the CUDA executor");
#endif
}

}  // namespace evsim

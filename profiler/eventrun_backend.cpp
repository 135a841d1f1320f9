// The only eventrun file compiled with EVSIM_WITH_CUDA: everything else sees RankExecutor.
#include "profiler/eventrun_backend.h"

#include "profiler/eventrun_backend_p2p.h"
#include "profiler/mpi_check.h"
#include "profiler/profile_session.h"

#if EVSIM_WITH_CUDA
#include "profiler/cuda/cuda_backend.h"
#include "profiler/cuda/eventrun_cuda_executor.h"
#endif

namespace evsim {

void checkEventrunBackend(const EventrunBackendRequest& request,
                          [[maybe_unused]] const MpiWorld& world) {
  if (request.name == "cpu") return;
  if (request.name != "cuda") {
    throw CollectiveInputError(fmt::format("--backend {}: must be cpu or cuda", request.name));
  }
#if !EVSIM_WITH_CUDA
  throw CollectiveInputError(
      "--backend cuda: this eventrun was built without CUDA (configure with -DEVSIM_BACKEND=cuda "
      "or auto on a machine with the CUDA toolkit, CUPTI and NCCL), or use --backend cpu");
#else
  // Every rank needs a GPU of its own: NCCL refuses two ranks of a communicator on one GPU.
  int mine[2] = {visibleCudaDevices(), world.local_size};
  std::vector<int> all(2 * static_cast<size_t>(world.size));
  EVSIM_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD));
  std::vector<std::string> hosts =
      broadcastStrings(gatherStrings(world.host, 0, MPI_COMM_WORLD), 0, MPI_COMM_WORLD);
  std::vector<std::string> without, shared;
  for (int r = 0; r < world.size; ++r) {
    const int gpus = all[2 * r], ranks_on_host = all[2 * r + 1];
    if (gpus == 0) {
      without.push_back(fmt::format("{}@{}", r, hosts[r]));
    } else if (gpus < ranks_on_host) {
      shared.push_back(fmt::format("{}@{} ({} ranks, {} GPUs)", r, hosts[r], ranks_on_host, gpus));
    }
  }
  if (!without.empty()) {
    throw CollectiveInputError(fmt::format(
        "--backend cuda: no CUDA device visible on rank(s) {} (check CUDA_VISIBLE_DEVICES and the "
        "driver, or use --backend cpu)",
        fmt::join(without, ", ")));
  }
  if (!shared.empty()) {
    throw CollectiveInputError(fmt::format(
        "--backend cuda: more ranks than GPUs on a host, rank(s) {}: each rank needs its own GPU "
        "(start fewer ranks per host, or use --backend cpu)",
        fmt::join(shared, ", ")));
  }
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
    throw CollectiveInputError(fmt::format(
        "--backend cuda --schedule {}: this schedule's P2P order cannot run on NCCL's rendezvous "
        "send/receive yet ({}); use --backend cpu",
        scheduleName(plan.strategy.schedule), e.what()));
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

// The one place that picks the profiling backend (kineto's ActivityProfilerController is the
// model): everything else sees only ProfilerBackend.
#include "profiler/backend_factory.h"

#include "profiler/cpu_backend.h"
#include "profiler/mpi_check.h"
#include "profiler/profile_session.h"

#if EVSIM_WITH_CUDA
#include "profiler/cuda/cuda_backend.h"
#endif

namespace evsim {

namespace {

int visibleGpus() {
#if EVSIM_WITH_CUDA
  return visibleCudaDevices();
#else
  return 0;
#endif
}

}  // namespace

bool cudaBackendBuilt() {
#if EVSIM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<ProfilerBackend> makeBackend(const BackendRequest& request, const MpiWorld& world) {
  if (request.name != "auto" && request.name != "cpu" && request.name != "cuda") {
    throw CollectiveInputError(
        fmt::format("--backend {}: must be auto, cpu or cuda", request.name));
  }
  std::string chosen = request.name;
  if (chosen != "cpu") {
    if (!cudaBackendBuilt()) {
      if (chosen == "cuda") {
        throw CollectiveInputError(
            "--backend cuda: this eventprof was built without the CUDA backend (configure with "
            "-DEVSIM_BACKEND=cuda on a machine with the CUDA toolkit, CUPTI and NCCL)");
      }
      chosen = "cpu";
    } else {
      // Every rank needs a GPU of its own: NCCL refuses two ranks of a communicator on one GPU.
      int mine[2] = {visibleGpus(), world.local_size};
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
          shared.push_back(
              fmt::format("{}@{} ({} ranks, {} GPUs)", r, hosts[r], ranks_on_host, gpus));
        }
      }
      if (without.empty() && shared.empty()) {
        chosen = "cuda";
      } else if (chosen == "cuda" && !without.empty()) {
        throw CollectiveInputError(fmt::format(
            "--backend cuda: no CUDA device visible on rank(s) {} (check CUDA_VISIBLE_DEVICES and "
            "the driver, or use --backend cpu)",
            fmt::join(without, ", ")));
      } else if (chosen == "cuda") {
        throw CollectiveInputError(fmt::format(
            "--backend cuda: more ranks than GPUs on a host, rank(s) {}: each rank needs its own "
            "GPU (start fewer ranks per host, or use --backend cpu)",
            fmt::join(shared, ", ")));
      } else {
        chosen = "cpu";
      }
    }
  }
  if (chosen == "cpu") return std::make_unique<CpuBackend>(request.seed, world.local_size);
#if EVSIM_WITH_CUDA
  return makeCudaBackend(
      CudaBackendOptions{world.local_rank, request.seed, request.comm_timeout_s});
#else
  EVSIM_THROW(Error, "unreachable: cuda chosen without the CUDA backend");
#endif
}

}  // namespace evsim

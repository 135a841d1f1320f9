// The one place that picks the profiling backend (kineto's ActivityProfilerController is the
// model): everything else sees only ProfilerBackend.
#include "profiler/backend_factory.h"

#include "profiler/cpu_backend.h"
#include "profiler/profile_session.h"

#if EVSIM_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#include "profiler/cuda/cuda_backend.h"
#endif

namespace evsim {

namespace {

int visibleGpus() {
#if EVSIM_WITH_CUDA
  return cudaDeviceCount();
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
    EVSIM_THROW(CollectiveInputError, "--backend {}: must be auto, cpu or cuda", request.name);
  }
  std::string chosen = request.name;
  if (chosen != "cpu") {
    if (!cudaBackendBuilt()) {
      if (chosen == "cuda") {
        EVSIM_THROW(
            CollectiveInputError,
            "--backend cuda: this eventprof was built without the CUDA backend (configure with "
            "-DEVSIM_BACKEND=cuda on a machine with the CUDA toolkit, CUPTI and NCCL)");
      }
      chosen = "cpu";
    } else {
      const GpuShortage shortage = findGpuShortage(world, visibleGpus());
      if (shortage.none()) {
        chosen = "cuda";
      } else if (chosen == "cuda") {
        EVSIM_THROW(CollectiveInputError, "{}", shortage.message());
      } else {
        chosen = "cpu";
      }
    }
  }
  if (request.compute_timer != "cupti" && request.compute_timer != "cuda-events") {
    EVSIM_THROW(CollectiveInputError, "--compute-timer {}: must be cupti or cuda-events",
                request.compute_timer);
  }
  if (chosen == "cpu") {
    if (request.compute_timer != "cupti") {
      EVSIM_THROW(CollectiveInputError,
                  "--compute-timer {}: applies to the cuda backend only (this run uses cpu)",
                  request.compute_timer);
    }
    return std::make_unique<CpuBackend>(request.seed, world.local_size);
  }
#if EVSIM_WITH_CUDA
  return makeCudaBackend(CudaBackendOptions{world.local_rank, request.seed, request.comm_timeout_s,
                                            request.compute_timer == "cupti"});
#else
  EVSIM_THROW(Error, "unreachable: cuda chosen without the CUDA backend");
#endif
}

}  // namespace evsim

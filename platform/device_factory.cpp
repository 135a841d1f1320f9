// The one place that picks the platform (kineto's ActivityProfilerController is the model):
// everything else in eventprof and eventrun sees only Device.
#include "platform/device_factory.h"

#include "kernels/cpu/cpu_host.h"
#include "platform/cpu/cpu_device.h"

#if EVSIM_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#include "platform/cuda/cuda_device.h"
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

// "cpu" or "cuda" for `name`, or a CollectiveInputError saying why the request cannot be met.
std::string choosePlatform(const std::string& name, const MpiWorld& world) {
  if (name != "auto" && name != "cpu" && name != "cuda") {
    EVSIM_THROW(CollectiveInputError, "--backend {}: must be auto, cpu or cuda", name);
  }
  if (name == "cpu") return "cpu";
  if (!cudaPlatformBuilt()) {
    if (name == "cuda") {
      EVSIM_THROW(CollectiveInputError,
                  "--backend cuda: this build has no CUDA backend (configure with "
                  "-DEVSIM_BACKEND=cuda on a machine with the CUDA toolkit, CUPTI and NCCL), or "
                  "use --backend cpu");
    }
    return "cpu";
  }
  const GpuShortage shortage = findGpuShortage(world, visibleGpus());
  if (shortage.none()) return "cuda";
  if (name == "cuda") EVSIM_THROW(CollectiveInputError, "{}", shortage.message());
  return "cpu";
}

WaitMode waitMode(const std::string& flag, const MpiWorld& world) {
  if (flag == "spin") return WaitMode::kSpin;
  if (flag == "sleep") return WaitMode::kSleep;
  if (flag != "auto") {
    EVSIM_THROW(CollectiveInputError, "--wait {}: must be auto, spin or sleep", flag);
  }
  return world.local_size > world.host_cores ? WaitMode::kSleep : WaitMode::kSpin;
}

}  // namespace

bool cudaPlatformBuilt() {
#if EVSIM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Device> makeDevice(const DeviceRequest& request, const MpiWorld& world) {
  const std::string platform = choosePlatform(request.name, world);
  if (request.compute_timer != "cupti" && request.compute_timer != "cuda-events") {
    EVSIM_THROW(CollectiveInputError, "--compute-timer {}: must be cupti or cuda-events",
                request.compute_timer);
  }
  const WaitMode wait = waitMode(request.wait, world);
  if (platform == "cpu") {
    if (request.compute_timer != "cupti") {
      EVSIM_THROW(CollectiveInputError,
                  "--compute-timer {}: applies to the cuda backend only (this run uses cpu)",
                  request.compute_timer);
    }
    return std::make_unique<CpuDevice>(request.seed, world.local_size, world.host_cores, wait);
  }
  if (request.wait != "auto") {
    EVSIM_THROW(CollectiveInputError,
                "--wait {}: applies to the cpu backend only (this run uses cuda)", request.wait);
  }
#if EVSIM_WITH_CUDA
  CudaDeviceOptions options;
  options.local_rank = world.local_rank;
  options.seed = request.seed;
  options.comm_timeout_s = request.comm_timeout_s;
  options.compute_timer = !request.measures_events           ? CudaComputeTimer::kNone
                          : request.compute_timer == "cupti" ? CudaComputeTimer::kCupti
                                                             : CudaComputeTimer::kCudaEvents;
  return makeCudaDevice(options);
#else
  EVSIM_THROW(Error, "unreachable: cuda chosen without the CUDA platform");
#endif
}

}  // namespace evsim

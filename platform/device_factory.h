#pragma once
// Chooses and builds this rank's Device, for eventprof and eventrun alike. device_factory.cpp is
// the only file of either tool that knows whether the CUDA platform was built (#if
// EVSIM_WITH_CUDA).

#include <cstdint>
#include <memory>
#include <string>

#include "mpi/mpi_env.h"
#include "platform/device.h"

namespace evsim {

struct DeviceRequest {
  std::string name = "auto";    // --backend: auto | cpu | cuda
  uint64_t seed = 1;            // kernels' random inputs (per rank)
  double comm_timeout_s = 300;  // CUDA: a NCCL operation pending longer aborts the run
  // Whether events will be timed one by one (eventprof). A device that only runs programs
  // (eventrun) skips the compute timer's setup: a CUPTI subscription would slow its kernels.
  bool measures_events = true;
  // CUDA, when measuring: how compute events are timed. "cupti" (the span of the event's kernels
  // as CUPTI reports them; CUDA events when CUPTI is unavailable) or "cuda-events" (events around
  // groups of repetitions): the second exists to cross-check the first on a GPU.
  std::string compute_timer = "cupti";
  // CPU, when running programs: how a rank waits for MPI. "spin" (MPI_Wait), "sleep" (MPI_Test
  // and short sleeps) or "auto" (sleep when this host has more ranks than cores).
  std::string wait = "auto";
};

// True when this build has the CUDA platform.
bool cudaPlatformBuilt();

// Collective over MPI_COMM_WORLD: every rank checks the same request against the same world, so
// every rank fails alike. `auto` picks cuda only when it was built and every rank has a GPU of its
// own (a host's GPUs >= its ranks), cpu otherwise; `cuda` where it was not built, where some rank
// sees no GPU or where ranks would share a GPU is a CollectiveInputError naming those ranks — never
// a silent fallback. Flags that do not apply to the chosen platform are refused the same way.
std::unique_ptr<Device> makeDevice(const DeviceRequest& request, const MpiWorld& world);

}  // namespace evsim

#pragma once
// Chooses and builds this rank's profiling backend. backend_factory.cpp is the only file of the
// profiler that knows whether the CUDA backend was built (#if EVSIM_WITH_CUDA).

#include <cstdint>
#include <memory>
#include <string>

#include "mpi/mpi_env.h"
#include "profiler/backend.h"

namespace evsim {

struct BackendRequest {
  std::string name = "auto";    // auto | cpu | cuda
  uint64_t seed = 1;            // kernels' random inputs (per rank)
  double comm_timeout_s = 300;  // CUDA: a NCCL operation pending longer aborts the run
  // CUDA: how compute events are timed. "cupti" (the span of the event's kernels as CUPTI reports
  // them; CUDA events when CUPTI is unavailable) or "cuda-events" (events around each repetition,
  // launch gaps included): the second exists to cross-check the first on a GPU.
  std::string compute_timer = "cupti";
};

// True when this eventprof was built with the CUDA backend.
bool cudaBackendBuilt();

// Collective over MPI_COMM_WORLD. `auto` picks cuda only when it was built and every rank has a GPU
// of its own (a host's GPUs >= its ranks), cpu otherwise; `cuda` where it was not built, where
// some rank sees no GPU or where ranks would share a GPU is a CollectiveInputError naming those
// ranks — never a silent fallback.
std::unique_ptr<ProfilerBackend> makeBackend(const BackendRequest& request, const MpiWorld& world);

}  // namespace evsim

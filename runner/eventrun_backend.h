#pragma once
// The one place that picks eventrun's executor (as profiler/backend_factory.cpp does for
// eventprof): `cpu` is CpuRankExecutor (runner/eventrun_executor.h); `cuda` is the CUDA executor
// (runner/cuda/eventrun_cuda_executor.h), present only in builds with EVSIM_WITH_CUDA.

#include <memory>
#include <string>

#include "events/iteration_plan.h"
#include "mpi/mpi_env.h"
#include "runner/eventrun_executor.h"
#include "runner/eventrun_program.h"

namespace evsim {

struct EventrunBackendRequest {
  std::string name = "cpu";         // cpu | cuda
  WaitMode wait = WaitMode::kSpin;  // cpu only
  uint64_t seed = 1;                // this rank's kernel seed
  double comm_timeout_s = 300;      // cuda only: a NCCL operation pending longer aborts the run
};

// Collective over MPI_COMM_WORLD. Checks that the backend can run on every rank before any rank
// builds it: `cuda` in a build without CUDA, with a rank that sees no GPU, or with more ranks than
// GPUs on a host is a CollectiveInputError (one line on rank 0, exit 2). `plan` and `program` must
// outlive the executor.
void checkEventrunBackend(const EventrunBackendRequest& request, const MpiWorld& world);
std::unique_ptr<RankExecutor> makeRankExecutor(const EventrunBackendRequest& request,
                                               const IterationPlan& plan,
                                               const RankProgram& program, const MpiWorld& world);

}  // namespace evsim

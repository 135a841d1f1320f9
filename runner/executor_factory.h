#pragma once
// The executor that runs this rank's program on its Device: the CPU executor (kernels/cpu + MPI)
// on the cpu platform, the CUDA executor (kernels/cuda + NCCL) on the cuda platform. The executors
// are the runner's logic (program order, buckets, P2P pairing); the device they run on comes from
// platform/device_factory.h, which is the one place that chooses a platform.

#include <memory>

#include "mpi/mpi_env.h"
#include "plan/iteration_plan.h"
#include "platform/device.h"
#include "platform/device_factory.h"
#include "runner/eventrun_executor.h"
#include "runner/eventrun_program.h"

namespace evsim {

// `device` was made by makeDevice(request, world); `plan` and `program` (this rank's) must outlive
// the executor. Collective over MPI_COMM_WORLD (executors create their communicators). Throws
// CollectiveInputError (every rank alike) when the platform cannot run the plan.
std::unique_ptr<RankExecutor> makeRankExecutor(const Device& device, const DeviceRequest& request,
                                               const MpiWorld& world, const IterationPlan& plan,
                                               const RankProgram& program);

}  // namespace evsim

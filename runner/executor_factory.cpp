#include "runner/executor_factory.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "platform/cpu/cpu_device.h"
#include "runner/cuda/eventrun_cuda_executor.h"
#include "runner/eventrun_backend_p2p.h"

namespace evsim {

namespace {

std::unique_ptr<RankExecutor> makeCudaExecutor(const DeviceRequest& request, const MpiWorld& world,
                                               const IterationPlan& plan,
                                               const RankProgram& program) {
  // Every rank derives the same fused pairs from all ranks' programs (no communication needed).
  std::vector<RankProgram> programs;
  for (int r = 0; r < world.size; ++r) programs.push_back(buildRankProgram(plan, r));
  std::vector<std::vector<size_t>> fused;
  try {
    fused = fuseP2P(programs);
  } catch (const Error& e) {
    // Every rank finds the same from the same programs: one message, exit 2.
    EVSIM_THROW(CollectiveInputError,
                "--backend cuda --schedule {}: this schedule's P2P order cannot run on NCCL's "
                "rendezvous send/receive yet ({}); use --backend cpu",
                scheduleName(plan.strategy.schedule), e.what());
  }
  return makeCudaRankExecutor(plan, program,
                              CudaExecutorOptions{world.local_rank, request.seed,
                                                  request.comm_timeout_s,
                                                  fused[static_cast<size_t>(world.rank)]});
}

}  // namespace

std::unique_ptr<RankExecutor> makeRankExecutor(const Device& device, const DeviceRequest& request,
                                               const MpiWorld& world, const IterationPlan& plan,
                                               const RankProgram& program) {
  if (device.platform() == "cpu") {
    const auto& cpu = dynamic_cast<const CpuDevice&>(device);
    return std::make_unique<CpuRankExecutor>(plan, program, cpu.waitMode(), cpu.seed());
  }
  EVSIM_CHECK(device.platform() == "cuda", "no executor for platform '{}'", device.platform());
  return makeCudaExecutor(request, world, plan, program);
}

}  // namespace evsim

// eventrun's CUDA executor on a real GPU (label `gpu`; skipped without one): one rank, tiny-gpt
// 1M1P1D, one warm-up and one timed iteration. Every recorded action must take positive time and
// the compute actions, all on one stream, must follow each other without overlapping.
// Its own main: the executor's communicators need MPI (a singleton run, no mpirun).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runner/cuda/eventrun_cuda_executor.h"

namespace evsim {
namespace {

TEST(EventrunCuda, TinyGptOneRankIteration) {
  if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  Strategy s;
  parseStrategyText("1M1P1D", s);
  s.micro_batch = 2;
  s.global_batch = 4;  // m = 2
  IterationPlan plan =
      buildIterationPlan(loadModelConfig(EVSIM_CONFIG_DIR "/models/tiny-gpt.yaml"),
                         loadClusterConfig(EVSIM_CONFIG_DIR "/clusters/dgx-h100.yaml"), s);
  RankProgram program = buildRankProgram(plan, 0);
  std::unique_ptr<RankExecutor> executor = makeCudaRankExecutor(plan, program, {});
  EXPECT_NE(executor->describe().find("cuda, device 0"), std::string::npos);
  std::vector<ActionTime> times;
  executor->runIteration(times);  // warm-up
  executor->runIteration(times);
  ASSERT_EQ(times.size(), program.actions.size());
  int computes = 0;
  double last_compute_end_us = -1;
  for (size_t a = 0; a < program.actions.size(); ++a) {
    const Action& action = program.actions[a];
    if (!action.recorded()) continue;
    SCOPED_TRACE(std::string(action.name) + " #" + std::to_string(a));
    EXPECT_GT(times[a].end_us, times[a].start_us);
    if (action.kind != ActionKind::kCompute) continue;
    ++computes;
    if (last_compute_end_us >= 0) {
      EXPECT_GE(times[a].start_us, last_compute_end_us);
    }
    last_compute_end_us = times[a].end_us;
  }
  EXPECT_GT(computes, 0);
  EXPECT_GT(executor->timeErrorUs(), 0);
  EXPECT_LT(executor->timeErrorUs(), 1000);
}

}  // namespace
}  // namespace evsim

int main(int argc, char** argv) {
  // Without a GPU ctest must report the test skipped (SKIP_RETURN_CODE 77), not passed.
  if (evsim::cudaDeviceCount() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int code = RUN_ALL_TESTS();
  MPI_Finalize();
  return code;
}

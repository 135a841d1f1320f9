// The modeled iteration eventprof compares its own cost with: one iteration per strategy, in
// device-seconds, from the profile alone.

#include "profiler/modeled_cost.h"

#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "kernels/cpu/cpu_host.h"

namespace evsim {
namespace {

constexpr double kOpUs = 100;  // every event of the synthetic profile takes 100 us

ModelConfig tinyGpt() { return loadModelConfig(EVSIM_CONFIG_DIR "/models/tiny-gpt.yaml"); }
ClusterConfig cpuLocal() { return loadClusterConfig(EVSIM_CONFIG_DIR "/clusters/cpu-local.yaml"); }

Strategy strategy(int tp, int pp, int dp, int64_t global_batch) {
  return Strategy::of(tp, pp, dp, 1, global_batch);
}

// A profile holding every event of `plan`, each measured at kOpUs.
ProfileDb uniformProfile(const IterationPlan& plan) {
  ProfileDb db;
  for (const UniqueEvent& u : plan.events.events()) {
    ProfileRecord r;
    r.event = u.event;
    r.signature = u.signature;
    r.time = TimingStats{kOpUs, kOpUs, kOpUs, 0, 1};
    if (isCommunication(u.event.kind)) r.measured_group_size = u.event.placement.group_size;
    db.put(std::move(r));
  }
  return db;
}

TEST(ModeledIterationCost, OneDeviceRunsEveryOpOfEveryMicroBatchThenTheOptimizer) {
  // 1M1P1D: no communication; the iteration is m forward+backward op lists and one Adam step, all
  // on one device. m = 4.
  const Strategy s = strategy(1, 1, 1, 4);
  const IterationPlan plan = buildIterationPlan(tinyGpt(), cpuLocal(), s);
  const StagePlan& stage = plan.stages.at(0);
  const double ops = 4.0 * double(stage.forward.size() + stage.backward.size()) + 1;
  ModeledIterationCost cost = modelIterationCost(tinyGpt(), cpuLocal(), {s}, uniformProfile(plan));
  EXPECT_EQ(cost.simulated, 1u);
  EXPECT_EQ(cost.not_covered, 0u);
  EXPECT_NEAR(cost.device_s, ops * kOpUs * 1e-6, 1e-12);
}

TEST(ModeledIterationCost, SumsDeviceSecondsOverStrategiesAndSkipsUncoveredOnes) {
  // 1M1P2D: each replica runs the 1M1P1D lists on half the batch, then the gradient all-reduce
  // (one more 100 us event) before Adam; 2 devices.
  const Strategy single = strategy(1, 1, 1, 4);
  const Strategy data_parallel = strategy(1, 1, 2, 4);  // m = 2 per replica
  const IterationPlan single_plan = buildIterationPlan(tinyGpt(), cpuLocal(), single);
  const IterationPlan dp_plan = buildIterationPlan(tinyGpt(), cpuLocal(), data_parallel);
  ProfileDb db = uniformProfile(dp_plan);
  const ProfileDb single_db = uniformProfile(single_plan);
  for (const ProfileRecord& r : single_db.records()) db.put(r);
  const StagePlan& stage = dp_plan.stages.at(0);
  const double ops_single = 4.0 * double(stage.forward.size() + stage.backward.size()) + 1;
  const double ops_dp_device = 2.0 * double(stage.forward.size() + stage.backward.size()) + 2;
  ModeledIterationCost cost =
      modelIterationCost(tinyGpt(), cpuLocal(), {single, data_parallel}, db);
  EXPECT_EQ(cost.simulated, 2u);
  EXPECT_NEAR(cost.device_s, (ops_single + 2 * ops_dp_device) * kOpUs * 1e-6, 1e-12);

  // 2M1P1D needs TP all-reduces the profile lacks: skipped, not guessed.
  ModeledIterationCost partial =
      modelIterationCost(tinyGpt(), cpuLocal(), {single, strategy(2, 1, 1, 4)}, db);
  EXPECT_EQ(partial.simulated, 1u);
  EXPECT_EQ(partial.not_covered, 1u);
  EXPECT_NEAR(partial.device_s, ops_single * kOpUs * 1e-6, 1e-12);
}

TEST(CpuThreads, SplitsTheHostCoresOverItsRanks) {
  EXPECT_EQ(cpuThreadsPerRank(1, hostCores()), hostCores());
  EXPECT_EQ(cpuThreadsPerRank(hostCores(), hostCores()), 1);
  EXPECT_EQ(cpuThreadsPerRank(4 * hostCores(), hostCores()), 1);  // never 0
  // Never more threads than this process may run on, whatever the node offers the ranks.
  EXPECT_EQ(cpuThreadsPerRank(1, 1000 * hostCores()), hostCores());
}

}  // namespace
}  // namespace evsim

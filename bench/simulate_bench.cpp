// Modeler speed: plan + cost lookup + timing + metrics of one strategy (what `eventsim simulate`
// does before writing files), and how it grows with layers, micro-batches, P and D (it should not
// grow with D or M beyond placement bookkeeping).
//
//   build/bench/simulate_bench --benchmark_filter=Gpt3 [--benchmark_min_time=1]
// Results: bench/RESULTS.md.

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <fstream>

#include "bench_configs.h"
#include "plan/iteration_plan.h"
#include "modeler/cost_model.h"
#include "modeler/simulation.h"
#include "modeler/trace_writer.h"

namespace {

using namespace evsim;

using bench::dgx;
using bench::gpt3;

Simulation runOnce(const ModelConfig& model, const Strategy& s) {
  IterationPlan plan = buildIterationPlan(model, dgx(), s);
  CostModel costs(dgx(), nullptr, /*analytic_fallback=*/true);
  return simulate(std::move(plan), costs.costAll(plan.events));
}

Strategy strategy(int tp, int pp, int dp, int64_t b, int64_t B, Schedule schedule) {
  return Strategy::of(tp, pp, dp, b, B, schedule);
}

// The target: gpt3-175b, 8M16P16D (2048 GPUs), b=1, B=1536, DAPPLE, summary < 1 s.
void BM_Gpt3_8M16P16D_Summary(benchmark::State& state) {
  Strategy s = strategy(8, 16, 16, 1, 1536, Schedule::kDapple);
  for (auto _ : state) {
    Simulation sim = runOnce(gpt3(), s);
    benchmark::DoNotOptimize(sim.summary.iteration_us);
  }
}
BENCHMARK(BM_Gpt3_8M16P16D_Summary)->Unit(benchmark::kMillisecond);

// The same with Megatron's interleaved 1F1B, v = 3 chunks per device (48 chunks of 2 layers):
// 3x the tasks and P2P boundaries of the DAPPLE case.
void BM_Gpt3_8M16P16D_Interleaved_V3(benchmark::State& state) {
  Strategy s = strategy(8, 16, 16, 1, 1536, Schedule::kInterleaved);
  s.virtual_stages = 3;
  for (auto _ : state) {
    Simulation sim = runOnce(gpt3(), s);
    benchmark::DoNotOptimize(sim.summary.iteration_us);
  }
}
BENCHMARK(BM_Gpt3_8M16P16D_Interleaved_V3)->Unit(benchmark::kMillisecond);

// Growth with D at fixed M, P (GPUs = 8*16*D): should be flat.
void BM_Gpt3_ScaleD(benchmark::State& state) {
  int dp = static_cast<int>(state.range(0));
  Strategy s = strategy(8, 16, dp, 1, 96 * dp, Schedule::kDapple);
  for (auto _ : state) benchmark::DoNotOptimize(runOnce(gpt3(), s).summary.iteration_us);
}
BENCHMARK(BM_Gpt3_ScaleD)->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

// Growth with micro-batches m (B = m * D * b).
void BM_Gpt3_ScaleMicroBatches(benchmark::State& state) {
  int64_t m = state.range(0);
  Strategy s = strategy(8, 16, 16, 1, m * 16, Schedule::kDapple);
  for (auto _ : state) benchmark::DoNotOptimize(runOnce(gpt3(), s).summary.iteration_us);
}
BENCHMARK(BM_Gpt3_ScaleMicroBatches)->Arg(16)->Arg(96)->Arg(384)->Unit(benchmark::kMillisecond);

// Growth with P at fixed M, D.
void BM_Gpt3_ScaleP(benchmark::State& state) {
  int pp = static_cast<int>(state.range(0));
  Strategy s = strategy(8, pp, 16, 1, 1536, Schedule::kDapple);
  for (auto _ : state) benchmark::DoNotOptimize(runOnce(gpt3(), s).summary.iteration_us);
}
BENCHMARK(BM_Gpt3_ScaleP)->Arg(4)->Arg(16)->Arg(48)->Arg(96)->Unit(benchmark::kMillisecond);

// Issue 34 item 3: the cost per micro-batch and per stage together, (m, P) at M = 8, D = 16:
// should grow linearly in m x P (the task count), from 96 x 16 to 6,144 x 16 and 384 x 96.
void BM_Gpt3_MicroBatchesByStages(benchmark::State& state) {
  const int64_t m = state.range(0);
  const int pp = static_cast<int>(state.range(1));
  Strategy s = strategy(8, pp, 16, 1, m * 16, Schedule::kDapple);
  for (auto _ : state) benchmark::DoNotOptimize(runOnce(gpt3(), s).summary.iteration_us);
  state.counters["tasks"] = static_cast<double>(2 * m * pp);
}
BENCHMARK(BM_Gpt3_MicroBatchesByStages)
    ->Args({96, 16})
    ->Args({1536, 16})
    ->Args({6144, 16})
    ->Args({384, 24})
    ->Args({384, 48})
    ->Args({384, 96})
    ->Unit(benchmark::kMillisecond);

// Growth with the number of layers (model depth), P = 8.
void BM_ScaleLayers(benchmark::State& state) {
  ModelConfig model = gpt3();
  model.blocks.resize(static_cast<size_t>(state.range(0)), model.blocks.front());
  Strategy s = strategy(8, 8, 16, 1, 1536, Schedule::kDapple);
  for (auto _ : state) benchmark::DoNotOptimize(runOnce(model, s).summary.iteration_us);
}
BENCHMARK(BM_ScaleLayers)->Arg(24)->Arg(96)->Arg(384)->Unit(benchmark::kMillisecond);

// Writing the full 2048-rank Chrome trace (to /dev/null: the formatting cost, not the disk's).
void BM_Gpt3_FullTrace(benchmark::State& state) {
  Simulation sim = runOnce(gpt3(), strategy(8, 16, 16, 1, 1536, Schedule::kDapple));
  std::vector<int64_t> ranks = selectRanks(sim, {});
  int64_t bytes = 0;
  for (auto _ : state) {
    std::ofstream out("/dev/null");
    auto before = out.tellp();
    writeChromeTrace(sim, ranks, out);
    bytes += static_cast<int64_t>(out.tellp() - before);
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_Gpt3_FullTrace)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

// glibc hands the heap's free top back to the OS once it passes M_TRIM_THRESHOLD (128 KiB until
// freeing a large mmap'd block raises it). Each iteration frees its plan (~0.7 MB of op lists at
// 2,048 GPUs), so every iteration faulted it in again: ~170 page faults, a third of the CPU time,
// since the task graph is cached (session 10's code rebuilt it every call, and freeing its large
// vectors raised the threshold). `eventsim simulate` runs once; the bench times the simulation, not
// the allocator's trimming.
int main(int argc, char** argv) {
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

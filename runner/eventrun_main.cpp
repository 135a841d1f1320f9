// eventrun: executes one iteration of a strategy for real, several times, and writes the measured
// timeline of every rank in `eventsim simulate`'s formats (ground truth for the modeler).
//   mpirun -np K eventrun --model M --cluster C --strategy xMyPzD --micro-batch b --global-batch B
//       --schedule S [--virtual-stages v] [--recompute R] [--sequence-parallel] [--zero Z]
//       [--dp-overlap] [--iterations n] [--backend auto|cpu|cuda] [--ranks-per-node R]
//       [--comm-timeout s]
//       --trace measured.json --csv measured.csv
// main() is the composition root: flags -> plan (every rank) -> device (CPU or CUDA, chosen in
// platform/device_factory.cpp) -> rank program -> clock alignment -> the device's executor -> timed
// iterations ->
// medians gathered on rank 0 -> files. Every failure ends in one line; a rank that fails alone
// calls MPI_Abort so the others never hang.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/error.h"
#include "io/cli_checks.h"
#include "io/run_options.h"
#include "mpi/mpi_check.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_main.h"
#include "mpi/mpi_wait.h"
#include "plan/pipeline_schedule.h"
#include "platform/device_factory.h"
#include "runner/eventrun_executor.h"
#include "runner/executor_factory.h"
#include "runner/eventrun_program.h"
#include "runner/eventrun_report.h"

namespace evsim {
namespace {

// Ping-pong exchanges per rank for the clock offset; the smallest round trip of these is kept.
constexpr int kClockRounds = 50;

struct Flags {
  RunOptions run;
  int iterations = 5;
  std::string backend = "auto";
  int ranks_per_node = 0;
  std::string wait = "auto";
  double comm_timeout_s = 300;
  std::string trace;
  std::string csv;
  uint64_t seed = 1;
};

void addFlags(CLI::App& app, Flags& f) {
  f.run.addModelOptions(app);
  f.run.addStrategyOptions(app, /*strategy_required=*/true);
  app.add_option("--iterations", f.iterations,
                 "iterations to run; the first is warm-up, the report uses the median of the rest")
      ->capture_default_str();
  app.add_option("--backend", f.backend,
                 "auto (cuda when every rank sees a GPU of its own), cpu (kernels/cpu + MPI) or "
                 "cuda (kernels/cuda + NCCL, one GPU per rank)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--ranks-per-node", f.ranks_per_node,
                 "group consecutive ranks of a host into emulated nodes of this size (must match "
                 "the cluster's gpus per node)")
      ->check(kPositiveInteger);
  app.add_option("--wait", f.wait,
                 "how a rank waits for MPI: spin (MPI_Wait), sleep (MPI_Test + short sleeps, for "
                 "more ranks than cores) or auto (sleep when this host has more ranks than cores)")
      ->check(CLI::IsMember({"auto", "spin", "sleep"}))
      ->capture_default_str();
  app.add_option("--comm-timeout", f.comm_timeout_s,
                 "seconds any wait on another rank (MPI; NCCL on cuda) may last before the run "
                 "stops with a message naming it (a stalled or dead peer); it must exceed the "
                 "longest step a peer legitimately takes (one event's warm-up and repeats, one "
                 "iteration)")
      ->check(kFinitePositive)
      ->capture_default_str();
  app.add_option("--trace", f.trace, "write the measured Chrome trace (Perfetto)")->check(kFileName);
  app.add_option("--csv", f.csv, "write the measured timeline as CSV")->check(kFileName);
  app.add_option("--seed", f.seed, "seed of the kernels' random inputs")
      ->check(kUnsignedText)
      ->capture_default_str();
}

constexpr int kMaxIterations = 100000;

// Builds the plan on every rank; an input error on rank 0 stops every rank with one message.
IterationPlan loadPlan(const Flags& f, const MpiWorld& world) {
  std::string error;
  IterationPlan plan;
  try {
    if (f.iterations < 2) {
      EVSIM_THROW(InputError, "--iterations {}: must be >= 2 (the first is warm-up)", f.iterations);
    }
    // Every iteration's times stay in memory until the end: 10^9 iterations ran out of memory
    // after measuring had started (issue 33).
    if (f.iterations > kMaxIterations) {
      EVSIM_THROW(InputError,
                  "--iterations {}: at most {} (each iteration's times are kept in memory; a "
                  "median needs tens)",
                  f.iterations, kMaxIterations);
    }
    if (f.trace.empty() && f.csv.empty()) {
      EVSIM_THROW(InputError, "no output: give --trace FILE and/or --csv FILE");
    }
    const ModelConfig model = f.run.loadModel();
    const ClusterConfig cluster = f.run.loadCluster();
    const Strategy strategy = f.run.strategy(model);
    // A rank program runs its tasks one at a time on one compute stream: a fused F&B task (its
    // two micro-batches' compute and all-to-alls interleaved on two streams) has no executor.
    if (fusesTasks(strategy)) {
      EVSIM_THROW(InputError,
                  "{}: eventrun cannot run its fused forward-and-backward tasks (one "
                  "stream per rank); simulate it with eventsim",
                  strategy.moe_a2a_overlap
                      ? std::string("--overlap-moe-expert-parallel-comm")
                      : fmt::format("--schedule {}", scheduleName(strategy.schedule)));
    }
    if (strategy.moe_dispatcher == MoeDispatcher::kDeepEp) {
      EVSIM_THROW(InputError,
                  "--moe-enable-deepep: eventrun does not run DeepEP's two-hop dispatch (its "
                  "executors run NCCL collectives over the EP group); simulate it with eventsim");
    }
    // Its CP executors run one ring over the whole CP group and collectives over all of it.
    if (strategy.cp > 1 && strategy.cp_comm == CpComm::kA2aP2p) {
      EVSIM_THROW(InputError,
                  "--cp-comm-type a2a+p2p: eventrun does not run the hierarchical CP groups; "
                  "simulate it with eventsim");
    }
    // Its executors run collectives whole and the parameter all-gather after the step: the
    // userbuffers' chunked overlap and the deferred gather are the simulator's alone.
    if (strategy.tp_comm_overlap || strategy.overlap_param_gather) {
      EVSIM_THROW(InputError,
                  "{}: eventrun does not run it (no userbuffers ring exchange or deferred "
                  "parameter gather in its executors); simulate it with eventsim",
                  strategy.tp_comm_overlap ? "--tp-comm-overlap" : "--overlap-param-gather");
    }
    // Its programs walk each task's op list: ZeRO-2's queued reductions are not in it.
    if (strategy.reducesAtStep()) {
      EVSIM_THROW(InputError,
                  "--grad-reduce-sync step: eventrun does not run the queued ZeRO-2 reductions "
                  "(its programs issue a task's ops only); simulate it with eventsim");
    }
    f.run.checkTpPlacement(model, cluster, strategy);
    plan = buildIterationPlan(model, cluster, strategy);
    if (plan.strategy.gpus() != world.size) {
      EVSIM_THROW(InputError, "--strategy {}: needs {} ranks, but mpirun started {}",
                  plan.strategy.name(), plan.strategy.gpus(), world.size);
    }
    // P2P tags encode (boundary, micro-batch, direction); MPI only guarantees tags up to
    // MPI_TAG_UB, so a long pipeline with many micro-batches could exceed it.
    if (p2pTagBound(plan) - 1 > mpiTagUpperBound()) {
      EVSIM_THROW(InputError,
                  "--strategy {} with {} virtual stages and m = {}: P2P tags up to {} exceed this "
                  "MPI's MPI_TAG_UB {}; use fewer micro-batches or virtual stages",
                  plan.strategy.name(), plan.virtualStages(), plan.micro_batches,
                  p2pTagBound(plan) - 1, mpiTagUpperBound());
    }
  } catch (const InputError& e) {
    error = e.what();
  }
  std::string first = broadcastString(error, 0, MPI_COMM_WORLD);
  if (!first.empty()) EVSIM_THROW(CollectiveInputError, "{}", first);
  if (!error.empty()) EVSIM_THROW(InputError, "{}", error);  // this rank alone: MPI_Abort in main
  return plan;
}

// The run's nodes must be the cluster's: the plan's communication events name their placement.
void checkPlacement(const IterationPlan& plan, const Topology& topo, int ranks_per_node) {
  const RankLayout layout = plan.layout();
  for (int r = 0; r < topo.world_size; ++r) {
    if (topo.node_of_rank[r] != layout.node(r)) {
      EVSIM_THROW(
          CollectiveInputError,
          "--ranks-per-node {}: rank {} runs on node {} but --cluster {} places it on node {} "
          "({} gpus per node); pass --ranks-per-node {}",
          ranks_per_node, r, topo.node_of_rank[r], plan.cluster.name, layout.node(r),
          plan.cluster.gpus_per_node, plan.cluster.gpus_per_node);
    }
  }
}

int runEventrun(int argc, char** argv, const MpiWorld& world) {
  CLI::App app{"eventrun: execute a strategy for real and record every event (ground truth)"};
  app.set_version_flag("--version", std::string("eventrun ") + EVSIM_VERSION);
  Flags flags;
  addFlags(app, flags);
  if (std::optional<int> done = parseFlagsOnEveryRank(app, argc, argv, world, "eventrun"))
    return *done;
  setCommTimeout(flags.comm_timeout_s);  // before the first wait on another rank
  const IterationPlan plan = loadPlan(flags, world);
  Topology topo;
  std::string topo_error;
  try {
    topo = discoverTopology(world, flags.ranks_per_node);
  } catch (const InputError& e) {
    topo_error = e.what();
  }
  if (!topo_error.empty()) EVSIM_THROW(CollectiveInputError, "{}", topo_error);
  checkPlacement(plan, topo, flags.ranks_per_node);
  DeviceRequest request;
  request.name = flags.backend;
  request.seed = flags.seed + static_cast<uint64_t>(world.rank);
  request.comm_timeout_s = flags.comm_timeout_s;
  request.measures_events = false;
  request.wait = flags.wait;
  // Before the clocks and kernels: a platform that cannot run here fails fast.
  const std::unique_ptr<Device> device = makeDevice(request, world);
  const RankProgram program = buildRankProgram(plan, world.rank);
  const ClockOffset clock = estimateClockOffset(MPI_COMM_WORLD, kClockRounds);
  const int n = flags.iterations;
  std::vector<std::vector<ActionTime>> times(static_cast<size_t>(n));
  std::vector<double> begin_us(static_cast<size_t>(n));
  std::string executor_text;
  double time_error_us = 0;  // the executor's own bound (CUDA events to host clock)
  {
    std::unique_ptr<RankExecutor> executor = makeRankExecutor(*device, request, world, plan, program);
    executor_text = executor->describe();
    for (int i = 0; i < n; ++i) {
      {
        CommWatch watch("the barrier before an iteration");
        EVSIM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      }
      begin_us[i] = steadyNowUs() - clock.offset_us;
      executor->runIteration(times[i]);
    }
    CommWatch watch("the barrier after the last iteration");
    EVSIM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    time_error_us = executor->timeErrorUs();
  }
  // Gathering the times: every rank is done iterating, so these wait only on a stalled peer.
  auto gathering = std::make_unique<CommWatch>("gathering the measured times on rank 0");
  // Iteration starts: the earliest barrier exit over ranks, on rank 0's clock.
  std::vector<double> start_us(static_cast<size_t>(n));
  EVSIM_MPI_CHECK(
      MPI_Allreduce(begin_us.data(), start_us.data(), n, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
  std::vector<MeasuredSpan> spans = medianSpans(program, times, start_us, clock.offset_us);

  // Per-iteration span over all ranks: max(end) - min(start), for the summary line.
  std::vector<double> first_start(n, 0), last_end(n, 0);
  for (int i = 0; i < n; ++i) {
    bool any = false;
    for (size_t a = 0; a < program.actions.size(); ++a) {
      if (!program.actions[a].recorded()) continue;
      double s = times[i][a].start_us - clock.offset_us, e = times[i][a].end_us - clock.offset_us;
      first_start[i] = any ? std::min(first_start[i], s) : s;
      last_end[i] = any ? std::max(last_end[i], e) : e;
      any = true;
    }
  }
  std::vector<double> all_start(n), all_end(n);
  EVSIM_MPI_CHECK(
      MPI_Reduce(first_start.data(), all_start.data(), n, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
  EVSIM_MPI_CHECK(
      MPI_Reduce(last_end.data(), all_end.data(), n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  // Clock alignment error plus, on the GPU, the conversion of CUDA event times to the host clock.
  const double rank_error_us = clock.half_rtt_us + time_error_us;
  double residual_us = 0;
  EVSIM_MPI_CHECK(
      MPI_Reduce(&rank_error_us, &residual_us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));

  // Gather every rank's spans on rank 0.
  std::vector<double> flat;
  for (const MeasuredSpan& s : spans) {
    flat.push_back(s.start_us);
    flat.push_back(s.end_us);
  }
  const int count = static_cast<int>(flat.size());
  std::vector<int> counts(world.rank == 0 ? world.size : 0), offsets(counts.size(), 0);
  EVSIM_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = total;
    total += counts[r];
  }
  std::vector<double> all(static_cast<size_t>(total));
  EVSIM_MPI_CHECK(MPI_Gatherv(flat.data(), count, MPI_DOUBLE, all.data(), counts.data(),
                              offsets.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD));
  gathering.reset();  // writing the files below is no wait on a peer
  if (world.rank != 0) return 0;

  std::vector<RankProgram> programs;
  std::vector<std::vector<MeasuredSpan>> rank_spans(static_cast<size_t>(world.size));
  std::vector<int64_t> ranks;
  for (int r = 0; r < world.size; ++r) {
    programs.push_back(buildRankProgram(plan, r));
    EVSIM_CHECK(2 * programs.back().recordedCount() == counts[r],
                "rank {} sent {} times for {} events", r, counts[r],
                programs.back().recordedCount());
    for (int k = 0; k < counts[r]; k += 2) {
      rank_spans[r].push_back(MeasuredSpan{all[offsets[r] + k], all[offsets[r] + k + 1]});
    }
    ranks.push_back(r);
  }
  TimelineSource source = measuredTimeline(plan, programs, rank_spans);
  writeTimelineFiles(source, ranks, flags.trace, flags.csv);
  std::vector<double> iteration_ms;
  for (int i = 1; i < n; ++i) iteration_ms.push_back((all_end[i] - all_start[i]) / 1000);
  const Strategy& s = plan.strategy;
  fmt::print(
      "eventrun: {} {}{} {} b={} B={} m={} on {} ranks (backend {}): iteration {:.3f} ms "
      "(median of {}, min {:.3f}, max {:.3f}); clocks aligned to rank 0 by ping-pong, residual "
      "<= {:.2f} us (max half round trip{}){}{}\n",
      plan.model.name, s.name(), s.techniques(), scheduleName(s.schedule), s.micro_batch,
      s.global_batch, plan.micro_batches, world.size, executor_text, median(iteration_ms),
      iteration_ms.size(), *std::min_element(iteration_ms.begin(), iteration_ms.end()),
      *std::max_element(iteration_ms.begin(), iteration_ms.end()), residual_us,
      device->platform() == "cuda" ? " + CUDA event to host clock" : "",
      flags.trace.empty() ? "" : "; trace " + flags.trace,
      flags.csv.empty() ? "" : "; csv " + flags.csv);
  return 0;
}

}  // namespace
}  // namespace evsim

int main(int argc, char** argv) {
  return evsim::runMpiMain(argc, argv, "eventrun", evsim::runEventrun);
}

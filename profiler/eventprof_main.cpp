// eventprof: measures events on the cluster it runs on and writes a profile database.
//   mpirun -np 4 eventprof --events events.yaml -o profile.yaml [--backend auto|cpu|cuda]
// main() is the composition root: flags -> event list (rank 0) -> topology -> device -> session.
// Every failure ends in one line; a rank that fails alone calls MPI_Abort so the others never hang.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/strings.h"
#include "io/cli_checks.h"
#include "io/run_options.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_main.h"
#include "mpi/mpi_wait.h"
#include "platform/device_factory.h"
#include "profiler/event_source.h"
#include "profiler/overlap_probe.h"
#include "profiler/profile_session.h"
#include "profiler/sustained_gemm.h"

namespace evsim {
namespace {

struct Flags {
  std::string events_file;
  RunOptions run;  // --model, --cluster, --strategy, --micro-batch, ... as in `eventsim events`
  int64_t gpus = 0;
  std::string micro_batches = "1,2,4,8";
  std::string output;
  std::string backend = "auto";
  int warmup = 5;
  int repeats = 20;
  bool resume = false;
  int ranks_per_node = 0;
  bool intra_node_only = false;
  double comm_timeout_s = 300;
  uint64_t seed = 1;
  std::string compute_timer = "cupti";
  bool overlap = false;
  double sustained_gemm_s = 0;  // > 0: the sustained-clock measurement instead of events
};

void addFlags(CLI::App& app, Flags& f) {
  app.add_option("--events", f.events_file,
                 "YAML events file, e.g. from `eventsim events -o FILE` or `eventsim search ... "
                 "--write-events FILE`: `eventsim_events: 1` (the format version, required), then "
                 "`events:`, a list of {signature: \"gemm m=.. n=.. k=.. layout=nt dtype=bf16\", "
                 "count: N} (docs/PROFILER.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--model", f.run.model, "with --strategy or --gpus: model YAML or bundled name");
  app.add_option("--cluster", f.run.cluster,
                 "with --strategy or --gpus: the target cluster YAML or bundled name");
  f.run.addStrategyOptions(app, /*strategy_required=*/false);
  app.add_option("--gpus", f.gpus,
                 "instead of one strategy: the union of the events of every valid strategy for N "
                 "GPUs (needs --global-batch)")
      ->check(kGpuCount);
  app.add_option("--micro-batches", f.micro_batches, "micro-batch sizes for --gpus")
      ->capture_default_str();
  app.add_option("-o,--output", f.output,
                 "profile database to write: YAML, or binary CBOR when the name ends in .cbor")
      ->required()
      ->check(kFileName);
  app.add_option("--backend", f.backend, "auto (cuda when every rank sees a GPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "untimed runs before each event's repetitions")
      ->check(kNonNegativeInteger)
      ->capture_default_str();
  app.add_option("--repeats", f.repeats, "timed repetitions per event")
      ->check(kPositiveInteger)
      ->capture_default_str();
  app.add_flag("--resume", f.resume,
               "keep the events already in the output profile (same hardware only) and measure "
               "the rest");
  app.add_option("--ranks-per-node", f.ranks_per_node,
                 "group consecutive ranks of a host into emulated nodes of this size")
      ->check(kPositiveInteger);
  app.add_flag("--intra-node-only", f.intra_node_only,
               "on a single node, skip inter-node events (listed as not measured) instead of "
               "stopping");
  app.add_option("--comm-timeout", f.comm_timeout_s,
                 "seconds any wait on another rank (MPI; NCCL on cuda) may last before the run "
                 "stops with a message naming it (a stalled or dead peer); it must exceed the "
                 "longest step a peer legitimately takes (one event's warm-up and repeats, one "
                 "iteration)")
      ->check(kFinitePositive)
      ->capture_default_str();
  app.add_option("--seed", f.seed, "seed of the kernels' random inputs")
      ->check(kUnsignedText)
      ->capture_default_str();
  app.add_option("--compute-timer", f.compute_timer,
                 "cuda: cupti (kernel spans) or cuda-events (events around each repetition, "
                 "launch gaps included; to cross-check CUPTI)")
      ->check(CLI::IsMember({"cupti", "cuda-events"}))
      ->capture_default_str();
  app.add_option("--sustained-gemm-s", f.sustained_gemm_s,
                 "instead of events: time one large GEMM as a short burst, then back to back for "
                 "this many seconds (60 on a GPU), and write the sustained/short ratio to -o for "
                 "`eventsim calibrate --sustained-gemm` (the sustained clock; docs/PROFILER.md)")
      ->check(kFinitePositive);
  app.add_flag("--overlap", f.overlap,
               "instead of events: time a GEMM and a memory-bound kernel alone and beside an "
               "all-reduce (inside a node; across nodes when the ranks span two or more), for "
               "`eventsim calibrate --overlap` (the overlap slowdown; docs/PROFILER.md)");
}

// What to profile: the events, and the strategies they come from (none for an events file), so
// the summary can model one iteration of them.
struct ProfileRequest {
  std::vector<Event> events;
  std::optional<ModelConfig> model;
  std::optional<ClusterConfig> cluster;
  std::vector<Strategy> strategies;
};

// The events to profile, from exactly one of --events, --strategy (or --tp/--pp/--dp), --gpus.
ProfileRequest wantedEvents(const Flags& f) {
  const bool strategy =
      !f.run.strategy_text.empty() || f.run.tp > 0 || f.run.pp > 0 || f.run.dp > 0;
  const int sources = int(!f.events_file.empty()) + int(strategy) + int(f.gpus > 0);
  if (sources != 1) {
    EVSIM_THROW(InputError,
                "{}: give exactly one of --events FILE, --strategy xMxPxD (with --model, "
                "--cluster, --micro-batch, --global-batch) or --gpus N (with --model, "
                "--cluster, --global-batch)",
                sources == 0 ? "no events to profile" : "more than one event source");
  }
  ProfileRequest request;
  if (!f.events_file.empty()) {
    request.events = eventsFromFile(f.events_file);
    return request;
  }
  if (f.run.model.empty() || f.run.cluster.empty()) {
    EVSIM_THROW(InputError, "{} needs --model and --cluster", strategy ? "--strategy" : "--gpus");
  }
  const ModelConfig& model = request.model.emplace(f.run.loadModel());
  const ClusterConfig& cluster = request.cluster.emplace(f.run.loadCluster());
  if (strategy) {
    request.strategies.push_back(f.run.strategy(model));
    f.run.checkTpPlacement(model, cluster, request.strategies.back());
    request.events = eventsForStrategy(model, cluster, request.strategies.back());
    return request;
  }
  const auto [base, space] = f.run.unionSpace(f.gpus, f.micro_batches);
  request.events = eventsForGpus(model, cluster, base, space);
  for (const Candidate& c : enumerateCandidates(model, cluster, base, space)) {
    if (!c.violation) request.strategies.push_back(c.strategy);
  }
  return request;
}

// One modeled iteration of the strategies profiled, from the profile just written. The profile is
// complete on disk by now, so a failure here is reported and costs nothing measured.
void addModeledCost(const ProfileRequest& request, const std::string& profile_path,
                    ProfileSummary& summary) {
  if (request.strategies.empty()) {
    fmt::print(
        stderr,
        "[eventprof] events from a file: the strategies are unknown, so profiling cost is "
        "not compared with a modeled iteration (profile with --strategy or --gpus for that)\n");
    return;
  }
  try {
    summary.modeled = modelIterationCost(*request.model, *request.cluster, request.strategies,
                                         ProfileDb::load(profile_path));
  } catch (const std::exception& e) {
    fmt::print(stderr, "[eventprof] could not model an iteration from {}: {}\n", profile_path,
               e.what());
  }
}

// Returns the process exit code. Throws on errors (see main).
int runEventprof(int argc, char** argv, const MpiWorld& world) {
  CLI::App app{"eventprof: profile the events of distributed transformer training"};
  app.set_version_flag("--version", std::string("eventprof ") + EVSIM_VERSION);
  Flags flags;
  addFlags(app, flags);
  if (std::optional<int> done = parseFlagsOnEveryRank(app, argc, argv, world, "eventprof"))
    return *done;
  setCommTimeout(flags.comm_timeout_s);  // before the first wait on another rank
  ProfileRequest wanted;
  std::string load_error;
  const bool own_kernels = flags.overlap || flags.sustained_gemm_s > 0;
  if (world.rank == 0 && flags.overlap && flags.sustained_gemm_s > 0) {
    load_error = "--overlap and --sustained-gemm-s are separate measurements: give one";
  } else if (world.rank == 0 && own_kernels) {
    if (!flags.events_file.empty() || !flags.run.strategy_text.empty() || flags.run.tp > 0 ||
        flags.gpus > 0 || flags.resume) {
      load_error = fmt::format(
          "{} measures its own kernels: give no --events, --strategy, --gpus or --resume with it",
          flags.overlap ? "--overlap" : "--sustained-gemm-s");
    }
  } else if (world.rank == 0) {
    try {
      wanted = wantedEvents(flags);
    } catch (const InputError& e) {
      load_error = e.what();
    }
  }
  load_error = broadcastString(load_error, 0, MPI_COMM_WORLD);
  if (!load_error.empty()) EVSIM_THROW(CollectiveInputError, "{}", load_error);

  Topology topo;
  std::string topo_error;
  try {
    topo = discoverTopology(world, flags.ranks_per_node);
  } catch (const InputError& e) {
    topo_error = e.what();  // every rank has the same topology, so the same error
  }
  if (!topo_error.empty()) EVSIM_THROW(CollectiveInputError, "{}", topo_error);

  DeviceRequest request;
  request.name = flags.backend;
  request.seed = flags.seed + static_cast<uint64_t>(world.rank);
  request.comm_timeout_s = flags.comm_timeout_s;
  request.compute_timer = flags.compute_timer;
  std::unique_ptr<Device> device = makeDevice(request, world);
  if (world.rank == 0) {
    fmt::print(stderr,
               "[eventprof] backend {} on {} rank(s), {} node(s){}: {}; {} core(s) for the {} "
               "rank(s) of this host\n",
               device->platform(), world.size, topo.nodes(), topo.emulated ? " (emulated)" : "",
               fmt::join(topo.node_names, ", "), world.host_cores, world.local_size);
  }

  ProfileOptions options;
  options.output_path = flags.output;
  options.warmup = flags.warmup;
  options.repeats = flags.repeats;
  options.resume = flags.resume;
  options.intra_node_only = flags.intra_node_only;
  if (flags.sustained_gemm_s > 0) {
    // Rank 0's device alone: the clock is a property of one GPU (every rank of a node has one).
    if (world.rank == 0) {
      const SustainedGemmRecord record =
          measureSustainedGemm(*device, flags.sustained_gemm_s, flags.repeats, stderr);
      saveSustainedGemm(record, flags.output);
      fmt::print(stderr,
                 "[eventprof] wrote {}: {} burst {:.1f} us, last quarter of {:.0f} s {:.1f} us "
                 "(sustained/short {:.3f})\n",
                 flags.output, record.gemm, record.short_us, record.elapsed_s, record.sustained_us,
                 record.sustainedRatio());
    }
    return 0;
  }
  ProfileSession session(world, topo, *device, options);
  if (flags.overlap) {
    const int records = measureOverlap(world, topo, *device, options, session.collectMetadata());
    if (world.rank == 0) {
      fmt::print(stderr, "[eventprof] wrote {} ({} overlap records)\n", flags.output, records);
    }
    return 0;
  }
  ProfileSummary summary = session.run(wanted.events);
  if (world.rank == 0) {
    addModeledCost(wanted, flags.output, summary);
    printSummary(stderr, summary, flags.output, world.size);
    if (std::string note = device->timingNote(); !note.empty()) {
      fmt::print(stderr, "[eventprof] rank 0: {}\n", note);
    }
  }
  return 0;
}

}  // namespace
}  // namespace evsim

int main(int argc, char** argv) {
  return evsim::runMpiMain(argc, argv, "eventprof", evsim::runEventprof);
}

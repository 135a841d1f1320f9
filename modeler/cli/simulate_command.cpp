#include "modeler/cli/simulate_command.h"

#include <fmt/format.h>

#include <iostream>
#include <utility>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/strings.h"
#include "io/cli_checks.h"
#include "modeler/chakra_export.h"
#include "modeler/cli/eventprof_hint.h"
#include "modeler/cli/plan_comparison.h"
#include "modeler/cli/train_run_flags.h"
#include "modeler/link_usage.h"
#include "modeler/memory_model.h"
#include "modeler/output_estimate.h"
#include "modeler/simulation.h"
#include "modeler/stragglers.h"
#include "modeler/summary_report.h"
#include "modeler/time_to_train.h"
#include "modeler/trace_writer.h"
#include "modeler/variability.h"

namespace evsim {

void CostSourceOptions::add(CLI::App& app) {
  app.add_option("--profile", profile, "profile database written by eventprof");
  app.add_option("--fallback", fallback,
                 "events the profile lacks: analytic (the device model) or none (strict: a "
                 "missing event is an error); default: analytic without --profile, none with it")
      ->check(CLI::IsMember({"analytic", "none"}));
  app.add_option("--host-op-us", host_op_us,
                 "host time to issue one op (us), instead of the device file's host_op_us: e.g. "
                 "the executor's own, as eventprof --compute-timer cuda-events reports it (Transformer "
                 "Engine's ring-loop ops keep the device file's host_call_us per call)")
      ->check(kFiniteNonNegative);
}

void CostSourceOptions::applyHostTime(ClusterConfig& cluster) const {
  if (!host_op_us) return;
  if (!cluster.device.model) {
    EVSIM_THROW(InputError,
                "--host-op-us {}: cluster {} has an inline device without a device model (give a "
                "device file, configs/devices/)",
                *host_op_us, cluster.name);
  }
  cluster.device.model->host_op_us = {*host_op_us, "--host-op-us"};
}

std::optional<ProfileDb> CostSourceOptions::loadProfile() const {
  if (profile.empty() && !analytic()) {
    EVSIM_THROW(InputError,
                "--fallback none without --profile: no cost source (give --profile DB from "
                "eventprof, or leave --fallback out to use the cluster's device model)");
  }
  if (profile.empty()) return std::nullopt;
  return ProfileDb::load(profile);
}

std::string eventprofHint(const RunOptions& run, const Strategy& strategy) {
  return eventprofCommand(fmt::format(
      "{} -o profile.yaml", run.commandLine(strategy, RunOptions::CommandFor::kEventprof)));
}

namespace {

// Above this many ranks a trace or CSV holds the first pipeline unless --ranks says otherwise.
constexpr int64_t kAllRanksTraceLimit = 256;

struct SimulateArgs {
  RunOptions run;
  CostSourceOptions costs;
  bool json = false;
  std::string trace;
  std::string csv;
  std::string link_csv;  // --link-csv: per-link load over the iteration (link_usage.h)
  std::string chakra;    // --chakra DIR: one Chakra execution trace per rank (chakra_export.h)
  std::string chakra_prefix = "et";
  std::string ranks;
  std::string slow_ranks;  // --slow-ranks 17:1.2,node3:1.1
  double jitter = 0;       // --jitter: per-op slowdown scale (TaskJitter)
  uint64_t seed = 1;
  int iterations = 0;                            // 0: one, or 100 with --jitter
  double max_output_gib = kDefaultMaxOutputGiB;  // --max-output-gib: one trace / CSV at most
  double memory_headroom = kDefaultMemoryHeadroom;
  TrainRunFlags train_run;  // --train-tokens 15T [--gpu-hour-cost]: time and GPU-hours of the run
  JsonSink sink;

  bool variability() const { return !slow_ranks.empty() || jitter > 0 || iterations > 0; }
};

// The flags that write or sample one plan's timeline: refused when several plans are compared.
void refuseSinglePlanFlags(const SimulateArgs& args) {
  const std::vector<std::pair<const char*, bool>> single = {
      {"--trace", !args.trace.empty()},
      {"--csv", !args.csv.empty()},
      {"--link-csv", !args.link_csv.empty()},
      {"--ranks", !args.ranks.empty()},
      {"--chakra", !args.chakra.empty()},
      {"--slow-ranks", !args.slow_ranks.empty()},
      {"--jitter", args.jitter > 0},
      {"--iterations", args.iterations > 0},
      {"--train-tokens", args.train_run.given()}};
  for (const auto& [flag, given] : single) {
    if (given) {
      EVSIM_THROW(InputError,
                  "{} with several --strategy: it is about one plan's timeline (simulate each "
                  "plan on its own for it)",
                  flag);
    }
  }
}

// simulate --strategy A --strategy B ...: each plan with the same flags, side by side.
void runComparison(const SimulateArgs& args, const ModelConfig& model,
                   const ClusterConfig& cluster) {
  refuseSinglePlanFlags(args);
  std::optional<ProfileDb> db = args.costs.loadProfile();
  CostModel cost_model(cluster, db ? &*db : nullptr, args.costs.analytic());
  std::vector<ComparedPlan> plans;
  for (const Strategy& strategy : args.run.strategies(model)) {
    args.run.checkTpPlacement(model, cluster, strategy);
    IterationPlan plan = buildIterationPlan(model, cluster, strategy);
    std::vector<EventCost> costs = withEventprofHint(
        eventprofHint(args.run, strategy), [&] { return cost_model.costAll(plan.events); });
    Simulation sim = simulate(std::move(plan), std::move(costs));
    const LinkUsage links = linkUsage(sim, LinkDetail::kTotals);  // for the summary only
    plans.push_back({fmt::format("{} b={} {}{}", strategy.name(), strategy.micro_batch,
                                 scheduleName(strategy.schedule), strategy.techniques()),
                     summaryJson(sim, args.memory_headroom, &links)});
  }
  if (args.sink) {
    args.sink(comparisonJson(plans));
  } else if (args.json) {
    std::cout << comparisonJson(plans).dump(2) << "\n";
  } else {
    fmt::print("{} on {}: {} plans\n", model.name, cluster.name, plans.size());
    std::cout << comparisonText(plans);
  }
}

void runSimulate(const SimulateArgs& args) {
  args.run.acceptMegatronExtras();
  // A rank selection with nothing to write was parsed and dropped without a word.
  if (!args.ranks.empty() && args.trace.empty() && args.csv.empty()) {
    EVSIM_THROW(InputError,
                "--ranks {}: chooses the ranks --trace and --csv write: give one of them",
                clipped(args.ranks));
  }

  ModelConfig model = args.run.loadModel();
  ClusterConfig cluster = args.run.loadCluster();
  if (const std::string note = assumedNcclArchNote(cluster); !note.empty()) {
    fmt::print(stderr, "eventsim: note: {}\n", note);
  }
  args.costs.applyHostTime(cluster);
  if (!args.run.more_strategy_texts.empty()) {
    runComparison(args, model, cluster);
    return;
  }
  Strategy strategy = args.run.strategy(model);
  args.run.checkTpPlacement(model, cluster, strategy);
  const std::optional<double> train_tokens = args.train_run.tokens();
  std::optional<ProfileDb> db = args.costs.loadProfile();
  IterationPlan plan = buildIterationPlan(model, cluster, strategy);
  CostModel cost_model(cluster, db ? &*db : nullptr, args.costs.analytic());
  std::vector<EventCost> costs = withEventprofHint(eventprofHint(args.run, strategy),
                                                   [&] { return cost_model.costAll(plan.events); });
  std::vector<std::vector<double>> slowdown;
  if (!args.slow_ranks.empty()) {
    slowdown = splitSlowReplicas(
        plan, parseSlowRanks(args.slow_ranks, strategy.gpus(), cluster.gpus_per_node));
  }
  Simulation sim = simulate(std::move(plan), std::move(costs), std::move(slowdown));
  std::optional<IterationDistribution> spread;
  if (args.variability()) {
    const int n = args.iterations > 0 ? args.iterations : (args.jitter > 0 ? 100 : 1);
    // Estimated first (op samples, deterministic): refused when it would take far too long.
    if (const std::string note = checkSamplingWork(sim, n); !note.empty()) {
      fmt::print(stderr, "eventsim: note: {}\n", note);
    }
    spread = sampleIterations(sim, args.jitter, args.seed, n);
  }

  std::vector<int64_t> selection;
  std::string note;
  const bool writing = !args.trace.empty() || !args.csv.empty();
  if (args.ranks == "all") {
    // every rank: selectRanks' default
  } else if (!args.ranks.empty()) {
    selection = parseIntList(args.ranks, "--ranks");
  } else if (writing && sim.plan.strategy.gpus() > kAllRanksTraceLimit) {
    // Thousands of ranks make gigabytes nobody opens; one pipeline shows every stage's timeline.
    selection = firstPipelineRanks(sim.plan);
    note = fmt::format(" of {}: the first pipeline (DP replica 0); --ranks all writes every one",
                       sim.plan.strategy.gpus());
  }
  std::vector<int64_t> ranks = selectRanks(sim, selection);
  // The loads over time only for the outputs that draw them (the trace's link counters, the link
  // CSV); the summary reads each link's capacity and bytes.
  const LinkUsage links = linkUsage(
      sim, args.trace.empty() && args.link_csv.empty() ? LinkDetail::kTotals
                                                       : LinkDetail::kSegments);
  TimelineSource timeline = simulationTimeline(sim);
  timeline.links = &links;
  if (!args.link_csv.empty()) {
    AtomicFileWriter file(args.link_csv);
    writeLinkCsv(links, file.stream());
    file.commit();
  }
  // Every rank: each simulated timeline once, with the ranks it stands for (18.2 GB at 2,048 GPUs
  // when written rank by rank; issue 34, item 4). A list: those ranks, each on its own.
  const TimelineGrouping grouping =
      args.ranks == "all" ? TimelineGrouping::kPerTimeline : TimelineGrouping::kPerRank;
  const std::vector<RankGroup> groups =
      writing ? groupRanks(timeline, ranks, grouping) : std::vector<RankGroup>{};
  if (writing) {
    std::vector<int64_t> written;  // the ranks whose events are written
    for (const RankGroup& g : groups) written.push_back(g.ranks[0]);
    checkTimelineOutput(estimateTimelineOutput(sim, timeline, written), args.trace, args.csv,
                        static_cast<int64_t>(written.size()), args.max_output_gib);
  }
  writeTimelineFiles(timeline, ranks, args.trace, args.csv, grouping);
  std::optional<ChakraOutput> chakra;
  if (!args.chakra.empty()) {
    chakra = writeChakraTraces(sim, args.chakra, args.chakra_prefix, args.max_output_gib);
  }
  nlohmann::json summary =
      args.sink || args.json ? summaryJson(sim, args.memory_headroom, &links) : nlohmann::json();
  if (spread && (args.sink || args.json)) summary["variability"] = variabilityJson(sim, *spread);
  std::optional<TimeToTrain> run_time;
  if (train_tokens) {
    const Strategy& st = sim.plan.strategy;
    run_time = timeToTrain(*train_tokens, st.global_batch * sim.plan.model.seq_length,
                           sim.summary.iteration_us, st.gpus(), args.train_run.gpu_hour_cost);
    if (args.sink || args.json) summary["time_to_train"] = timeToTrainJson(*run_time);
  }
  if (writing) {
    // Which ranks the trace / CSV hold (the first pipeline by default above the limit).
    summary["timeline_ranks"] = ranks.size();
    summary["timeline_processes"] = groups.size();  // fewer with --ranks all: one per timeline
    summary["timeline_first_pipeline_only"] = !note.empty();
  }
  if (chakra) {
    summary["chakra"] = {{"dir", args.chakra},
                         {"files", chakra->files},
                         {"nodes", chakra->nodes},
                         {"comm_groups", chakra->groups},
                         {"comm_group_file", chakra->comm_group_path},
                         {"stale_files_removed", chakra->stale_removed}};
  }
  if (args.sink) {
    args.sink(summary);
  } else if (args.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    std::cout << summaryText(sim, args.memory_headroom, &links);
    if (run_time) std::cout << timeToTrainText(*run_time);
    if (spread) std::cout << variabilityText(sim, *spread);
    if (grouping == TimelineGrouping::kPerTimeline) {
      note = fmt::format(" as {} simulated timelines, each listing its ranks", groups.size());
    }
    if (!args.trace.empty())
      fmt::print("\nChrome trace ({} ranks{}): {}\n", ranks.size(), note, args.trace);
    if (!args.csv.empty())
      fmt::print("CSV timeline ({} ranks{}): {}\n", ranks.size(), note, args.csv);
    if (!args.link_csv.empty()) fmt::print("Link loads (CSV): {}\n", args.link_csv);
    if (chakra) {
      fmt::print(
          "Chakra traces (ASTRA-sim): {} files {}/{}.<rank>.et, {} nodes; comm groups ({}): {}\n",
          chakra->files, args.chakra, args.chakra_prefix, chakra->nodes, chakra->groups,
          chakra->comm_group_path);
      if (chakra->stale_removed > 0) {
        fmt::print("  removed {} rank file(s) of an earlier, larger run from {}\n",
                   chakra->stale_removed, args.chakra);
      }
    }
  }
}

}  // namespace

void registerSimulateCommand(CLI::App& app, JsonSink sink) {
  auto args = std::make_shared<SimulateArgs>();
  args->sink = std::move(sink);
  CLI::App* cmd = app.add_subcommand("simulate", "simulate one iteration of a strategy");
  args->run.addModelOptions(*cmd);
  args->run.addMegatronExtras(*cmd);
  args->run.addStrategyOptions(*cmd, /*strategy_required=*/true);
  args->run.addGpusOption(*cmd);
  args->run.addOverlapSlowdownOption(*cmd);
  args->costs.add(*cmd);
  cmd->add_flag("--json", args->json, "print the summary as JSON");
  cmd->add_option("--trace", args->trace,
                  "write a Chrome trace (Perfetto) of the timelines; gzip-compressed when the "
                  "name ends in .gz")
      ->check(kFileName);
  cmd->add_option("--csv", args->csv, "write the timelines as CSV")->check(kFileName);
  cmd->add_option("--link-csv", args->link_csv,
                  "write each link's load over the iteration as CSV (resource, capacity_gb_s, "
                  "start_us, end_us, bytes, utilization)")
      ->check(kFileName);
  CLI::Option* chakra = cmd->add_option(
      "--chakra", args->chakra,
      "write Chakra execution traces for ASTRA-sim into this directory: one file per "
      "rank (<prefix>.<rank>.et) and <prefix>.comm_group.json");
  cmd->add_option("--chakra-prefix", args->chakra_prefix,
                  "the file prefix of the --chakra traces (ASTRA-sim's workload path is "
                  "DIR/<prefix>)")
      ->capture_default_str()
      ->needs(chakra);  // else dropped without a word
  cmd->add_option("--max-output-gib", args->max_output_gib,
                  "refuse a --trace, --csv or --chakra estimated larger than this (GiB, "
                  "uncompressed)")
      ->check(kFinitePositive)
      ->capture_default_str();
  cmd->add_option("--ranks,--trace-ranks", args->ranks,
                  fmt::format("ranks to write, e.g. 0-15,1024, or all (each simulated timeline "
                              "once, listing its ranks; default: every rank on its own up to {} "
                              "ranks, the first pipeline above)",
                              kAllRanksTraceLimit));
  cmd->add_option(
      "--slow-ranks", args->slow_ranks,
      "stragglers: RANK:FACTOR or nodeN:FACTOR, comma-separated (e.g. 17:1.2,node3:1.1): "
      "that rank's (node's) compute runs FACTOR times longer");
  CLI::Option* jitter =
      cmd->add_option("--jitter", args->jitter,
                      "per-op random slowdown: each compute op takes t (1 + J |z|), z ~ N(0,1); "
                      "reports the iteration time distribution over --iterations")
          ->check(finiteInRange(0.0, 10.0));
  cmd->add_option("--memory-headroom", args->memory_headroom,
                  "share of device memory kept free beyond what the memory model counts "
                  "(as search's)")
      ->check(finiteInRange(0.0, 0.99))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the --jitter draws (default 1)")
      ->check(kUnsignedText)
      ->needs(jitter);  // nothing else draws: without --jitter it was dropped without a word
  cmd->add_option("--iterations", args->iterations,
                  "iterations sampled for the distribution (default 100 with --jitter)")
      ->check(CLI::Range(1, 100000));
  args->train_run.addTo(*cmd,
                        "tokens of the whole run (e.g. 15T, 300B): prints iterations, days and "
                        "GPU-hours");
  cmd->callback([args] { runSimulate(*args); });
}

}  // namespace evsim

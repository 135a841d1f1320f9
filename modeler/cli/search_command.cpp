#include "modeler/cli/search_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/strings.h"
#include "common/units.h"
#include "events/event_file.h"
#include "io/cli_checks.h"
#include "io/profile_db.h"
#include "io/run_options.h"
#include "modeler/cli/search_args.h"
#include "modeler/cli/search_output.h"
#include "modeler/cli/simulate_command.h"
#include "modeler/fit_advice.h"
#include "modeler/json_schema.h"
#include "modeler/pruned_search.h"
#include "modeler/search.h"
#include "modeler/simulation.h"
#include "modeler/summary_report.h"
#include "modeler/time_to_train.h"
#include "plan/optimizer_step.h"
#include "plan/strategy_space.h"

namespace evsim {

namespace {

// The techniques of a candidate for the table: "v3 rc=sel sp z1", "-" when none.
std::string shortTechniques(const Strategy& s) {
  const std::string text = s.techniques(Strategy::TechniqueStyle::kShort);
  return text.empty() ? "-" : text.substr(1);
}

double gib(int64_t bytes) { return static_cast<double>(bytes) / kBytesPerGiB; }

// The peaks each candidate's "mfu" is against (the first) and, for FP8 models, the bf16 one.
nlohmann::json mfuPeaksJson(const ModelConfig& model, const ClusterConfig& cluster) {
  nlohmann::json peaks = nlohmann::json::array();
  for (const MfuFigure& f : mfuFigures(cluster.device, model, 0)) {
    peaks.push_back({{"dtype", dtypeName(f.dtype)}, {"peak_tflops", f.peak_tflops}});
  }
  return peaks;
}

// --train-tokens: the whole run at this candidate's iteration time (ok candidates only).
std::optional<TimeToTrain> runTime(const SearchArgs& args, const ModelConfig& model,
                                   const CandidateResult& r) {
  if (!args.train_run.given() || r.status != CandidateStatus::kOk) return std::nullopt;
  return timeToTrain(*args.train_run.tokens(), args.run.global_batch * model.seq_length,
                     r.iteration_us, args.gpus, args.train_run.gpu_hour_cost);
}

// One row of the JSON's "candidates", with its time to train under --train-tokens.
nlohmann::json rowJson(const SearchArgs& args, const ModelConfig& model, const SearchReport& report,
                       const CandidateResult& r) {
  nlohmann::json j = candidateJson(r, report);
  if (std::optional<TimeToTrain> t = runTime(args, model, r))
    j["time_to_train"] = timeToTrainJson(*t);
  return j;
}

// The report as JSON; its "candidates" empty unless `with_candidates` (printJson streams them).
nlohmann::json reportJson(const SearchArgs& args, const ModelConfig& model,
                          const ClusterConfig& cluster, const SearchReport& report,
                          const std::optional<FitAdvice>& advice, bool with_candidates) {
  nlohmann::json candidates = nlohmann::json::array();
  if (with_candidates) {
    report.candidates.forEach([&](const CandidateResult& r) {
      candidates.push_back(rowJson(args, model, report, r));
      return true;
    });
  }
  const CandidateResult* best = report.best();
  return {{"schema_version", kJsonSchemaVersion},
          {"model", model.name},
          {"cluster", cluster.name},
          {"device", cluster.device.name},
          {"gpus", args.gpus},
          {"global_batch", args.run.global_batch},
          {"device_memory_bytes", report.capacity_bytes},
          {"usable_memory_bytes", report.usable_bytes},
          {"memory_headroom", report.headroom},
          {"mfu_peaks", mfuPeaksJson(model, cluster)},
          {"counts", countsJson(report)},
          {"best", best ? nlohmann::json(best->strategy.name()) : nlohmann::json()},
          {"simulate_command",
           best ? nlohmann::json(simulateCommand(args, best->strategy)) : nlohmann::json()},
          {"closest_oom",
           report.closest_oom ? candidateJson(*report.closest_oom, report) : nlohmann::json()},
          {"fit_advice", adviceJson(advice)},
          {"candidates", candidates}};
}

// --json on stdout: what reportJson(...).dump(2) prints, byte for byte, with the candidates
// streamed into their place one at a time, so that they are never all in memory.
void printJson(const SearchArgs& args, const ModelConfig& model, const ClusterConfig& cluster,
               const SearchReport& report, const std::optional<FitAdvice>& advice,
               std::ostream& out) {
  nlohmann::json j = reportJson(args, model, cluster, report, advice, /*with_candidates=*/false);
  const std::string placeholder = "\"@candidates@\"";
  j["candidates"] = "@candidates@";
  const std::string text = j.dump(2);
  const size_t at = text.find(placeholder);
  out << text.substr(0, at);
  if (report.candidates.empty()) {
    out << "[]";
  } else {
    // dump(2) puts the array's elements 4 spaces in ("candidates" is a member of the top object).
    out << "[\n";
    bool first = true;
    report.candidates.forEach([&](const CandidateResult& r) {
      std::string row = rowJson(args, model, report, r).dump(2);
      if (!first) out << ",\n";
      first = false;
      out << "    ";
      for (char c : row) {
        out << c;
        if (c == '\n') out << "    ";
      }
      return true;
    });
    out << "\n  ]";
  }
  out << text.substr(at + placeholder.size()) << "\n";
}

void printRowHeader() {
  fmt::print(
      "{:>4}  {:<10} {:>3}  {:<11} {:<24} {:>11} {:>11} {:>8} {:>6} {:>7} {:>7} {:>10} {:>10}  "
      "{:<11} {}\n",
      "rank", "strategy", "b", "schedule", "techniques", "iter (ms)", "tokens/s", "TFLOP/s", "MFU",
      "vs best", "bubble", "peak GiB", "margin GiB", "m/d/e %", "status");
}

// "ok", or "ok (same timeline: gpipe; dapple rc=sel)" for a row that stands for equivalent plans.
std::string okStatus(const CandidateResult& r) {
  if (r.equivalents.empty()) return "ok";
  return fmt::format("ok (same timeline: {})", fmt::join(r.equivalents, "; "));
}

void printOkRow(const CandidateResult& r, const SearchReport& report) {
  const Strategy& s = r.strategy;
  fmt::print(
      "{:>4}  {:<10} {:>3}  {:<11} {:<24} {:>11.3f} {:>11.0f} {:>8.1f} {:>5.1f}% {:>6.2f}x "
      "{:>6.1f}% {:>10.2f} {:>10.2f}  {:<11} {}\n",
      r.rank, s.name(), s.micro_batch, scheduleName(s.schedule), shortTechniques(s),
      r.iteration_us / kUsPerMs, r.samples_per_s * static_cast<double>(report.tokens_per_sample),
      r.model_tflops_per_gpu, 100 * r.mfu, report.timeVsBest(r), 100 * r.bubble_fraction,
      gib(r.peak_memory_bytes), gib(report.usable_bytes - r.peak_memory_bytes), provenanceText(r),
      okStatus(r));
}

void printOomRow(const CandidateResult& r, const SearchReport& report) {
  const Strategy& s = r.strategy;
  fmt::print(
      "{:>4}  {:<10} {:>3}  {:<11} {:<24} {:>11} {:>11} {:>8} {:>6} {:>7} {:>7} {:>10.2f} "
      "{:>10.2f}  {:<11} OOM (stage {})\n",
      "-", s.name(), s.micro_batch, scheduleName(s.schedule), shortTechniques(s), "-", "-", "-",
      "-", "-", "-", gib(r.peak_memory_bytes), gib(report.usable_bytes - r.peak_memory_bytes), "-",
      r.peak_memory_stage);
}

std::string candidateText(const Strategy& s) {
  return fmt::format("{} b={} {}{}", s.name(), s.micro_batch, scheduleName(s.schedule),
                     s.techniques());
}

// The table of candidates that fit (at most --top), then the rejected ones: every one with
// --show-rejected (at most --top OOM rows), else one line for the OOM and one per invalid rule
// (count and an example), so the output stays a screen long whatever the space.
void printText(const SearchArgs& args, const ModelConfig& model, const ClusterConfig& cluster,
               const SearchReport& report, const std::optional<FitAdvice>& advice) {
  fmt::print(
      "Search: {} on {} ({} GPUs of {}, {:.1f} GiB; usable {:.1f} GiB with {:.0f}% headroom), "
      "B={}\n",
      model.name, cluster.name, args.gpus, cluster.device.name, gib(report.capacity_bytes),
      gib(report.usable_bytes), 100 * report.headroom, args.run.global_batch);
  fmt::print("candidates: {} (valid {}: ok {}, OOM {}; invalid {})\n", report.total(), report.valid,
             report.ok, report.oom, report.invalid);
  fmt::print("{}\n", searchedSpaceText(args));
  if (report.equivalent > 0) {
    fmt::print(
        "equivalent: {} plan(s) simulate to the same timeline as a listed one (same events and "
        "times: a flag without effect here) and are named in its row, not ranked apart\n",
        report.equivalent);
  }
  if (report.pruned) {
    fmt::print(
        "tiers: closed form {} (memory + time bound), simulated {}, pruned by bound {} "
        "(top {}; --exhaustive simulates and lists every candidate)\n",
        report.closed_form, report.simulated, report.pruned_by_bound, args.top);
  }
  fmt::print("\n");
  printRowHeader();
  report.candidates.forEach([&](const CandidateResult& r) {
    if (r.status != CandidateStatus::kOk || (args.top > 0 && r.rank > args.top)) return false;
    printOkRow(r, report);
    return true;
  });
  if (args.top > 0 && report.ok > args.top) {
    fmt::print("  ({} more ok candidates not shown: --top {})\n", report.ok - args.top, args.top);
  }
  if (args.show_rejected) {
    int oom_rows = 0;
    report.candidates.forEach([&](const CandidateResult& r) {
      if (r.status == CandidateStatus::kOk) return true;  // OOM rows follow the ok ones
      if (r.status != CandidateStatus::kOom || (args.top > 0 && oom_rows >= args.top)) return false;
      printOomRow(r, report);
      ++oom_rows;
      return true;
    });
    if (report.oom > oom_rows) {
      fmt::print("  ({} more OOM candidates not shown: --top {})\n", report.oom - oom_rows,
                 args.top);
    }
  } else if (report.closest_oom) {
    const CandidateResult& c = *report.closest_oom;
    // Above the usable share is not above the card: say which when it fits the card. A device
    // peak within the usable share is OOM for the node's host memory (--offload's states).
    const std::string_view verdict =
        memoryVerdict(c.peak_memory_bytes, report.usable_bytes, report.capacity_bytes);
    std::string card;
    if (verdict == "fits") {
      card = ", within the device's share: its node's host memory is what it exceeds";
    } else if (verdict == "over_headroom") {
      card = fmt::format(", fits the card's {:.2f} GiB by {:.2f} but not the {:.0f}% headroom",
                         gib(report.capacity_bytes),
                         gib(report.capacity_bytes - c.peak_memory_bytes), 100 * report.headroom);
    }
    fmt::print(
        "\nOOM ({} candidates): the closest, {}, needs {:.2f} GiB of {:.2f} usable{} "
        "(--show-rejected lists them)\n",
        report.oom, candidateText(c.strategy), gib(c.peak_memory_bytes), gib(report.usable_bytes),
        card);
  }
  if (report.invalid > 0 && args.show_rejected && !report.pruned) {
    // One line per strategy, micro-batch and rule: schedules and techniques often break the same.
    fmt::print("\ninvalid ({} candidates):\n", report.invalid);
    std::map<std::tuple<std::string, int64_t, std::string>, bool> listed;
    int64_t rows = 0, hidden = 0;
    report.candidates.forEach([&](const CandidateResult& r) {
      if (r.status != CandidateStatus::kInvalid) return true;  // the invalid rows come last
      if (!listed.try_emplace({r.strategy.name(), r.strategy.micro_batch, r.violation}, true)
               .second) {
        return true;
      }
      if (args.top > 0 && rows >= args.top) {
        ++hidden;
        return true;
      }
      fmt::print("  {:<10} b={:<3} {}\n", r.strategy.name(), r.strategy.micro_batch, r.violation);
      ++rows;
      return true;
    });
    if (hidden > 0) fmt::print("  ({} more lines not shown: --top {})\n", hidden, args.top);
  } else if (report.invalid > 0) {
    fmt::print("\ninvalid ({} candidates), by rule (count, then an example):\n", report.invalid);
    for (const auto& [rule, count] : report.invalid_by_rule) {
      const auto example = report.invalid_example.find(rule);
      fmt::print("  {:>8}  {}\n", count,
                 example == report.invalid_example.end() ? rule : example->second);
    }
  }
  if (const CandidateResult* best = report.best()) {
    fmt::print(
        "\nbest: {} — {:.3f} ms, {:.2f} samples/s, {:.0f} tokens/s, {:.1f} TFLOP/s/GPU, MFU {}\n",
        candidateText(best->strategy), best->iteration_us / kUsPerMs, best->samples_per_s,
        best->samples_per_s * static_cast<double>(report.tokens_per_sample),
        best->model_tflops_per_gpu,
        mfuText(mfuFigures(cluster.device, model, best->model_tflops_per_gpu * kFlopsPerTflop)));
    if (std::optional<TimeToTrain> t = runTime(args, model, *best)) {
      fmt::print("{}", timeToTrainText(*t));
    }
    fmt::print("full timeline: {} --trace best.json.gz\n", simulateCommand(args, best->strategy));
    return;
  }
  fmt::print("\nno strategy fits in {:.1f} GiB per GPU (usable {:.1f} GiB)\n",
             gib(report.capacity_bytes), gib(report.usable_bytes));
  if (advice) {
    fmt::print("smallest change that fits: {} with {} ({:.2f} GiB): search with it in the space\n",
               candidateText(report.closest_oom->strategy), advice->change,
               gib(advice->peak_memory_bytes));
  } else if (report.closest_oom) {
    fmt::print(
        "no single technique or pair (sequence parallelism, recomputation, ZeRO, a smaller "
        "micro-batch) brings the closest candidate under the limit: more GPUs or a larger "
        "device\n");
  }
}

// By value: the defaults that depend on the model (--cp, --ep) are filled in before use.
void run(SearchArgs args) {
  args.run.acceptMegatronExtras();
  // Checked before the search, not after it.
  args.train_run.tokens();

  ModelConfig model = args.run.loadModel();
  ClusterConfig cluster = args.run.loadCluster();
  if (const std::string note = assumedNcclArchNote(cluster); !note.empty()) {
    fmt::print(stderr, "eventsim: note: {}\n", note);
  }
  args.costs.applyHostTime(cluster);
  if (args.context_parallel.empty()) args.context_parallel = defaultContextParallel(model);
  if (args.gpus <= 0) EVSIM_THROW(InputError, "--gpus {}: must be > 0", args.gpus);
  if (args.run.global_batch <= 0) {
    EVSIM_THROW(InputError, "--global-batch {}: must be > 0", args.run.global_batch);
  }
  if (args.top < 0) EVSIM_THROW(InputError, "--top {}: must be >= 0", args.top);
  if (!(args.memory_headroom >= 0 && args.memory_headroom < 1)) {
    EVSIM_THROW(InputError, "--memory-headroom {}: must be in [0, 1)", args.memory_headroom);
  }
  SearchOptions options;
  options.base.global_batch = args.run.global_batch;
  options.base.framework = parseFramework(args.run.framework);
  options.base.reshard = parseReshard(args.run.reshard);
  options.base.torch_compile = parseTorchCompile(args.run.torch_compile);
  options.base.optimizer_impl = parseOptimizerImpl(args.run.optimizer_impl);
  // Every candidate would break the same rule: say it once.
  if (auto why = optimizerImplViolation(options.base)) EVSIM_THROW(InputError, "{}", *why);
  options.base.tp_comm_overlap = args.tp_comm_overlap;
  options.base.cp_comm = parseCpComm(args.cp_comm_type);
  options.base.cp_a2a = args.cp_a2a;
  if ((options.base.cp_comm == CpComm::kA2aP2p) != (args.cp_a2a > 0)) {
    EVSIM_THROW(InputError,
                "--cp-comm-type {} --cp-a2a-size {}: a2a+p2p needs the a2a group's size A "
                "(--cp-a2a-size, applied where A divides C), and only it takes one",
                args.cp_comm_type, args.cp_a2a);
  }
  options.base.overlap_param_gather = args.overlap_param_gather;
  options.base.grad_reduce_in_bf16 = args.grad_reduce_in_bf16;
  if (args.grad_reduce_in_bf16 && options.base.framework != Framework::kMegatron) {
    EVSIM_THROW(InputError,
                "--grad-reduce-in-bf16 with --framework {}: Megatron's option; FSDP reduces "
                "gradients in its reduce_dtype (fp32, as torchtitan sets it)",
                args.run.framework);
  }
  // FSDP's sharding is its own (ZeRO-3 wherever D x C >= 2): no ZeRO stages to try.
  if (args.zero_stages.empty()) {
    args.zero_stages = options.base.framework == Framework::kFsdp ? "0" : "0,1";
  }
  if (options.base.framework == Framework::kFsdp && trim(args.zero_stages) != "0") {
    EVSIM_THROW(InputError,
                "--framework fsdp --zero {}: FSDP shards fully (ZeRO-3) wherever D x C >= 2; "
                "leave --zero out",
                args.zero_stages);
  }
  options.space.gpus = args.gpus;
  options.space.micro_batches = parseIntList(args.micro_batches, "--micro-batch");
  for (int64_t b : options.space.micro_batches) {
    if (b <= 0) EVSIM_THROW(InputError, "--micro-batch {}: must be > 0", b);
  }
  options.space.schedules = parseSchedules(args.schedules);
  options.space.virtual_stages = parseSmallInts(args.virtual_stages, "--virtual-stages");
  options.space.recomputes = parseRecomputes(args.recomputes);
  options.space.sequence_parallel = parseOnOff(
      sequenceParallelValues(args), args.tp_comm.empty() ? "--sequence-parallel" : "--tp-comm");
  options.space.dp_overlaps = parseOnOff(args.dp_overlaps, "--dp-overlap");
  options.space.zero_stages = parseSmallInts(args.zero_stages, "--zero");
  options.space.offloads = parseOffloads(args.offloads);
  options.space.context_parallel = parseSmallInts(args.context_parallel, "--cp");
  if (args.expert_parallel.empty() && model.moe.num_experts > 1) {
    // An MoE model is searched with its experts sharded every way that divides them.
    args.expert_parallel = "1";
    for (int e = 2; e <= model.moe.num_experts; e *= 2) {
      if (model.moe.num_experts % e == 0) args.expert_parallel += fmt::format(",{}", e);
    }
  }
  options.space.expert_parallel = args.expert_parallel.empty()
                                      ? std::vector<int>{1}
                                      : parseSmallInts(args.expert_parallel, "--ep");
  // ETP = M (0) is always tried; --etp adds other expert tensor-parallel sizes.
  options.space.expert_tensor_parallel = {0};
  if (!args.expert_tensor_parallel.empty()) {
    for (int etp : parseSmallInts(args.expert_tensor_parallel, "--etp")) {
      if (etp < 1) EVSIM_THROW(InputError, "--etp {}: must be >= 1", etp);
      options.space.expert_tensor_parallel.push_back(etp);
    }
  }
  options.space.allow_cross_node_tp = args.allow_cross_node_tp;
  options.space.uneven_stage_shift = args.uneven_stages;
  options.memory_headroom = args.memory_headroom;
  options.threads = args.threads;
  options.top_k = args.top;

  validateSearchOptions(options);  // before writing anything
  if (!args.write_events.empty()) writeUnionEvents(args, model, cluster, options);
  std::optional<ProfileDb> db = args.costs.loadProfile();
  CostModel cost_model(cluster, db ? &*db : nullptr, args.costs.analytic());
  // --top K asks for the K best: the pruned, streaming search finds exactly those; without it (or
  // with --exhaustive) every candidate is simulated and listed.
  // --show-rejected needs every rejected candidate kept: the exhaustive path.
  const bool pruned = args.top > 0 && !args.exhaustive && !args.show_rejected;
  SearchReport report = withEventprofHint(unionEventprofHint(args, options), [&] {
    return pruned ? runPrunedSearch(model, cluster, cost_model, options)
                  : runSearch(model, cluster, cost_model, options);
  });

  if (!args.csv.empty()) {
    AtomicFileWriter out(args.csv);
    writeCsv(report, out.stream());
    out.commit();
  }
  // Nothing fits: what would make the closest candidate fit (a few plans, only in this case).
  std::optional<FitAdvice> advice;
  if (report.ok == 0 && report.closest_oom) {
    advice = adviseFit(model, cluster, report.closest_oom->strategy, args.memory_headroom);
  }
  if (args.sink) {  // Python: one object with every row
    args.sink(reportJson(args, model, cluster, report, advice, /*with_candidates=*/true));
  } else if (args.json) {
    printJson(args, model, cluster, report, advice, std::cout);
  } else {
    printText(args, model, cluster, report, advice);
    if (!args.csv.empty()) fmt::print("CSV: {}\n", args.csv);
  }
}

}  // namespace

void registerSearchCommand(CLI::App& app, JsonSink sink) {
  auto args = std::make_shared<SearchArgs>();
  args->sink = std::move(sink);
  CLI::App* cmd = app.add_subcommand("search", "rank every parallel strategy for N GPUs");
  args->run.addModelOptions(*cmd);
  args->run.addMegatronExtras(*cmd);
  args->run.addOverlapSlowdownOption(*cmd);
  cmd->add_option("--gpus", args->gpus, "number of GPUs N (M*P*D = N)")
      ->required()
      ->check(kGpuCount);
  cmd->add_option("--global-batch", args->run.global_batch, "global batch B")->required();
  cmd->add_option("--micro-batch,--micro-batches", args->micro_batches,
                  "micro-batch sizes to try, e.g. 1,2,4,8")
      ->capture_default_str();
  cmd->add_option("--schedule", args->schedules,
                  "schedules to try: gpipe,dapple,interleaved,zbh1,zbh2")
      ->capture_default_str();
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "model chunks per device to try with interleaved (only valid v are enumerated)")
      ->capture_default_str();
  cmd->add_option("--recompute", args->recomputes,
                  "recomputation to try: none,full,selective,selective-op")
      ->capture_default_str();
  CLI::Option* sp = cmd->add_option("--sequence-parallel", args->sequence_parallel,
                                    "sequence parallelism to try: off,on (on only where M >= 2)")
                        ->capture_default_str();
  cmd->add_option("--tp-comm", args->tp_comm,
                  "TP communication to try: allreduce,rs-ag (rs-ag is sequence parallelism: "
                  "another name for --sequence-parallel off,on)")
      ->excludes(sp);
  cmd->add_option("--dp-overlap", args->dp_overlaps,
                  "gradient buckets overlapped with the backward, to try: off,on (on only where "
                  "D >= 2 and not with ZeRO-3)")
      ->capture_default_str();
  cmd->add_flag("--tp-comm-overlap", args->tp_comm_overlap,
                "Megatron's TP communication overlap (Transformer Engine userbuffers) on every "
                "candidate with SP (not searched: Megatron's default is off)");
  cmd->add_flag("--overlap-param-gather", args->overlap_param_gather,
                "Megatron's overlapped parameter all-gather on every candidate with ZeRO 1/2 and "
                "DP overlap (not searched: Megatron's default is off)");
  cmd->add_flag("--grad-reduce-in-bf16", args->grad_reduce_in_bf16,
                "Megatron's: DP gradients held and reduced in bf16 on every candidate (not "
                "searched: --bf16 reduces in fp32 by default)");
  cmd->add_option("--offload", args->offloads,
                  "offload to host memory to try: none,optimizer,activations,both (needs the "
                  "cluster's node host_link and host_memory)")
      ->capture_default_str();
  cmd->add_option("--cp,--context-parallel-size", args->context_parallel,
                  "context-parallel sizes to try, e.g. 1,2,4 (> 1 only with flash attention; "
                  "default: 1, and with flash attention every power of two that leaves each rank "
                  ">= 4096 tokens)");
  cmd->add_option("--cp-comm-type", args->cp_comm_type,
                  "context parallelism's exchange on every candidate with C > 1: p2p | a2a | "
                  "allgather | a2a+p2p (not searched)")
      ->capture_default_str();
  cmd->add_option("--cp-a2a-size", args->cp_a2a,
                  "a2a+p2p: the a2a group's size A (candidates whose C it does not divide are "
                  "invalid)")
      ->check(CLI::Range(2, 1 << 16));
  cmd->add_option("--ep,--expert-model-parallel-size", args->expert_parallel,
                  "expert-parallel sizes to try (default for MoE models: every power of two "
                  "dividing the experts; only where E divides D)");
  cmd->add_option("--etp,--expert-tensor-parallel-size", args->expert_tensor_parallel,
                  "expert tensor-parallel sizes to try besides M, e.g. 1 (with E > 1, where ETP "
                  "divides the expert FFN and ETP x E divides M x D)");
  cmd->add_option("--uneven-stages", args->uneven_stages,
                  "also try the balanced split with its first stage, its last stage and both "
                  "shortened by 1..K layers (moved to the middle stages; P >= 2, not interleaved)")
      ->capture_default_str();
  cmd->add_option("--zero", args->zero_stages,
                  "ZeRO stages to try: 0,1,2,3 (> 0 only where D >= 2; default 0,1; not with "
                  "--framework fsdp, which shards fully)");
  args->costs.add(*cmd);
  cmd->add_option(
      "--write-events", args->write_events,
      "write the union of every valid candidate's events (YAML) for eventprof --events");
  cmd->add_flag("--show-rejected", args->show_rejected,
                "list every OOM and invalid candidate instead of a summary (at most --top OOM "
                "rows; searches exhaustively)");
  cmd->add_option("--top", args->top,
                  "find the K best strategies: pruned search, JSON/CSV hold those K (0: rank all)")
      ->capture_default_str();
  cmd->add_flag("--exhaustive", args->exhaustive,
                "with --top: simulate every fitting candidate and list them all (no pruning)");
  cmd->add_option("--threads", args->threads, "worker threads (0: every core)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print the ranking as JSON");
  cmd->add_option("--csv", args->csv, "write the ranking as CSV")->check(kFileName);
  cmd->add_flag("--allow-cross-node-tp", args->allow_cross_node_tp,
                "allow tensor parallel groups that span nodes");
  args->run.addFrameworkOptions(*cmd);
  cmd->add_option("--memory-headroom", args->memory_headroom,
                  "share of device memory kept free for workspace and fragmentation")
      ->capture_default_str();
  args->train_run.addTo(*cmd,
                        "tokens of the whole run (e.g. 15T): days and GPU-hours of the best "
                        "plan, and per plan in the JSON");
  cmd->callback([args] { run(*args); });
}

}  // namespace evsim

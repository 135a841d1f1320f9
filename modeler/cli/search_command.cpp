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
#include "modeler/cli/search_print.h"
#include "modeler/cli/search_refusals.h"
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

// Worker threads beyond this are refused: a thread each past the machine's limit failed inside
// the search ("Resource temporarily unavailable", an internal error); calibrate's bound.
constexpr unsigned kMaxSearchThreads = 1024;

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
  if (args.threads > kMaxSearchThreads) {
    EVSIM_THROW(InputError, "--threads {}: at most {} (0: every core)", args.threads,
                kMaxSearchThreads);
  }
  if (!(args.memory_headroom >= 0 && args.memory_headroom < 1)) {
    EVSIM_THROW(InputError, "--memory-headroom {}: must be in [0, 1)", args.memory_headroom);
  }
  SearchOptions options;
  options.base.global_batch = args.run.global_batch;
  options.base.framework = parseFramework(args.run.framework);
  options.base.reshard = parseReshard(args.run.reshard);
  options.base.fsdp_wrap = parseFsdpWrap(args.run.fsdp_wrap);
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
  options.base.grad_reduce_sync = parseGradReduceSync(args.grad_reduce_sync, "--grad-reduce-sync");
  if (args.grad_reduce_queue < 0 ||
      (args.grad_reduce_queue > 0 && !options.base.reducesAtStep())) {
    EVSIM_THROW(InputError,
                "--grad-reduce-queue {}: must be >= 0, and above 0 only with --grad-reduce-sync "
                "step",
                args.grad_reduce_queue);
  }
  options.base.grad_reduce_queue = args.grad_reduce_queue;
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
  // It changes ZeRO-2 candidates only: with none in the space it would be silently a no-op.
  if (options.base.reducesAtStep() &&
      std::find(options.space.zero_stages.begin(), options.space.zero_stages.end(), 2) ==
          options.space.zero_stages.end()) {
    EVSIM_THROW(InputError,
                "--grad-reduce-sync step: changes only ZeRO-2 candidates, and --zero {} has none "
                "(add 2 to --zero; FSDP shards as ZeRO-3)",
                args.zero_stages);
  }
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
  checkSearchedSizesApply(model, options.space);
  refuseTechniquesWithoutCandidates(args, options);
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
  if (report.valid == 0 && report.invalid > 0 && args.show_rejected && !args.sink) {
    // Asked for: every rejected candidate and its rule (--json: invalid_by_rule), then the one
    // error line below and exit 2. No CSV: a failed run leaves no file.
    if (args.json) {
      printJson(args, model, cluster, report, std::nullopt, std::cout);
    } else {
      printText(args, model, cluster, report, std::nullopt);
    }
    std::cout.flush();  // the report before the error line when both go to one terminal
  }
  refuseWithoutValidCandidates(args, options, model, report);  // before writing the CSV

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
      ->capture_default_str()
      ->each([args](const std::string&) { args->virtual_stages_given = true; });
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
  cmd->add_option("--grad-reduce-sync", args->grad_reduce_sync,
                  "backward | step: ZeRO-2's per-micro-batch reductions waited for at each "
                  "backward's end or only before the optimizer step, on every ZeRO-2 candidate")
      ->capture_default_str();
  cmd->add_option("--grad-reduce-queue", args->grad_reduce_queue,
                  "with --grad-reduce-sync step: the most reductions pending before compute waits "
                  "for the oldest (0: no bound)")
      ->capture_default_str();
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

#include "io/run_options.h"

#include <filesystem>

#include "common/error.h"
#include "common/strings.h"

#ifndef EVSIM_CONFIG_DIR
#define EVSIM_CONFIG_DIR "configs"
#endif

namespace evsim {

std::string resolveConfigPath(const std::string& argument, const std::string& kind) {
  namespace fs = std::filesystem;
  if (fs::exists(argument)) return argument;
  bool bare_name =
      argument.find('/') == std::string::npos && argument.find(".yaml") == std::string::npos;
  if (bare_name) {
    fs::path bundled = fs::path(EVSIM_CONFIG_DIR) / kind / (argument + ".yaml");
    if (fs::exists(bundled)) return bundled.string();
  }
  EVSIM_THROW(InputError, "--{} '{}': no such file{}", kind == "models" ? "model" : "cluster",
              argument, bare_name ? fmt::format(" and no bundled {}/{}.yaml", kind, argument) : "");
}

void RunOptions::addModelOptions(CLI::App& app) {
  app.add_option("--model", model, "model YAML, or a bundled name (e.g. bert-large)")->required();
  app.add_option("--cluster", cluster, "cluster YAML, or a bundled name (e.g. a40-4x4)")
      ->required();
}

void RunOptions::addStrategyOptions(CLI::App& app, bool strategy_required) {
  auto* text = app.add_option("--strategy", strategy_text, "xMxPxD, e.g. 2M4P2D (any case)");
  auto* tp_opt = app.add_option("--tp", tp, "tensor-parallel size M");
  auto* pp_opt = app.add_option("--pp", pp, "pipeline-parallel size P");
  auto* dp_opt = app.add_option("--dp", dp, "data-parallel size D");
  text->excludes(tp_opt)->excludes(pp_opt)->excludes(dp_opt);
  auto* b = app.add_option("--micro-batch", micro_batch, "micro-batch size b");
  auto* B = app.add_option("--global-batch", global_batch, "global batch B (m = B / (b*D))");
  if (strategy_required) {
    b->required();
    B->required();
  }
  app.add_option("--schedule", schedule, "gpipe | dapple (1F1B) | interleaved")
      ->capture_default_str();
  app.add_option("--virtual-stages", virtual_stages,
                 "model chunks per device v (with --schedule interleaved)")
      ->capture_default_str();
  app.add_option("--recompute", recompute, "activation recomputation: none | full | selective")
      ->capture_default_str();
  app.add_flag("--sequence-parallel", sequence_parallel,
               "Megatron sequence parallelism over the TP group");
  app.add_option("--zero", zero_stage,
                 "ZeRO stage over the DP group: 0, 1 (distributed optimizer), 2, 3")
      ->capture_default_str();
  app.add_flag("--dp-overlap", dp_overlap,
               "overlap bucketed DP gradient all-reduces with backward (PyTorch DDP)");
  app.add_option("--dp-bucket-mb", dp_bucket_mb, "DDP bucket size in MiB")->capture_default_str();
}

ModelConfig RunOptions::loadModel() const {
  return loadModelConfig(resolveConfigPath(model, "models"));
}

ClusterConfig RunOptions::loadCluster() const {
  return loadClusterConfig(resolveConfigPath(cluster, "clusters"));
}

Strategy RunOptions::strategy() const {
  Strategy s;
  if (!strategy_text.empty()) {
    parseStrategyText(strategy_text, s);
  } else if (tp > 0 || pp > 0 || dp > 0) {
    if (tp <= 0 || pp <= 0 || dp <= 0) {
      EVSIM_THROW(InputError, "--tp {} --pp {} --dp {}: give all three, each > 0 (or --strategy)",
                  tp, pp, dp);
    }
    s.tp = tp;
    s.pp = pp;
    s.dp = dp;
  } else {
    EVSIM_THROW(InputError, "--strategy: missing (give --strategy 2M4P2D or --tp/--pp/--dp)");
  }
  s.micro_batch = micro_batch;
  s.global_batch = global_batch;
  s.schedule = parseSchedule(schedule);
  s.dp_overlap = dp_overlap;
  if (!(dp_bucket_mb > 0)) EVSIM_THROW(InputError, "--dp-bucket-mb {}: must be > 0", dp_bucket_mb);
  s.dp_bucket_bytes = static_cast<int64_t>(dp_bucket_mb * 1024 * 1024);
  s.virtual_stages = virtual_stages;
  s.recompute = parseRecompute(recompute);
  s.sequence_parallel = sequence_parallel;
  s.zero_stage = zero_stage;
  return s;
}

std::pair<Strategy, StrategySpace> RunOptions::unionSpace(int64_t gpus,
                                                          const std::string& micro_batches) const {
  const bool techniques = recompute != "none" || sequence_parallel || zero_stage != 0 ||
                          virtual_stages != 1 || parseSchedule(schedule) == Schedule::kInterleaved;
  if (techniques) {
    EVSIM_THROW(InputError,
                "--gpus {}: the union covers GPipe/DAPPLE strategies without techniques; for "
                "--schedule interleaved, --recompute, --sequence-parallel or --zero write the "
                "union with `eventsim search ... --write-events FILE` and profile --events FILE",
                gpus);
  }
  Strategy base;
  base.global_batch = global_batch;
  base.dp_overlap = dp_overlap;
  if (base.global_batch <= 0) EVSIM_THROW(InputError, "--global-batch: required with --gpus");
  StrategySpace space;
  space.gpus = gpus;
  space.micro_batches = parseIntList(micro_batches, "--micro-batches");
  space.schedules = {parseSchedule(schedule)};
  return {base, space};
}

std::string RunOptions::commandLine(const Strategy& s) const {
  std::string out = fmt::format(
      "--model {} --cluster {} --strategy {} --micro-batch {} --global-batch {} --schedule {}",
      model, cluster, s.name(), s.micro_batch, s.global_batch, scheduleName(s.schedule));
  if (s.dp_overlap) out += fmt::format(" --dp-overlap --dp-bucket-mb {}", dp_bucket_mb);
  if (s.schedule == Schedule::kInterleaved)
    out += fmt::format(" --virtual-stages {}", s.virtual_stages);
  if (s.recompute != Recompute::kNone)
    out += fmt::format(" --recompute {}", recomputeName(s.recompute));
  if (s.sequence_parallel) out += " --sequence-parallel";
  if (s.zero_stage > 0) out += fmt::format(" --zero {}", s.zero_stage);
  return out;
}

}  // namespace evsim

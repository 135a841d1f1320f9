#include "io/run_options.h"

#include <fmt/ranges.h>

#include <filesystem>

#include "common/data_dir.h"
#include "common/error.h"
#include "common/strings.h"
#include "io/cli_checks.h"

namespace evsim {

std::string resolveConfigPath(const std::string& argument, const std::string& kind) {
  namespace fs = std::filesystem;
  const std::string flag = kind == "models" ? "model" : "cluster";
  // error_code forms: a symbolic-link loop or a 5,000-character name threw filesystem_error, an
  // "internal error" (issue 33). The name is clipped in the message.
  std::error_code ec;
  if (fs::exists(argument, ec)) return argument;
  if (ec && ec != std::errc::no_such_file_or_directory) {
    EVSIM_THROW(InputError, "--{} '{}': {}", flag, clipped(argument, 200), ec.message());
  }
  bool bare_name =
      argument.find('/') == std::string::npos && argument.find(".yaml") == std::string::npos;
  if (bare_name) {
    fs::path bundled = bundledConfigDir() / kind / (argument + ".yaml");
    if (fs::exists(bundled, ec)) return bundled.string();
  }
  EVSIM_THROW(
      InputError, "--{} '{}': no such file{}", flag, clipped(argument, 200),
      bare_name ? fmt::format(" and no bundled {}/{}.yaml (eventsim list {})", kind, argument, kind)
                : "");
}

void RunOptions::addModelOptions(CLI::App& app) {
  app.add_option("--model", model, "model YAML, or a bundled name (eventsim list models)")
      ->required();
  app.add_option("--cluster", cluster, "cluster YAML, or a bundled name (eventsim list clusters)")
      ->required();
  nccl.addOptions(app);
  overrides.addOptions(app);
}

void RunOptions::addGpusOption(CLI::App& app) {
  app.add_option("--gpus", gpus, "GPUs in all: D = gpus / (M x P), with --tp and --pp")
      ->check(kGpuCount);
}

ModelConfig RunOptions::loadModel() const {
  const std::string path = resolveConfigPath(model, "models");
  ModelConfig loaded = loadModelConfig(path);
  if (path.ends_with(".json") && !overrides.seq_length) {
    // A config.json's max_position_embeddings is the longest sequence the model serves (131,072
    // for Llama 3.1), rarely the training length: not taken silently.
    EVSIM_THROW(InputError,
                "--model {}: a Hugging Face config gives no training sequence length: add "
                "--seq-length (its max_position_embeddings is {})",
                clipped(model, 200), loaded.seq_length);
  }
  overrides.apply(loaded);
  return loaded;
}

void RunOptions::addOverlapSlowdownOption(CLI::App& app) {
  app.add_option("--overlap-slowdown", overlap_slowdown,
                 "on: compute beside a collective slows by the device file's overlap_slowdown "
                 "factors (default); off: runs at full speed")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--link-sharing", link_sharing,
                 "on: transfers overlapping in time share the links they cross, max-min fairly "
                 "(default); off: each takes its standalone time")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--attention-kernel", attention_kernel,
                 "fa2 | fa3 | cudnn: the fused-attention kernel timed (default: the cluster "
                 "file's attention_kernel, else cudnn under megatron, fa2 under fsdp)");
}

namespace {

// The run's fused-attention kernel (RunOptions::loadCluster says which wins).
void selectAttentionKernel(ClusterConfig& c, const std::string& flag,
                           const std::string& framework) {
  const bool explicit_kernel = !flag.empty() || c.attention_kernel.has_value();
  if (!flag.empty()) c.attention_kernel = parseAttentionKernel(flag, "--attention-kernel");
  if (!c.attention_kernel) {
    c.attention_kernel = framework == "fsdp" ? AttentionKernel::kFa2 : AttentionKernel::kCudnn;
  }
  if (!c.device.model || c.device.model->fused_attention.empty()) return;  // GEMM-path attention
  const auto& fitted = c.device.model->fused_attention;
  if (fitted.count(*c.attention_kernel)) return;
  std::string have;
  for (const auto& [kernel, f] : fitted) {
    have += (have.empty() ? "" : ", ") + std::string(attentionKernelName(kernel));
  }
  if (explicit_kernel) {
    EVSIM_THROW(InputError, "{} {}: device file {} has no {} attention fit (it has {})",
                flag.empty() ? c.source + ": attention_kernel" : std::string("--attention-kernel"),
                attentionKernelName(*c.attention_kernel), c.device.file,
                attentionKernelName(*c.attention_kernel), have);
  }
  if (fitted.count(AttentionKernel::kFa2)) c.attention_kernel = AttentionKernel::kFa2;
}

}  // namespace

ClusterConfig RunOptions::loadCluster() const {
  ClusterConfig c = loadClusterConfig(resolveConfigPath(cluster, "clusters"));
  selectAttentionKernel(c, attention_kernel, framework);
  if (overlap_slowdown == "off") {
    const std::string why = "switched off (--overlap-slowdown off)";
    c.device.overlap_slowdown.nvlink = {1.0, why};
    c.device.overlap_slowdown.network = {1.0, why};
  }
  c.topology.link_sharing = link_sharing == "on";
  nccl.apply(c.topology);
  return c;
}

std::string RunOptions::modellerSwitches() const {
  std::string out;
  out += nccl.flags();
  if (overlap_slowdown == "off") out += " --overlap-slowdown off";
  if (link_sharing == "off") out += " --link-sharing off";
  return out;
}

std::string RunOptions::commandLine(const Strategy& s, CommandFor target) const {
  std::string out = fmt::format(
      "--model {} --cluster {} --strategy {} --micro-batch {} --global-batch {} --schedule {}",
      model, cluster, s.name(), s.micro_batch, s.global_batch, scheduleName(s.schedule));
  if (target == CommandFor::kSimulate) out += modellerSwitches();
  if (s.cp > 1) out += fmt::format(" --cp {}", s.cp);
  if (s.cp > 1 && s.cp_comm != CpComm::kP2p) {
    out += fmt::format(" --cp-comm-type {}", cpCommName(s.cp_comm));
  }
  if (s.cp_a2a > 0) {
    out += fmt::format(" --hierarchical-context-parallel-sizes {},{}", s.cp_a2a, s.cp / s.cp_a2a);
  }
  if (s.ep > 1) out += fmt::format(" --ep {}", s.ep);
  if (s.etp > 0 && s.etp != s.tp) out += fmt::format(" --etp {}", s.etp);
  if (s.dp_overlap) {
    out += " --dp-overlap";
    if (s.dp_bucket_bytes > 0) {
      out += fmt::format(" --dp-bucket-mb {}",
                         static_cast<double>(s.dp_bucket_bytes) / (1024 * 1024));
    }
  }
  if (s.overlap_param_gather) out += " --overlap-param-gather";
  if (s.grad_reduce_in_bf16) out += " --grad-reduce-in-bf16";
  if (s.reducesAtStep()) out += " --grad-reduce-sync step";
  if (s.grad_reduce_queue > 0) out += fmt::format(" --grad-reduce-queue {}", s.grad_reduce_queue);
  if (s.schedule == Schedule::kInterleaved)
    out += fmt::format(" --virtual-stages {}", s.virtual_stages);
  if (s.microbatch_group > 0) out += fmt::format(" --microbatch-group-size {}", s.microbatch_group);
  if (s.recompute != Recompute::kNone)
    out += fmt::format(" --recompute {}", recomputeName(s.recompute));
  if (s.recompute_every > 1) out += fmt::format(" --recompute-every {}", s.recompute_every);
  if (s.swiglu_recompute_product) out += " --swiglu-kernel xformers";
  if (s.sequence_parallel) out += " --sequence-parallel";
  if (s.tp_comm_overlap) out += " --tp-comm-overlap";
  if (s.moe_dispatcher == MoeDispatcher::kDeepEp) {
    out += " --moe-token-dispatcher-type flex --moe-enable-deepep";
  }
  if (s.moe_a2a_overlap) out += " --overlap-moe-expert-parallel-comm";
  if (s.framework == Framework::kFsdp) {
    out += " --framework fsdp";
    if (s.reshard != Reshard::kDefault)
      out += fmt::format(" --reshard-after-forward {}", reshardName(s.reshard));
    if (s.fsdp_wrap != FsdpWrap::kSeparate)
      out += fmt::format(" --fsdp-wrap {}", fsdpWrapName(s.fsdp_wrap));
    if (s.torch_compile != TorchCompile::kDefault)
      out += fmt::format(" --torch-compile {}", torchCompileName(s.torch_compile));
    if (s.optimizer_impl != OptimizerImpl::kFused)
      out += fmt::format(" --optimizer-impl {}", optimizerImplName(s.optimizer_impl));
  } else if (s.zero_stage > 0) {
    out += fmt::format(" --zero {}", s.zero_stage);
  }
  if (s.offload != Offload::kNone) out += fmt::format(" --offload {}", offloadName(s.offload));
  if (!s.stage_layers.empty())
    out += fmt::format(" --stage-layers {}", fmt::join(s.stage_layers, ","));
  return out;
}

}  // namespace evsim
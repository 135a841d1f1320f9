#include "io/run_options.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/checked.h"
#include "common/data_dir.h"
#include "common/error.h"
#include "common/strings.h"
#include "io/cli_checks.h"
#include "io/megatron_args.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"

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
  app.add_option("--nccl-algo", nccl_algo,
                 "force one NCCL algorithm for every collective, as NCCL_ALGO does (ring, tree, "
                 "nvls, nvls_tree, collnet, pat; default: the cluster's, else NCCL's choice)");
  app.add_option("--nccl-pxn-disable", nccl_pxn_disable,
                 "1: no PXN (sends between nodes leave through their own NIC), as "
                 "NCCL_PXN_DISABLE does (default: the cluster's nccl.pxn_disable, else 0)");
  app.add_option("--nccl-p2p-pxn-level", nccl_p2p_pxn_level,
                 "when a send between nodes goes through PXN, as NCCL_P2P_PXN_LEVEL: 0 never, 1 "
                 "when the receiver's NIC is not on the sender's PCIe switch, 2 always (default: "
                 "the cluster's nccl.p2p_pxn_level, else 2)");
  app.add_option("--nccl-cross-nic", nccl_cross_nic,
                 "whether a ring/tree channel may leave a node through another NIC than it came in "
                 "by, as NCCL_CROSS_NIC: 0 never (rail-local), 1 yes, 2 where it is faster "
                 "(default: the cluster's nccl.cross_nic, else 2)");
  overrides.addOptions(app);
}

void RunOptions::addGpusOption(CLI::App& app) {
  app.add_option("--gpus", gpus, "GPUs in all: D = gpus / (M x P), with --tp and --pp")
      ->check(kGpuCount);
}

void RunOptions::addStrategyOptions(CLI::App& app, bool strategy_required) {
  // Repeatable: simulate compares the plans given (strategy() refuses more than one elsewhere).
  auto* text = app.add_option_function<std::vector<std::string>>(
                      "--strategy",
                      [this](const std::vector<std::string>& texts) {
                        strategy_text = texts.front();
                        more_strategy_texts.assign(texts.begin() + 1, texts.end());
                      },
                      "xMxPxD, e.g. 2M4P2D (any case)")
                   ->expected(1)
                   ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // Checked here: "--tp 0 --pp 2 --gpus 4" was told to give --tp and --pp, which it had.
  auto* tp_opt = app.add_option("--tp,--tensor-model-parallel-size", tp, "tensor-parallel size M")
                     ->check(kPositiveInteger);
  auto* pp_opt =
      app.add_option("--pp,--pipeline-model-parallel-size", pp, "pipeline-parallel size P")
          ->check(kPositiveInteger);
  auto* dp_opt = app.add_option("--dp", dp, "data-parallel size D")->check(kPositiveInteger);
  text->excludes(tp_opt)->excludes(pp_opt)->excludes(dp_opt);
  app.add_option("--cp,--context-parallel-size", cp,
                 "context-parallel size C: each sequence split over C ranks (ring attention)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--cp-comm-type", cp_comm_types,
                 "context parallelism's exchange (Megatron's / Transformer Engine's): p2p (ring "
                 "attention) | a2a (Ulysses) | allgather (Llama 3's K/V all-gather) | a2a+p2p "
                 "(with --hierarchical-context-parallel-sizes); one type for every layer")
      ->expected(1, 1 << 16)
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--hierarchical-context-parallel-sizes", hierarchical_cp_sizes,
                 "a2a+p2p: A R, the a2a group of A consecutive CP ranks and the ring over R "
                 "(A x R = C)")
      ->expected(1, 16)
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--ep,--expert-model-parallel-size", ep,
                 "expert-parallel size E: MoE experts sharded over E ranks of the DP group")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--etp,--expert-tensor-parallel-size", etp,
                 "expert tensor-parallel size: each routed expert's FFN split over ETP ranks "
                 "(default M, Megatron's)")
      ->check(CLI::Range(1, 1 << 16));
  auto* b = app.add_option("--micro-batch,--micro-batch-size", micro_batch, "micro-batch size b");
  auto* B = app.add_option("--global-batch,--global-batch-size", global_batch,
                           "global batch B (m = B / (b*D))");
  if (strategy_required) {
    b->required();
    B->required();
  }
  schedule_option =
      app.add_option("--schedule", schedule,
                     "gpipe | dapple (1F1B) | interleaved | zbh1 | zbh2 | zbv | dualpipev | "
                     "FILE.csv")
          ->capture_default_str();
  auto* v = app.add_option("--virtual-stages", virtual_stages,
                           "model chunks per device v (with --schedule interleaved)")
                ->capture_default_str();
  auto* layers_per_chunk =
      app.add_option("--num-layers-per-virtual-pipeline-stage", layers_per_virtual_stage,
                     "Megatron's form of v: layers per model chunk (implies --schedule "
                     "interleaved)")
          ->check(kPositiveInteger)
          ->excludes(v);
  app.add_option("--microbatch-group-size,--microbatch-group-size-per-virtual-pipeline-stage",
                 microbatch_group,
                 "interleaved schedule: N contiguous micro-batches per model chunk (Megatron's "
                 "group, the Llama 3 paper's N; default P)")
      ->check(kPositiveInteger);
  app.add_option("--virtual-pipeline-model-parallel-size", megatron_virtual_stages,
                 "Megatron's: model chunks per device v (implies --schedule interleaved)")
      ->check(kPositiveInteger)
      ->excludes(v)
      ->excludes(layers_per_chunk);
  auto* granularity = app.add_option("--recompute,--recompute-granularity", recompute,
                                     "activation recomputation: none | full | selective | "
                                     "selective-op (torchtitan's per-op policy)")
                          ->capture_default_str();
  app.add_option(
         "--recompute-every", recompute_every,
         "with --recompute full: checkpoint only every N-th block of each rank (torchtitan's "
         "selective_ac_option = N; counted over the rank's blocks in chunk order)")
      ->check(kPositiveInteger);
  app.add_option("--swiglu-kernel", swiglu_kernel,
                 "the dense SwiGLU MLP's kernels: megatron (the activation keeps its input, fc2 "
                 "the product) | xformers (xformers' fused SwiGLU: keeps the fc1 outputs, the "
                 "backward recomputes the product)")
      ->check(CLI::IsMember({"megatron", "xformers"}))
      ->capture_default_str();
  app.add_flag("--recompute-activations", recompute_activations,
               "Megatron's: selective recomputation (--recompute selective)")
      ->excludes(granularity);
  app.add_option("--recompute-method", recompute_method,
                 "Megatron's: uniform (every layer, as --recompute full models it)")
      ->check(CLI::IsMember({"uniform", "block"}));
  app.add_option("--recompute-num-layers", recompute_num_layers,
                 "Megatron's: layers per recomputed group with --recompute-method uniform (1: "
                 "every layer on its own, as eventsim models it)")
      ->check(kPositiveInteger);
  CLI::Option* sp = app.add_flag("--sequence-parallel", sequence_parallel,
                                 "Megatron sequence parallelism over the TP group");
  app.add_option("--tp-comm", tp_comm,
                 "TP communication: allreduce | rs-ag (rs-ag is sequence parallelism, the same "
                 "as --sequence-parallel)")
      ->check(CLI::IsMember({"allreduce", "rs-ag"}))
      ->excludes(sp);
  auto* zero = app.add_option("--zero", zero_stage,
                              "ZeRO stage over the DP group: 0, 1 (distributed optimizer), 2, 3")
                   ->capture_default_str();
  app.add_flag("--use-distributed-optimizer", distributed_optimizer,
               "Megatron's distributed optimizer (--zero 1)")
      ->excludes(zero);
  app.add_option("--offload", offload,
                 "offload to host memory over the host link: none | optimizer (CPU Adam on "
                 "host-resident state) | activations (every layer's, prefetched back) | both")
      ->capture_default_str();
  app.add_flag("--dp-overlap,--overlap-grad-reduce", dp_overlap,
               "overlap bucketed DP gradient all-reduces with backward (PyTorch DDP)");
  app.add_flag("--overlap-param-gather", overlap_param_gather,
               "Megatron's: the distributed optimizer's parameter all-gather overlapped with the "
               "next forward, bucket by bucket (needs --use-distributed-optimizer and "
               "--overlap-grad-reduce)");
  app.add_flag("--grad-reduce-in-bf16", grad_reduce_in_bf16,
               "Megatron's: gradients accumulated and reduced over DP in bf16 (2 bytes a "
               "parameter) instead of the fp32 main gradients --bf16 implies; NeMo's and "
               "Megatron-Bridge's performance recipes set it (grad_reduce_in_fp32 = False)");
  app.add_option("--moe-token-dispatcher-type", moe_dispatcher_type,
                 "Megatron's MoE token dispatcher: alltoall (NCCL all-to-all of every routed "
                 "copy) | flex (with --moe-enable-deepep: DeepEP's RDMA + NVLink dispatch)")
      ->capture_default_str();
  app.add_flag("--moe-enable-deepep", moe_enable_deepep,
               "Megatron's: the flex dispatcher's DeepEP backend (each token once per node over "
               "RDMA, then over NVLink; needs --moe-token-dispatcher-type flex)");
  app.add_flag("--overlap-moe-expert-parallel-comm", moe_a2a_overlap,
               "Megatron's combined 1F1B: each steady-state forward fused with the next "
               "backward, one micro-batch's expert all-to-alls beside the other's compute "
               "(needs --schedule interleaved and --ep > 1)");
  app.add_flag("--tp-comm-overlap", tp_comm_overlap,
               "Megatron's (Transformer Engine userbuffers): TP all-gathers and reduce-scatters "
               "overlapped with the adjacent GEMMs, chunk by chunk (needs --sequence-parallel)");
  auto* bucket_mb =
      app.add_option("--dp-bucket-mb", dp_bucket_mb,
                     "DDP bucket size in MiB (default: the framework's: Megatron's max(40M, 1M x "
                     "D x C) parameters, on the first chunk of pipeline rank 0 only, as Megatron "
                     "buckets; PyTorch DDP's 25 MiB)")
          ->check(finitePositiveUpTo(1e6));
  app.add_option("--ddp-bucket-size", ddp_bucket_params,
                 "Megatron's: DDP bucket size in parameters (gradient elements), as Megatron "
                 "counts it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->excludes(bucket_mb);
  app.add_flag("--allow-cross-node-tp", allow_cross_node_tp,
               "allow TP groups that straddle nodes (M not dividing a node's GPUs)");
  auto* layers = app.add_option("--stage-layers", stage_layers,
                                "transformer blocks per model chunk, e.g. 10,12,12,10 (P x v "
                                "entries; default: the FLOP-balanced split)");
  app.add_option("--decoder-first-pipeline-num-layers", first_stage_layers,
                 "Megatron's: blocks on the first stage, the rest split evenly")
      ->check(CLI::Range(1, static_cast<int>(kMaxLayers)))
      ->excludes(layers);
  app.add_option("--decoder-last-pipeline-num-layers", last_stage_layers,
                 "Megatron's: blocks on the last stage, the rest split evenly")
      ->check(CLI::Range(1, static_cast<int>(kMaxLayers)))
      ->excludes(layers);
  app.add_flag("--account-for-embedding-in-pipeline-split", account_for_embedding,
               "Megatron's: the embedding counts as one layer of the first model chunk")
      ->excludes(layers);
  app.add_flag("--account-for-loss-in-pipeline-split", account_for_loss,
               "Megatron's: the loss counts as one layer of the last model chunk")
      ->excludes(layers);
  addFrameworkOptions(app);
}

void RunOptions::addMegatronExtras(CLI::App& app) {
  // Replaced by the file's arguments before parsing (modeler/cli/main.cpp): listed for --help.
  app.add_option("--args-file", args_file,
                 "a Megatron-LM launch script: its arguments are read in place (a flag given on "
                 "the command line wins; torchrun's --nnodes x --nproc_per_node give --gpus)");
  app.allow_extras();
  extras_app = &app;
}

void RunOptions::acceptMegatronExtras() const {
  if (extras_app == nullptr) return;
  const std::string note = ignoredArgsNote(acceptIgnoredMegatronArgs(extras_app->remaining()));
  if (!note.empty()) fmt::print(stderr, "eventsim: {}\n", note);
}

void RunOptions::addFrameworkOptions(CLI::App& app) {
  auto* framework_opt =
      app.add_option("--framework", framework,
                     "megatron (Megatron-LM's memory layout) | fsdp (PyTorch FSDP2 as torchtitan "
                     "runs it: fully sharded fp32 states, per-layer gathers)")
          ->capture_default_str();
  app.add_flag_callback(
         "--use-torch-fsdp2", [this] { framework = "fsdp"; }, "Megatron's: --framework fsdp")
      ->excludes(framework_opt);
  app.add_option("--reshard-after-forward", reshard,
                 "FSDP: default (always without PP, never with PP) | always | never")
      ->capture_default_str();
  app.add_option("--torch-compile", torch_compile,
                 "FSDP: on (torch.compile's fused blocks and loss) | blocks (compiled blocks, eager "
                 "loss: torchtitan before 2025-04) | off (eager PyTorch kernels) | default (off, as "
                 "torchtitan)")
      ->capture_default_str();
  app.add_option("--optimizer-impl", optimizer_impl,
                 "AdamW's implementation (torchtitan's optimizer.implementation): fused (one "
                 "_fused_adamw_ pass; torchtitan's default since 2025-02, and Megatron's only "
                 "step) | foreach (eight foreach kernels: torchtitan before 2025-02, FSDP only) | "
                 "for-loop (not modelled)")
      ->capture_default_str();
}

void RunOptions::applyFramework(Strategy& s) const {
  s.framework = parseFramework(framework);
  s.reshard = parseReshard(reshard);
  s.torch_compile = parseTorchCompile(torch_compile);
  s.optimizer_impl = parseOptimizerImpl(optimizer_impl);
  if (s.framework == Framework::kFsdp && zero_stage == 0 && !distributed_optimizer) {
    s.zero_stage = s.gradGroupSize() > 1 ? 3 : 0;
  }
}

namespace {

// Megatron-LM's layers per model chunk (get_num_layers_to_build / get_transformer_layer_offset):
// the first and/or last pipeline stage get the given blocks and the others share the rest evenly;
// with v chunks per stage each stage's blocks split evenly over its chunks. Accounting for the
// embedding (loss) counts it as one layer of the first (last) chunk: the L + 1 (+ 1) layers split
// evenly over the P x v chunks, and that chunk builds one block fewer. Chunks are returned in
// virtual-stage order (chunk c of stage p at the layout's virtualStage(p, c): c x P + p looped,
// p and 2P-1-p on the V layout, where stage 0 holds the first and the last chunk).
struct MegatronSplit {
  int layers;
  PipelineLayout layout;
  int first, last;
  bool embedding, loss;
};
std::vector<int> megatronSplit(const MegatronSplit& m) {
  const int P = m.layout.devices(), v = m.layout.chunks();
  if (P < 2) {
    EVSIM_THROW(InputError,
                "--decoder-first/last-pipeline-num-layers, --account-for-*-in-pipeline-split: need "
                "P >= 2 pipeline stages, not {}",
                P);
  }
  if ((m.first > 0 || m.last > 0) && (m.embedding || m.loss)) {
    EVSIM_THROW(InputError,
                "--decoder-first/last-pipeline-num-layers with --account-for-*-in-pipeline-split: "
                "Megatron allows one or the other");
  }
  std::vector<int> per_stage(static_cast<size_t>(P));
  if (m.embedding || m.loss) {
    const int total = m.layers + m.embedding + m.loss;
    if (total % (P * v) != 0) {
      EVSIM_THROW(InputError,
                  "--account-for-*-in-pipeline-split: {} layers + {} (embedding/loss) = {} do not "
                  "split evenly over P x v = {} model chunks",
                  m.layers, m.embedding + m.loss, total, P * v);
    }
    std::vector<int> out(static_cast<size_t>(P * v), total / (P * v));
    if (m.embedding) --out.front();
    if (m.loss) --out.back();
    for (int n : out) {
      if (n < 0) {
        EVSIM_THROW(InputError,
                    "--account-for-*-in-pipeline-split: {} layers over P x v = {} chunks leave "
                    "the embedding or the loss without a chunk of its own",
                    m.layers, P * v);
      }
    }
    return out;
  }
  const int fixed = (m.first > 0) + (m.last > 0);
  const int middle_stages = P - fixed;
  const int middle_layers = m.layers - m.first - m.last;
  if (middle_stages < 0 || middle_layers < 0 || (middle_stages == 0 && middle_layers != 0) ||
      (middle_stages > 0 && (middle_layers % middle_stages != 0 || middle_layers == 0))) {
    EVSIM_THROW(InputError,
                "--decoder-first/last-pipeline-num-layers {}/{}: the other {} layers do not split "
                "evenly over the other {} of P={} stages",
                m.first, m.last, middle_layers, middle_stages, P);
  }
  per_stage.assign(static_cast<size_t>(P), middle_stages > 0 ? middle_layers / middle_stages : 0);
  if (m.first > 0) per_stage.front() = m.first;
  if (m.last > 0) per_stage.back() = m.last;
  std::vector<int> out(static_cast<size_t>(P * v));
  for (int p = 0; p < P; ++p) {
    if (per_stage[p] % v != 0) {
      EVSIM_THROW(InputError,
                  "--decoder-first/last-pipeline-num-layers {}/{}: stage {}'s {} layers do not "
                  "split evenly over its {} virtual stages",
                  m.first, m.last, p, per_stage[p], v);
    }
    for (int c = 0; c < v; ++c) {
      out[static_cast<size_t>(m.layout.virtualStage(p, c))] = per_stage[p] / v;
    }
  }
  return out;
}

// Megatron's --moe-token-dispatcher-type and --moe-enable-deepep (arguments.py: DeepEP needs the
// flex dispatcher, which needs a backend; eventsim models DeepEP's).
MoeDispatcher parseMoeDispatcher(const std::string& type, bool deepep) {
  if (type == "alltoall") {
    if (deepep) {
      EVSIM_THROW(InputError,
                  "--moe-enable-deepep: DeepEP is only supported with the flex token dispatcher "
                  "(--moe-token-dispatcher-type flex)");
    }
    return MoeDispatcher::kAllToAll;
  }
  if (type == "flex") {
    if (!deepep) {
      EVSIM_THROW(InputError,
                  "--moe-token-dispatcher-type flex: give its backend, --moe-enable-deepep (the "
                  "one eventsim models)");
    }
    return MoeDispatcher::kDeepEp;
  }
  if (type == "allgather") {
    EVSIM_THROW(InputError,
                "--moe-token-dispatcher-type allgather: not modelled (alltoall, or flex with "
                "--moe-enable-deepep)");
  }
  EVSIM_THROW(InputError,
              "--moe-token-dispatcher-type '{}': expected alltoall, allgather or flex", type);
}

}  // namespace

void RunOptions::checkTpPlacement(const ModelConfig& model, const ClusterConfig& cluster,
                                  const Strategy& s) const {
  // An invalid strategy is reported by its own rule first (the plan builder's message).
  if (allow_cross_node_tp || strategyViolation(model, cluster, s)) return;
  if (std::optional<std::string> v = crossNodeTpViolation(cluster, s)) {
    EVSIM_THROW(InputError, "{}", *v);
  }
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
  if (!nccl_algo.empty()) {
    const auto& names = ncclAlgorithmNames();
    if (nccl_algo != "auto" && std::find(names.begin(), names.end(), nccl_algo) == names.end()) {
      EVSIM_THROW(InputError,
                  "--nccl-algo '{}': must be auto, ring, tree, nvls, nvls_tree, collnet or pat",
                  nccl_algo);
    }
    c.topology.nccl.algorithm = nccl_algo;
  }
  if (!nccl_pxn_disable.empty()) {
    if (nccl_pxn_disable != "0" && nccl_pxn_disable != "1") {
      EVSIM_THROW(InputError, "--nccl-pxn-disable '{}': must be 0 or 1 (as NCCL_PXN_DISABLE)",
                  nccl_pxn_disable);
    }
    c.topology.nccl.pxn_disable = nccl_pxn_disable == "1";
  }
  if (!nccl_p2p_pxn_level.empty()) {
    const std::string& v = nccl_p2p_pxn_level;
    if (v != "0" && v != "1" && v != "2") {
      EVSIM_THROW(InputError,
                  "--nccl-p2p-pxn-level '{}': must be 0, 1 or 2 (as NCCL_P2P_PXN_LEVEL)", v);
    }
    c.topology.nccl.p2p_pxn_level = v[0] - '0';
  }
  if (!nccl_cross_nic.empty()) {
    const std::string& v = nccl_cross_nic;
    if (v != "0" && v != "1" && v != "2") {
      EVSIM_THROW(InputError, "--nccl-cross-nic '{}': must be 0, 1 or 2 (as NCCL_CROSS_NIC)", v);
    }
    c.topology.nccl.cross_nic = v[0] - '0';
  }
  return c;
}

void RunOptions::requireInterleaved(const char* flag) const {
  // An explicit other schedule was silently replaced by interleaved (issue 31).
  if (schedule_option != nullptr && schedule_option->count() > 0 &&
      toLower(trim(schedule)) != "interleaved") {
    EVSIM_THROW(InputError,
                "{} with --schedule {}: model chunks per device need --schedule interleaved (or "
                "no --schedule)",
                flag, schedule);
  }
}

Strategy RunOptions::strategy(const ModelConfig& model_config) const {
  if (!more_strategy_texts.empty()) {
    EVSIM_THROW(InputError,
                "--strategy {} and --strategy {}: one plan here (eventsim simulate compares "
                "several side by side)",
                strategy_text, more_strategy_texts.front());
  }
  return strategyOf(model_config, strategy_text);
}

std::vector<Strategy> RunOptions::strategies(const ModelConfig& model_config) const {
  std::vector<Strategy> out = {strategyOf(model_config, strategy_text)};
  for (const std::string& text : more_strategy_texts) {
    out.push_back(strategyOf(model_config, text));
  }
  return out;
}

Strategy RunOptions::strategyOf(const ModelConfig& model_config,
                                const std::string& strategy_text) const {
  Strategy s;
  if (!strategy_text.empty()) {
    if (gpus > 0) EVSIM_THROW(InputError, "--gpus {}: give --tp and --pp, not --strategy", gpus);
    parseStrategyText(strategy_text, s);
  } else if (gpus > 0) {
    if (dp > 0)
      EVSIM_THROW(InputError, "--dp {} with --gpus {}: D is derived, drop --dp", dp, gpus);
    // Megatron's defaults: a size not given is 1.
    const int M = tp > 0 ? tp : 1, P = pp > 0 ? pp : 1;
    if (gpus % (int64_t{M} * P * cp) != 0) {
      if (cp == 1) {
        EVSIM_THROW(InputError, "--gpus {}: not divisible by M x P = {} x {}", gpus, M, P);
      }
      EVSIM_THROW(InputError, "--gpus {}: not divisible by M x P x C = {} x {} x {}", gpus, M, P,
                  cp);
    }
    s.tp = M;
    s.pp = P;
    s.dp = static_cast<int>(gpus / (int64_t{M} * P * cp));
  } else if (tp > 0 || pp > 0 || dp > 0) {
    if (tp <= 0 || pp <= 0 || dp <= 0) {
      EVSIM_THROW(InputError, "--tp {} --pp {} --dp {}: give all three, each > 0 (or --strategy)",
                  tp, pp, dp);
    }
    s.tp = tp;
    s.pp = pp;
    s.dp = dp;
  } else {
    EVSIM_THROW(InputError,
                "--strategy: missing (give --strategy 2M4P2D, --tp/--pp/--dp, or --tp/--pp "
                "--gpus N)");
  }
  s.cp = cp;
  s.cp_comm = parseCpComm(cp_comm_types.front());
  for (const std::string& type : cp_comm_types) {
    if (parseCpComm(type) != s.cp_comm) {
      EVSIM_THROW(InputError,
                  "--cp-comm-type {}: a different type per layer is not modelled; give one type "
                  "for every layer",
                  fmt::join(cp_comm_types, " "));
    }
  }
  if (!hierarchical_cp_sizes.empty()) {
    int64_t product = 1;
    for (int size : hierarchical_cp_sizes) product *= size;
    // Megatron: prod(sizes) == C; Transformer Engine's a2a+p2p has two levels (a2a, p2p).
    if (hierarchical_cp_sizes.size() != 2 || product != cp) {
      EVSIM_THROW(InputError,
                  "--hierarchical-context-parallel-sizes {}: give two sizes A R with A x R = "
                  "--cp {} (the a2a and p2p levels of a2a+p2p)",
                  fmt::join(hierarchical_cp_sizes, " "), cp);
    }
    s.cp_a2a = hierarchical_cp_sizes.front();
  }
  s.ep = ep;
  s.etp = etp;
  s.micro_batch = micro_batch;
  s.global_batch = global_batch;
  s.schedule = parseSchedule(schedule);
  s.dp_overlap = dp_overlap;
  s.overlap_param_gather = overlap_param_gather;
  s.grad_reduce_in_bf16 = grad_reduce_in_bf16;
  s.tp_comm_overlap = tp_comm_overlap;
  s.moe_dispatcher = parseMoeDispatcher(moe_dispatcher_type, moe_enable_deepep);
  s.moe_a2a_overlap = moe_a2a_overlap;
  if (dp_bucket_mb < 0 || !std::isfinite(dp_bucket_mb)) {
    EVSIM_THROW(InputError, "--dp-bucket-mb {}: must be > 0", dp_bucket_mb);
  }
  s.dp_bucket_bytes = static_cast<int64_t>(dp_bucket_mb * 1024 * 1024);  // 0: the default
  if (dp_bucket_mb > 0 && s.dp_bucket_bytes == 0) {
    // Not 0, which would silently mean the framework's default.
    EVSIM_THROW(InputError, "--dp-bucket-mb {}: under one byte", dp_bucket_mb);
  }
  s.virtual_stages = virtual_stages;
  if (megatron_virtual_stages > 0) {
    requireInterleaved("--virtual-pipeline-model-parallel-size");
    s.virtual_stages = megatron_virtual_stages;
    s.schedule = Schedule::kInterleaved;
  }
  if (layers_per_virtual_stage > 0) {
    // Megatron: L / (P x layers per chunk) chunks per device.
    const int64_t per_device = int64_t{s.pp} * layers_per_virtual_stage;
    if (model_config.numLayers() % per_device != 0) {
      EVSIM_THROW(InputError,
                  "--num-layers-per-virtual-pipeline-stage {}: P x {} does not divide the {} "
                  "layers of {}",
                  layers_per_virtual_stage, layers_per_virtual_stage, model_config.numLayers(),
                  model_config.name);
    }
    s.virtual_stages = static_cast<int>(model_config.numLayers() / per_device);
    requireInterleaved("--num-layers-per-virtual-pipeline-stage");
    s.schedule = Schedule::kInterleaved;
  }
  s.microbatch_group = microbatch_group;
  s.recompute_every = recompute_every;
  s.swiglu_recompute_product = swiglu_kernel == "xformers";
  s.recompute = parseRecompute(recompute_activations ? "selective" : recompute);
  if (recompute_num_layers > 1) {
    EVSIM_THROW(InputError,
                "--recompute-num-layers {}: not modelled (eventsim recomputes each layer on its "
                "own: --recompute-num-layers 1)",
                recompute_num_layers);
  }
  if (recompute_method == "block") {
    EVSIM_THROW(InputError,
                "--recompute-method block: not modelled (eventsim recomputes every layer, "
                "Megatron's uniform method)");
  }
  if (!recompute_method.empty() && s.recompute != Recompute::kFull) {
    EVSIM_THROW(InputError, "--recompute-method {}: applies to --recompute-granularity full",
                recompute_method);
  }
  s.sequence_parallel = sequence_parallel || tp_comm == "rs-ag";
  s.zero_stage = distributed_optimizer ? 1 : zero_stage;
  s.offload = parseOffload(offload);
  applyFramework(s);
  if (ddp_bucket_params > 0) {
    // Megatron's bucket_size counts parameters (DistributedDataParallelConfig: "Maximum number of
    // parameters in each bucket"; param_and_grad_buffer.py closes a bucket once it spans that
    // many elements): in bytes, times the gradient buffer's element size (fp32 under --bf16).
    s.dp_bucket_bytes = checkedMul(
        ddp_bucket_params,
        dtypeBytes(dataParallelGradDtype(s.framework, model_config.dtype, s.grad_reduce_in_bf16)),
        "--ddp-bucket-size bytes");
  }
  if (!stage_layers.empty()) {
    // In order, repeats kept (parseIntList makes a set: "6,14,14" is three chunks here).
    for (const std::string& part : split(stage_layers, ',')) {
      const std::optional<int64_t> n = parseInteger(trim(part));
      if (!n || *n < 1 || *n > kMaxLayers) {
        EVSIM_THROW(InputError, "--stage-layers '{}': '{}' is not a layer count in 1..{}",
                    stage_layers, part, kMaxLayers);
      }
      if (s.stage_layers.size() >= static_cast<size_t>(kMaxLayers)) {
        EVSIM_THROW(InputError, "--stage-layers: more than {} entries", kMaxLayers);
      }
      s.stage_layers.push_back(static_cast<int>(*n));
    }
  } else if (first_stage_layers > 0 || last_stage_layers > 0 || account_for_embedding ||
             account_for_loss) {
    // In virtual-stage order: the first and last chunk are k = 0 and k = P*v - 1 under any layout.
    s.stage_layers = megatronSplit(MegatronSplit{
        static_cast<int>(model_config.numLayers()), pipelineLayout(s), first_stage_layers,
        last_stage_layers, account_for_embedding, account_for_loss});
  }
  return s;
}

std::pair<Strategy, StrategySpace> RunOptions::unionSpace(int64_t gpus,
                                                          const std::string& micro_batches) const {
  const bool techniques =
      cp != 1 || ep != 1 || etp != 0 || microbatch_group != 0 || recompute != "none" ||
      recompute_every != 0 || swiglu_kernel != "megatron" || sequence_parallel ||
      tp_comm == "rs-ag" || zero_stage != 0 ||
      distributed_optimizer || virtual_stages != 1 || layers_per_virtual_stage > 0 ||
      megatron_virtual_stages > 0 || recompute_activations || !stage_layers.empty() ||
      first_stage_layers > 0 || last_stage_layers > 0 || account_for_embedding ||
      account_for_loss || framework != "megatron" ||
      parseSchedule(schedule) == Schedule::kInterleaved ||
      parseOffload(offload) != Offload::kNone || tp_comm_overlap || overlap_param_gather ||
      grad_reduce_in_bf16 ||
      moe_enable_deepep || moe_dispatcher_type != "alltoall" || moe_a2a_overlap ||
      dp_bucket_mb > 0 || ddp_bucket_params > 0;
  if (techniques) {
    EVSIM_THROW(
        InputError,
        "--gpus {}: the union covers GPipe/DAPPLE strategies without techniques; for "
        "--cp, --ep, --schedule interleaved, --recompute, --sequence-parallel, --zero, --offload, "
        "a bucket size or the overlap flags "
        "write the union with `eventsim search ... --write-events FILE` and profile --events FILE",
        gpus);
  }
  Strategy base;
  base.global_batch = global_batch;
  base.dp_overlap = dp_overlap;
  if (base.global_batch <= 0) EVSIM_THROW(InputError, "--global-batch: required with --gpus");
  // The union's strategies are Megatron's (refused above otherwise): --optimizer-impl foreach,
  // --reshard-after-forward and --torch-compile are refused as simulate and search refuse them,
  // not dropped (the union's events would be the fused step's).
  applyFramework(base);
  if (auto why = frameworkFlagViolation(base)) EVSIM_THROW(InputError, "{}", *why);
  StrategySpace space;
  space.gpus = gpus;
  space.micro_batches = parseIntList(micro_batches, "--micro-batches");
  if (!space.micro_batches.empty() && space.micro_batches.front() < 1) {
    EVSIM_THROW(InputError, "--micro-batches {}: a micro-batch size must be >= 1, not {}",
                micro_batches, space.micro_batches.front());
  }
  space.schedules = {parseSchedule(schedule)};
  space.dp_overlaps = {dp_overlap};
  return {base, space};
}

std::string RunOptions::modellerSwitches() const {
  std::string out;
  if (!nccl_algo.empty()) out += fmt::format(" --nccl-algo {}", nccl_algo);
  if (!nccl_pxn_disable.empty()) out += fmt::format(" --nccl-pxn-disable {}", nccl_pxn_disable);
  if (!nccl_p2p_pxn_level.empty()) {
    out += fmt::format(" --nccl-p2p-pxn-level {}", nccl_p2p_pxn_level);
  }
  if (!nccl_cross_nic.empty()) out += fmt::format(" --nccl-cross-nic {}", nccl_cross_nic);
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

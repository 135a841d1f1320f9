#pragma once
// Command-line options shared by the eventsim subcommands: which model, cluster and strategy.
// A model or cluster is a YAML path, or a bundled config's name ("gpt2-345m" ->
// configs/models/gpt2-345m.yaml in the source tree). Megatron-LM's own flag names are accepted
// beside ours: --tensor-model-parallel-size (--tp), --pipeline-model-parallel-size (--pp),
// --micro-batch-size, --global-batch-size, --num-layers-per-virtual-pipeline-stage,
// --recompute-granularity (with --recompute-method uniform), --sequence-parallel,
// --use-distributed-optimizer (--zero 1), --overlap-grad-reduce (--dp-overlap),
// --context-parallel-size (--cp), --cp-comm-type, --hierarchical-context-parallel-sizes,
// --expert-model-parallel-size (--ep),
// --virtual-pipeline-model-parallel-size, --recompute-activations, --recompute-num-layers 1,
// --ddp-bucket-size, --use-torch-fsdp2 (--framework fsdp), --tp-comm-overlap,
// --overlap-param-gather, and the model arguments of
// model_overrides.h. Megatron arguments without effect on time or memory are accepted by name
// (io/megatron_args.h: acceptExtras).

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <utility>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "io/nccl_options.h"
#include "io/model_overrides.h"
#include "plan/strategy.h"
#include "plan/strategy_space.h"

namespace evsim {

struct RunOptions {
  std::string model;
  std::string cluster;
  // --nccl-algo, --nccl-pxn-disable, --nccl-p2p-pxn-level, --nccl-cross-nic (io/nccl_options.h,
  // shared with `eventsim collective`): the cluster's topology.nccl keys, as NCCL's variables.
  NcclOptions nccl;
  std::string strategy_text;
  // A second and later --strategy: the plans `simulate` compares side by side (every other command
  // refuses them in strategy()).
  std::vector<std::string> more_strategy_texts;
  int tp = 0, pp = 0, dp = 0;
  int cp = 1;   // context parallel size C
  // Megatron's --cp-comm-type (one type, or a per-layer list whose entries must all agree) and
  // --hierarchical-context-parallel-sizes A R (a2a+p2p).
  std::vector<std::string> cp_comm_types = {"p2p"};
  std::vector<int> hierarchical_cp_sizes;
  int ep = 1;   // expert parallel size E
  int etp = 0;  // expert tensor-parallel size (0: M)
  int64_t micro_batch = 0;
  int64_t global_batch = 0;
  std::string schedule = "dapple";
  bool dp_overlap = false;
  bool overlap_param_gather = false;  // Megatron's --overlap-param-gather
  bool grad_reduce_in_bf16 = false;   // Megatron's --grad-reduce-in-bf16
  std::string grad_reduce_sync = "backward";  // --grad-reduce-sync (Strategy::grad_reduce_sync)
  int grad_reduce_queue = 0;                  // --grad-reduce-queue
  std::string moe_dispatcher_type = "alltoall";  // Megatron's --moe-token-dispatcher-type
  bool moe_enable_deepep = false;                // Megatron's --moe-enable-deepep
  bool moe_a2a_overlap = false;                  // Megatron's --overlap-moe-expert-parallel-comm
  bool tp_comm_overlap = false;       // Megatron's --tp-comm-overlap
  double dp_bucket_mb = 0;  // --dp-bucket-mb; 0: the framework's default (plan/ddp_buckets.h)
  int virtual_stages = 1;
  int microbatch_group = 0;  // --microbatch-group-size (N of the interleaved schedule; 0: P)
  std::string recompute = "none";
  int recompute_every = 0;  // --recompute-every N (torchtitan's per-layer selective checkpointing)
  std::string swiglu_kernel = "megatron";  // --swiglu-kernel megatron | xformers
  bool sequence_parallel = false;
  std::string tp_comm;  // --tp-comm allreduce | rs-ag (rs-ag: sequence parallelism)
  int zero_stage = 0;
  std::string offload = "none";
  bool distributed_optimizer = false;  // Megatron's --use-distributed-optimizer: ZeRO-1
  int layers_per_virtual_stage = 0;    // Megatron's --num-layers-per-virtual-pipeline-stage
  std::string recompute_method;        // Megatron's --recompute-method (uniform only)
  int recompute_num_layers = 0;        // Megatron's --recompute-num-layers (1 only)
  bool recompute_activations = false;  // Megatron's --recompute-activations: selective
  int megatron_virtual_stages = 0;     // Megatron's --virtual-pipeline-model-parallel-size
  int64_t ddp_bucket_params = 0;  // Megatron's --ddp-bucket-size (parameters; 0: --dp-bucket-mb)
  int64_t gpus = 0;                    // simulate --gpus: D = gpus / (M * P)
  bool allow_cross_node_tp = false;    // TP groups may straddle nodes (search's flag too)
  std::string stage_layers;            // --stage-layers 10,12,...: blocks per model chunk
  int first_stage_layers = 0;          // Megatron's --decoder-first-pipeline-num-layers
  int last_stage_layers = 0;           // Megatron's --decoder-last-pipeline-num-layers
  bool account_for_embedding = false;  // Megatron's --account-for-embedding-in-pipeline-split
  bool account_for_loss = false;       // Megatron's --account-for-loss-in-pipeline-split
  std::string framework = "megatron";  // --framework megatron | fsdp
  std::string attention_kernel;        // --attention-kernel fa2 | fa3 | cudnn (empty: default)
  std::string reshard = "default";     // --reshard-after-forward default | always | never
  std::string fsdp_wrap = "separate";  // --fsdp-wrap separate | root
  std::string torch_compile = "default";  // --torch-compile on | blocks | off | default (fsdp: off)
  std::string optimizer_impl = "fused";  // --optimizer-impl fused | foreach (for-loop refused)
  ModelOverrides overrides;
  const CLI::App* extras_app = nullptr;          // set by addMegatronExtras
  const CLI::Option* schedule_option = nullptr;  // --schedule: given or the default?
  std::string args_file;  // --args-file, for --help (expanded before parsing)
  // --overlap-slowdown on|off: off sets the device's overlap slowdown factors to 1 (compute beside
  // communication at full speed; modeler/overlap_slowdown.h), for ablations.
  std::string overlap_slowdown = "on";
  // --link-sharing on|off: off gives every transfer its standalone time even where it overlaps
  // others on a link (modeler/link_flows.h), for ablations.
  std::string link_sharing = "on";

  // Registers --model, --cluster (required) and the model overrides.
  void addModelOptions(CLI::App& app);
  // Registers --gpus N, from which D is derived (--tp and --pp default to 1, as in Megatron).
  void addGpusOption(CLI::App& app);
  // Registers --strategy / --tp --pp --dp, --micro-batch, --global-batch, --schedule, --dp-overlap,
  // --virtual-stages, --recompute, --sequence-parallel, --zero, --allow-cross-node-tp,
  // --stage-layers, and Megatron's names for them (see the header comment) including
  // --decoder-first/last-pipeline-num-layers.
  void addStrategyOptions(CLI::App& app, bool strategy_required);
  // Lets `app` collect the arguments it does not know, for acceptMegatronExtras: the commands a
  // Megatron launch line is pasted into (simulate, search, events).
  void addMegatronExtras(CLI::App& app);
  // Accepts the collected Megatron-LM arguments that change neither time nor memory, named in one
  // note on standard error; throws InputError naming any other unknown argument.
  void acceptMegatronExtras() const;
  // Registers --framework and --reshard-after-forward (addStrategyOptions does; search too).
  void addFrameworkOptions(CLI::App& app);
  // Sets the framework of `strategy` from the flags; with fsdp the ZeRO stage becomes FSDP's full
  // shard (3) where D x C >= 2 unless --zero was given (strategyViolation then names the clash).
  void applyFramework(Strategy& strategy) const;

  // Registers --overlap-slowdown on|off and --link-sharing on|off (simulate, search: every command
  // that times iterations).
  // Also registers --attention-kernel (the device-model options of simulate and search).
  void addOverlapSlowdownOption(CLI::App& app);

  // Throws InputError when --schedule names another schedule than the interleaved one that
  // `flag` (a Megatron chunk-count flag) implies.
  void requireInterleaved(const char* flag) const;
  // The model file with the command line's overrides applied.
  ModelConfig loadModel() const;
  // The cluster file, its device's overlap slowdown switched off by --overlap-slowdown off, its
  // link sharing by --link-sharing off, its attention kernel from --attention-kernel, else the
  // cluster file's, else the framework's (megatron: Transformer Engine's choice on Hopper,
  // cudnn; fsdp: PyTorch SDPA's flash backend, fa2). An explicit kernel the device file has no
  // fit for is an InputError; a framework default it lacks falls back to its fa2 fit.
  ClusterConfig loadCluster() const;
  // Strategy from the flags; throws InputError naming the flag (and for a repeated --strategy).
  // `model` turns Megatron's --num-layers-per-virtual-pipeline-stage into v.
  Strategy strategy(const ModelConfig& model) const;
  // One strategy per --strategy given (the same technique flags for each): simulate's comparison.
  std::vector<Strategy> strategies(const ModelConfig& model) const;
  // Throws InputError when the strategy is valid (strategyViolation) but its TP groups would cross
  // nodes of `cluster` and --allow-cross-node-tp was not given (search refuses the same).
  void checkTpPlacement(const ModelConfig& model, const ClusterConfig& cluster,
                        const Strategy& strategy) const;
  // The --gpus union (`eventsim events --gpus`, `eventprof --gpus`): the base strategy (global
  // batch, --dp-overlap) and every (M, P, D) for `gpus` GPUs at each of `micro_batches` ("1,2,4").
  // It spans plain GPipe/DAPPLE strategies, which share their events; a technique flag would be
  // ignored there, so it is refused (InputError) with the command that covers such a space.
  std::pair<Strategy, StrategySpace> unionSpace(int64_t gpus,
                                                const std::string& micro_batches) const;
  // The same options as a command line fragment ("--model x --cluster y --strategy 2M2P4D ...")
  // for `eventsim simulate`, or for eventprof, which measures what the run does and so takes none
  // of the modeller's switches (--nccl-algo, the PXN keys, --overlap-slowdown, --link-sharing).
  enum class CommandFor { kSimulate, kEventprof };
  std::string commandLine(const Strategy& strategy,
                          CommandFor target = CommandFor::kSimulate) const;

 private:
  // The modeller's own switches that were given, as flags (" --nccl-algo ring ...").
  std::string modellerSwitches() const;
  // strategy() for one --strategy text (empty: from --tp/--pp/--dp or --gpus).
  Strategy strategyOf(const ModelConfig& model, const std::string& strategy_text) const;
};

// Resolves a config argument: an existing file, or configs/<kind>/<name>.yaml.
std::string resolveConfigPath(const std::string& argument, const std::string& kind);

}  // namespace evsim

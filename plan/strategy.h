#pragma once
// A hybrid parallel strategy: tensor (model) parallel M, pipeline P, data parallel D, written
// "2M4P2D", plus micro-batch size b, global batch B and the pipeline schedule. Each pipeline runs
// m = B / (b * D) micro-batches per iteration. Context parallelism C splits every sequence over C
// ranks (M*C*P*D GPUs); expert parallelism E shards the experts of MoE blocks over E ranks of the
// DP group (Megatron-LM's rank order tp-cp-ep-dp-pp, rank_layout.h).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "ops/cp_comm.h"
#include "ops/recompute.h"
#include "plan/strategy_rule.h"

namespace evsim {

// kInterleaved is Megatron's interleaved 1F1B: each device holds `virtual_stages` model chunks.
// kZbh1 / kZbh2 are the zero-bubble schedules of Qi et al. (ICLR'24), which split each backward
// into input-gradient (B) and weight-gradient (W) tasks; kZbv is their V schedule (two chunks per
// device on the V layout, plan/pipeline_layout.h). kDualPipeV is DeepSeek's DualPipeV (DualPipe
// cut in half: the V layout, forward and backward of two micro-batches overlapped as one fused
// task). The orders are plan/schedules/.
enum class Schedule { kGpipe, kDapple, kInterleaved, kZbh1, kZbh2, kZbv, kDualPipeV, kFile };

// kFile runs the schedule file loaded by parseSchedule (plan/schedules/schedule_file.h).
// "gpipe", "dapple", "interleaved", "zbh1", "zbh2", "zbv", "dualpipev", or the loaded file's path
std::string_view scheduleName(Schedule schedule);
// Accepts gpipe, dapple, 1f1b, interleaved, zbh1, zbh2, zbv and dualpipev (any case), or a path
// ending in .csv, which it loads and installs as Schedule::kFile (an InputError when the file is
// bad); throws InputError naming `flag` otherwise.
Schedule parseSchedule(std::string_view text, std::string_view flag = "--schedule");

// Offload to host memory over the host link (the cluster's node.host_link / host_memory):
//   optimizer: the optimizer state (fp32 master weights and Adam moments) lives in host memory and
//     the host CPU steps it (ZeRO-Offload, Megatron's --optimizer-cpu-offload): after the gradient
//     sync each rank copies its gradient shard to the host, runs CPU Adam, and copies the updated
//     weights back;
//   activations: each layer's saved activations go to host memory as soon as the next layer starts
//     and come back while the layer after it in the backward runs (Megatron's --cpu-offloading),
//     so a device holds about two layers' activations instead of every micro-batch in flight;
//   both: the two together.
enum class Offload { kNone, kOptimizer, kActivations, kBoth };
std::string_view offloadName(Offload offload);  // "none", "optimizer", "activations", "both"
Offload parseOffload(std::string_view text, std::string_view flag = "--offload");
inline bool offloadsOptimizer(Offload o) { return o == Offload::kOptimizer || o == Offload::kBoth; }
inline bool offloadsActivations(Offload o) {
  return o == Offload::kActivations || o == Offload::kBoth;
}

// Which training framework lays out the model states (modeler/memory_model.h):
//   megatron: Megatron-LM: 16-bit weights, fp32 main gradients in contiguous DDP buffers, fp32
//     master weights and Adam moments (sharded with --use-distributed-optimizer, ZeRO-1);
//   fsdp: PyTorch FSDP2 as torchtitan runs it: fp32 parameters, gradients and Adam moments all
//     sharded over D x C (full shard), each layer's parameters all-gathered in the model dtype
//     (fp8 for linear weights with Float8 all-gather) before its forward and backward and its
//     gradients reduce-scattered in fp32 after its backward (the events of ZeRO-3).
enum class Framework { kMegatron, kFsdp };
std::string_view frameworkName(Framework framework);  // "megatron", "fsdp"
Framework parseFramework(std::string_view text, std::string_view flag = "--framework");

// FSDP's reshard-after-forward (torchtitan's fsdp_reshard_after_forward): free each layer's
// gathered parameters after its forward and gather them again for its backward (always), keep
// them from forward to backward (never), or torchtitan's default: always without pipeline
// parallelism, never with it (the pipeline runs many micro-batches between a forward and its
// backward, and PyTorch's pipelining keeps the gathered parameters and unsharded gradients until
// the last micro-batch's backward).
enum class Reshard { kDefault, kAlways, kNever };
std::string_view reshardName(Reshard reshard);  // "default", "always", "never"
Reshard parseReshard(std::string_view text, std::string_view flag = "--reshard-after-forward");

// How torchtitan wraps a model part in FSDP2 groups beside one group per transformer block
// (fully_shard on each block, then on the part):
//   separate: torchtitan since 2025-07-28 (83e694105, "Improve reshard_after_forward logic";
//     torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76c6, 2026-08): the token
//     embedding a group of its own (resharded after the forward per the policy), [final norm,
//     output] a group of its own resharded after the forward only under "always" (so kept
//     gathered from its forward to its backward, then resharded and reduce-scattered at its own
//     post-backward), every block alike; the part's root holds no parameters. With tied
//     embeddings [embedding, norm, output] is one group, resharded only under "always".
//   root: torchtitan before (9dec370, its Dec 2024 benchmarks): the embedding, final norm and
//     output are the root's own parameters, gathered at the root's pre-forward, never resharded
//     after the forward (FSDP2 sets the root group's post_forward_mesh_info = None) and
//     reduce-scattered in the root's final callback after the whole backward; without PP the
//     default policy keeps the last block gathered after its forward.
// Default separate: what current torchtitan runs (plan/plan_core.cpp has the transfers,
// modeler/memory_components.h the bytes).
enum class FsdpWrap : uint8_t { kSeparate, kRoot };
std::string_view fsdpWrapName(FsdpWrap wrap);  // "separate", "root"
FsdpWrap parseFsdpWrap(std::string_view text, std::string_view flag = "--fsdp-wrap");

// torch.compile under the fsdp framework (torchtitan's compile.enable; --torch-compile): on, the
// blocks and the loss run Inductor's fused kernels (the fused op lists of ops/layer_ops.h); blocks,
// the blocks compiled and the loss eager (torchtitan's training.compile before 2025-04-02, commit
// bbb1b616e: its train.py left `loss_fn = torch.compile(loss_fn)` commented out, "compiling loss
// function causes CUDA errors", so its published 2024-12 benchmarks ran the loss eager); off,
// eager PyTorch's kernels (ops/eager_ops.h). Default: off for fsdp (torchtitan's default); Megatron
// runs its own fused kernels and takes no setting.
enum class TorchCompile { kDefault, kOn, kOff, kBlocks };
std::string_view torchCompileName(TorchCompile compile);  // "default", "on", "off", "blocks"
TorchCompile parseTorchCompile(std::string_view text, std::string_view flag = "--torch-compile");

// The optimizer step's implementation (torchtitan's optimizer.implementation, which becomes the
// fused / foreach arguments of torch.optim.AdamW; plan/optimizer_step.h has the kernels):
//   fused: one _fused_adamw_ multi-tensor kernel (torchtitan's default since 2025-02-24, 6e4988550;
//     Megatron's only step, Apex / Transformer Engine's FusedAdam, the "adam" event);
//   foreach: _multi_tensor_adamw's eight foreach kernels (torchtitan's default before, so its
//     Dec 2024 benchmarks ran it);
//   for-loop: _single_tensor_adamw, the foreach kernels once per parameter tensor (refused: the
//     per-tensor launches need the model's tensor list, which the plan does not hold).
enum class OptimizerImpl : uint8_t { kFused, kForeach, kForLoop };
std::string_view optimizerImplName(OptimizerImpl impl);  // "fused", "foreach", "for-loop"
OptimizerImpl parseOptimizerImpl(std::string_view text,
                                 std::string_view flag = "--optimizer-impl");

// Bounds on the batch sizes and micro-batches of a strategy (validateStrategy): far beyond any run,
// they keep the work of one simulated iteration bounded.
inline constexpr int64_t kMaxMicroBatch = int64_t{1} << 20;
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;
inline constexpr int64_t kMaxMicroBatches = int64_t{1} << 16;
// GPUs of one strategy, M x P x D: 16.7 M, over 100x the largest cluster trained on today.
inline constexpr int64_t kMaxStrategyGpus = int64_t{1} << 24;

// Megatron's MoE token dispatcher (--moe-token-dispatcher-type): alltoall (NCCL's all-to-all of
// each token's k routed copies over the EP group) or flex with --moe-enable-deepep (DeepEP's
// normal kernels: each token once per node over RDMA, then over NVLink to its experts' GPUs;
// ops/moe_dispatch.h).
// When ZeRO-2's per-micro-batch gradient reductions (plan/zero2_buckets.h) are waited for:
// kBackward at the end of each backward that issued them (DeepSpeed's epilogue, FSDP2's and
// Megatron-FSDP's post-backward wait); kStep only before the optimizer step (the Llama 3 paper's
// "asynchronously reducing gradients": each bucket queued on the DP stream as it closes, the
// compute stream going on with later micro-batches; modeler/timing_engine.h).
enum class GradReduceSync : uint8_t { kBackward, kStep };
std::string_view gradReduceSyncName(GradReduceSync sync);
// "backward" | "step"; throws InputError naming `flag` otherwise.
GradReduceSync parseGradReduceSync(std::string_view text, std::string_view flag);

enum class MoeDispatcher { kAllToAll, kDeepEp };
std::string_view moeDispatcherName(MoeDispatcher dispatcher);  // "alltoall", "deepep"

struct Strategy {
  int tp = 1;  // M
  int pp = 1;  // P
  int dp = 1;  // D
  int cp = 1;  // C: context parallel (sequence split over C ranks)
  CpComm cp_comm = CpComm::kP2p;  // how the C ranks exchange attention's inputs (ops/cp_comm.h)
  // a2a+p2p: the first level of --hierarchical-context-parallel-sizes (the a2a group of that many
  // consecutive CP ranks; the ring runs over C / cp_a2a). 0 otherwise.
  int cp_a2a = 0;
  int ep = 1;  // E: expert parallel, inside the DP group (divides D)
  // Expert tensor parallel (Megatron's --expert-tensor-parallel-size): each routed expert's FFN
  // is split over this many ranks, apart from the dense layers' M; 0 means M, Megatron's default.
  // Per pipeline stage and CP rank, the M x D ranks are regrouped as ETP x E x (expert DP),
  // ETP innermost (parallel_state's expert rank generator), so the expert-data-parallel group
  // holds M x D x C / (ETP x E) ranks (rank_layout.h).
  int etp = 0;
  int64_t micro_batch = 1;   // b
  int64_t global_batch = 1;  // B
  Schedule schedule = Schedule::kDapple;
  // Data-parallel gradient all-reduce in buckets overlapped with the last backward (PyTorch DDP).
  bool dp_overlap = false;
  // Bucket size asked for (--dp-bucket-mb, --ddp-bucket-size), or 0: the framework's default, and
  // where buckets close at all (plan/ddp_buckets.h: Megatron's max(40M, 1M x D x C) parameters on
  // the first chunk of pipeline rank 0, one bucket per chunk elsewhere; PyTorch DDP's 25 MiB).
  int64_t dp_bucket_bytes = 0;
  int virtual_stages = 1;  // v model chunks per device; > 1 only with Schedule::kInterleaved
  // N: the interleaved schedule's contiguous micro-batches per chunk (Megatron's
  // --microbatch-group-size-per-virtual-pipeline-stage, the Llama 3 paper's N); 0 means P.
  int microbatch_group = 0;
  Recompute recompute = Recompute::kNone;
  // torchtitan's per-layer selective checkpointing (selective_ac_option = "N", its apply_ac before
  // 2026-03): with recompute kFull and N > 1 only every N-th block a rank builds is checkpointed,
  // counted over the rank's blocks in chunk order from 1 (a per-process counter; block j when
  // j % N == 0); the others keep all their activations. 0 or 1: every block (plan/
  // layer_checkpoint.h).
  int recompute_every = 0;
  // The dense SwiGLU MLP's saved tensors (--swiglu-kernel): false is Megatron-LM's (bias_swiglu
  // keeps its input, the fc1 output; fc2 keeps its own input, the product silu(gate) * up), true is
  // xformers' fused SwiGLU (xformers.ops.SwiGLU, SwiGLUFusedOp: it keeps the fc1 outputs only and
  // its backward, silu_bw_fused, recomputes the product for fc2's weight gradient), Meta's public
  // kernel. Not recomputation in Megatron's sense: the activations it saves are the fc1 outputs.
  bool swiglu_recompute_product = false;
  // Megatron's sequence parallelism: layernorm/dropout regions split along the sequence over the
  // TP group; each TP all-reduce becomes a reduce-scatter plus an all-gather.
  bool sequence_parallel = false;
  // ZeRO stage over the DP group: 0 off, 1 optimizer state (Megatron's distributed optimizer),
  // 2 + gradients, 3 + parameters.
  int zero_stage = 0;
  Offload offload = Offload::kNone;
  // Transformer blocks per model chunk (P*v entries, in virtual-stage order), or empty for the
  // FLOP-balanced split. Large runs shorten the first and last stages, which also carry the
  // embedding and the loss (Megatron's --decoder-first/last-pipeline-num-layers).
  std::vector<int> stage_layers;
  Framework framework = Framework::kMegatron;
  Reshard reshard = Reshard::kDefault;  // FSDP only (strategyViolation)
  TorchCompile torch_compile = TorchCompile::kDefault;  // FSDP only (strategyViolation)
  // Megatron's --tp-comm-overlap (Transformer Engine's userbuffers, needs sequence parallelism):
  // the TP all-gather before QKV and FC1 and the one before the proj and FC2 dgrad run as a ring
  // exchange beside their GEMM's chunks, the reduce-scatter after proj and FC2 pipelined beside
  // theirs, and in the backward the QKV / FC1 input re-gather beside the dgrad and the input
  // gradient's reduce-scatter beside the wgrad (ops/layer_ops.h; docs/TECHNIQUES.md).
  bool tp_comm_overlap = false;
  // Megatron's --overlap-param-gather (distributed optimizer with --overlap-grad-reduce): the
  // parameter all-gather after the optimizer step is deferred to the next iteration's first
  // forward of each chunk, bucket by bucket beside it (modeler/timing_engine.h).
  bool overlap_param_gather = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // Megatron's --overlap-moe-expert-parallel-comm (its combined 1F1B; DeepSeek-V3's overlap of
  // one micro-batch's all-to-alls with another's compute): in the interleaved schedule's steady
  // state each forward runs fused with the backward after it, as DualPipeV's F&B tasks do
  // (plan/task_graph.h, modeler/timing_engine.h).
  bool moe_a2a_overlap = false;
  // Megatron's --grad-reduce-in-bf16: the DP gradient buffer and its all-reduce / reduce-scatter
  // stay in bf16 (2 bytes a parameter) instead of the fp32 main gradients --bf16 implies
  // (plan/optimizer_step.h). NeMo's and Megatron-Bridge's performance recipes set
  // grad_reduce_in_fp32 = False for their FP8 and MoE runs.
  bool grad_reduce_in_bf16 = false;
  // AdamW's implementation (optimizer_step.h): fused by default, as torchtitan and Megatron run it;
  // foreach only under FSDP (strategyViolation). One byte, beside the flag above.
  OptimizerImpl optimizer_impl = OptimizerImpl::kFused;
  // FSDP2's grouping of the embedding, final norm and output (FsdpWrap); FSDP only
  // (frameworkFlagViolation). One byte, beside the one above.
  FsdpWrap fsdp_wrap = FsdpWrap::kSeparate;
  // --grad-reduce-sync (GradReduceSync; ZeRO-2 only, strategyViolation) and, under kStep,
  // --grad-reduce-queue K: the most reductions pending on a device before its compute stream
  // waits for the oldest (0: no bound).
  GradReduceSync grad_reduce_sync = GradReduceSync::kBackward;
  int grad_reduce_queue = 0;
  bool reducesAtStep() const { return grad_reduce_sync == GradReduceSync::kStep; }

  // The plain M/P/D strategy with batch sizes and a schedule, every technique off.
  static Strategy of(int tp, int pp, int dp, int64_t micro_batch, int64_t global_batch,
                     Schedule schedule = Schedule::kDapple) {
    Strategy s;
    s.tp = tp, s.pp = pp, s.dp = dp;
    s.micro_batch = micro_batch, s.global_batch = global_batch;
    s.schedule = schedule;
    return s;
  }

  int64_t gpus() const { return int64_t{tp} * cp * pp * dp; }
  // Ranks that hold replicas of the dense weights: D x C (Megatron's data-parallel group with
  // context parallelism), over which dense gradients are reduced and ZeRO shards.
  int gradGroupSize() const { return dp * cp; }
  // The expert tensor-parallel size in effect (etp, or M when unset).
  int expertTp() const { return etp > 0 ? etp : tp; }
  // Ranks of the CP all-to-all (C for a2a, cp_a2a for a2a+p2p, 1 otherwise) and of the ring
  // (C for p2p, C / cp_a2a for a2a+p2p, 1 otherwise).
  int cpA2aSize() const { return evsim::cpA2aSize(cp_comm, cp, cp_a2a); }
  int cpRingSize() const { return evsim::cpRingSize(cp_comm, cp, cp_a2a); }
  // Ranks that hold replicas of one expert shard: M x D x C / (ETP x E) (Megatron's
  // expert-data-parallel group; D x C / E when ETP = M).
  int expertGradGroupSize() const { return tp * dp * cp / (expertTp() * ep); }
  // Whether the routed experts' gradients are synchronised on a group of their own (E > 1, or an
  // expert TP other than M): otherwise they are reduced with the dense ones over D x C.
  bool expertsSyncApart() const { return ep > 1 || expertTp() != tp; }
  int64_t microBatches() const { return global_batch / (micro_batch * dp); }
  int microbatchGroup() const { return microbatch_group > 0 ? microbatch_group : pp; }
  // Whether a layer's parameters sharded over the DP group (ZeRO-3, FSDP) are gathered again for
  // its backward: DeepSpeed's ZeRO-3 always; FSDP by its policy (Reshard).
  bool reshardsAfterForward() const {
    if (framework != Framework::kFsdp || reshard == Reshard::kAlways) return true;
    return reshard == Reshard::kDefault && pp == 1;
  }
  // FSDP under pipeline parallelism without reshard-after-forward (torchtitan's default with PP):
  // PyTorch's pipelining (torch/distributed/pipelining/stage.py) turns gradient sync and reshard
  // after backward off until a chunk's last micro-batch, so the chunk's parameters are gathered
  // once per step and its gradients reduce-scattered once, after its last backward.
  bool fsdpSyncsOncePerStep() const {
    return framework == Framework::kFsdp && pp > 1 && !reshardsAfterForward();
  }
  // FSDP2 with the embedding, final norm and output in the part's root group (FsdpWrap::kRoot).
  bool fsdpRootGroup() const {
    return framework == Framework::kFsdp && fsdp_wrap == FsdpWrap::kRoot;
  }
  // Whether [final norm, output] is gathered again for its backward: FSDP resharding after the
  // forward, and under the separate wrapping only when asked always (torchtitan's
  // reshard_after_forward=policy == "always" for that group); ZeRO-3 as every layer.
  bool reshardsHeadAfterForward() const {
    if (framework != Framework::kFsdp) return true;
    if (fsdp_wrap == FsdpWrap::kRoot) return false;
    return reshard == Reshard::kAlways;
  }
  // Whether the last transformer block is gathered again for its backward: as every block, but
  // under the root wrapping torchtitan 9dec370's default policy keeps it (reshard_after_forward =
  // layer_id < n - 1 without PP).
  bool reshardsLastBlockAfterForward() const {
    if (fsdpRootGroup() && reshard == Reshard::kDefault) return false;
    return reshardsAfterForward();
  }
  // Whether the blocks' norms, RoPE and SwiGLU run as eager PyTorch's kernels: FSDP (torchtitan)
  // without torch.compile.
  bool eagerKernels() const {
    return framework == Framework::kFsdp && torch_compile != TorchCompile::kOn &&
           torch_compile != TorchCompile::kBlocks;
  }
  // Whether the loss runs as eager PyTorch's kernels: FSDP unless the loss is compiled too.
  bool eagerLoss() const {
    return framework == Framework::kFsdp && torch_compile != TorchCompile::kOn;
  }
  std::string name() const;  // "2M4P2D"
  // The techniques beyond M, P, D, one word each in one order, e.g. " dp-overlap cp2 ep4 v3
  // rc=selective sp zero1" ("" if none). kShort is the search table's spelling of the same words
  // (" ov cp2 ep4 v3 rc=sel sp z1").
  enum class TechniqueStyle { kLong, kShort };
  std::string techniques(TechniqueStyle style = TechniqueStyle::kLong) const;
  // Every field: PlanCache keys plan cores by a strategy with the finishing-only fields reset.
  bool operator==(const Strategy&) const = default;
};

// Parses "2M4P2D" (any case, any order of the three parts, each once). Throws InputError naming
// `flag` and the text.
void parseStrategyText(std::string_view text, Strategy& strategy,
                       std::string_view flag = "--strategy");

// Why `strategy` cannot run `model` on `cluster`, or nullopt when it can. Names the flag, the value
// and the rule broken, e.g. "--strategy 3M1P1D: M=3 does not divide num_heads=16".
std::optional<std::string> strategyViolation(const ModelConfig& model, const ClusterConfig& cluster,
                                             const Strategy& strategy);
// The same check without the message: the rule broken (the first, as strategyViolation names it)
// and its key (plan/strategy_rule.h). What a search asks of every candidate.
std::optional<StrategyViolation> checkStrategy(const ModelConfig& model,
                                               const ClusterConfig& cluster,
                                               const Strategy& strategy);
// TP groups that would straddle nodes (M not dividing a node's GPUs): slow over the network and
// not what Megatron deployments do, so refused unless asked for (--allow-cross-node-tp), by search
// and by the commands that take one strategy alike.
std::optional<std::string> crossNodeTpViolation(const ClusterConfig& cluster, const Strategy& s);
std::optional<StrategyViolation> checkCrossNodeTp(const ClusterConfig& cluster, const Strategy& s);
// The message of `violation`, which checkStrategy or checkCrossNodeTp returned for `strategy`
// (formatted where a user reads it: a search's rows and its invalid candidates' examples).
std::string violationMessage(const ModelConfig& model, const ClusterConfig& cluster,
                             const Strategy& strategy, const StrategyViolation& violation);

// Throws InputError with strategyViolation's message.
void validateStrategy(const ModelConfig& model, const ClusterConfig& cluster,
                      const Strategy& strategy);

}  // namespace evsim

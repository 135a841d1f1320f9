#pragma once
// Everything each device runs in one training iteration of (model, cluster, strategy), in the
// compact form the modeler and the profiler consume:
//   - the unique events, with how often each runs over all devices (`events`);
//   - per model chunk (virtual pipeline stage), the op list of one micro-batch forward and backward
//     on one device (all M TP ranks of a stage run the same list), its gradient reduction and
//     optimizer step. Without interleaving (v = 1) chunk k is device stage k. With Megatron's
//     interleaved schedule the layers are split into P*v chunks; chunk k runs on device stage k % P
//     as that device's chunk k / P, so device stage s holds chunks s, s + P, ..., s + (v-1)P;
//   - pipeline classes: DP replicas whose stage-to-stage transfers have the same placement, so the
//     modeler simulates one pipeline per class instead of D.
//
// Counting convention: `count` is the number of executions over all devices; a collective counts
// once per participating rank, a point-to-point transfer twice (its send and its receive). Each
// chunk's forward/backward ops run m times on each of the M*D devices of its device stage, its
// optimizer and gradient sync once per device; every chunk boundary carries m transfers per TP
// rank and replica, so interleaving multiplies the P2P counts by (P*v - 1) / (P - 1).

#include <cstdint>
#include <optional>
#include <vector>

#include "config/cluster_config.h"
#include "events/event_table.h"
#include "config/model_config.h"
#include "ops/op_list.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_cache.h"
#include "plan/rank_layout.h"
#include "plan/strategy.h"

namespace evsim {

// With --dp-overlap, a bucket of gradients all-reduced as soon as the backward op that completes it
// has run (during the last micro-batch's backward).
struct GradBucket {
  int event = -1;           // all-reduce, or reduce-scatter under ZeRO 1/2
  int ready_after_op = -1;  // index into StagePlan::backward
  int64_t bytes = 0;
  // The routed experts' gradients under expert parallelism, reduced over the expert-data-parallel
  // group (D*C/E ranks) instead of the DP group: one last bucket after the backward.
  bool expert = false;
};

// With --overlap-param-gather, a bucket of updated parameters all-gathered over the DP group
// beside the chunk's first forward of the next iteration (the grad buckets' layout, in forward
// order): that forward waits for it before op `needed_before_op`. FSDP under PP
// (Strategy::fsdpSyncsOncePerStep) has one per fully_shard unit (embedding, block, head; a routed
// experts' share a second one over the expert-data-parallel group), gathered the same way.
struct ParamGatherBucket {
  int event = -1;             // all-gather
  int needed_before_op = 0;   // index into StagePlan::forward: the bucket's first parameter use
  int64_t bytes = 0;
};

struct StagePlan {
  int stage = 0;         // virtual stage (model chunk) index k in [0, P*v)
  int device_stage = 0;  // k % P: the pp coordinate of the devices that run it
  int chunk = 0;         // k / P: which of that device's v chunks it is
  int first_layer = 0;   // transformer blocks [first_layer, first_layer + num_layers)
  int num_layers = 0;
  bool has_embedding = false;
  bool has_head = false;
  OpList forward;  // one micro-batch, one device
  OpList backward;
  OpList optimizer;                  // once per iteration (under ZeRO on the 1/D parameter shard)
  int64_t parameters = 0;            // on one device of the stage (its TP shard)
  int64_t expert_parameters = 0;     // the part of `parameters` in routed experts (EP shard)
  int64_t activation_bytes_out = 0;  // sent to the next chunk per micro-batch (0 on the last)
  // Gradient synchronisation over D (grad-sync phase, dp-comm stream), at most one of the two
  // first forms: ZeRO 0 all-reduces, ZeRO 1/2 reduce-scatter (full-buffer bytes), then the
  // optimizer steps on its 1/D shard, then `dp_allgather` gathers the updated parameters. With
  // dp_overlap the all-reduce / reduce-scatter becomes `dp_buckets`. ZeRO-3 has none of these: its
  // per-layer parameter all-gathers and gradient reduce-scatters are ops of `forward` / `backward`
  // on the dp-comm stream (blocking inside the task, no prefetch: a conservative simplification).
  // Each chunk syncs its own gradients and steps its own optimizer (Megatron wraps every chunk in
  // its own DDP; Adam's cost is linear in parameters).
  int dp_allreduce = -1;       // ZeRO 0 gradient all-reduce when not overlapped (-1: none)
  int dp_reduce_scatter = -1;  // ZeRO 1/2 gradient reduce-scatter when not overlapped
  int dp_allgather = -1;       // ZeRO 1/2 parameter all-gather after the optimizer step
  // Under expert parallelism (E > 1) the routed experts' gradients are not in the collectives
  // above: they are reduced over the expert-data-parallel group, after them (-1: none; with
  // dp_overlap the last of dp_buckets instead), and gathered after the optimizer under ZeRO 1/2.
  int expert_grad_sync = -1;
  int expert_allgather = -1;
  std::vector<GradBucket> dp_buckets;  // with dp_overlap and D > 1, in backward order
  // ZeRO-2 under --grad-reduce-sync step (plan/zero2_buckets.h: deferZero2Reductions): the
  // bucket reductions taken out of `backward`, each issued on the DP stream after its op of every
  // micro-batch's gradient task (bucketIssueOp, task_graph.h) and waited for only before the
  // optimizer step; in backward order, a bucket's dense reduction before its experts'.
  std::vector<GradBucket> micro_batch_buckets;
  // With overlap_param_gather (ZeRO 1/2 and DP overlap): dp_allgather and expert_allgather are -1
  // and these buckets (the dense ones as dp_buckets, the experts' one more) gather instead; FSDP
  // under PP: one per unit (ParamGatherBucket).
  std::vector<ParamGatherBucket> param_buckets;
  // The event of the non-overlapped gradient collective (all-reduce or reduce-scatter), or -1.
  int gradSyncEvent() const { return dp_allreduce >= 0 ? dp_allreduce : dp_reduce_scatter; }
  Placement tp_group;
  Placement dp_group;         // D x C ranks (dense gradients)
  Placement expert_dp_group;  // D x C / E ranks (routed experts' gradients)
};

struct PipelineClass {
  std::vector<int> replicas;  // DP indices that share these transfers
  // One boundary per consecutive chunk pair k -> k+1 (size P*v - 1), between the device stages
  // the pipeline layout puts them on (with looped v > 1 this includes the wrap from device stage
  // P-1 back to 0; the V layout's turn stays on one device and has no event).
  std::vector<int> forward_p2p;   // event of the activation send chunk k -> k+1 (-1: same device)
  std::vector<int> backward_p2p;  // event of the gradient send chunk k+1 -> k
};

struct IterationPlan {
  ModelConfig model;
  ClusterConfig cluster;
  Strategy strategy;
  int64_t micro_batches = 0;  // m per pipeline
  int64_t padded_vocab = 0;
  EventTable events;
  std::vector<StagePlan> stages;  // one per virtual stage (model chunk), P*v
  std::vector<PipelineClass> pipelines;
  int64_t op_executions = 0;  // sum of all event counts

  RankLayout layout() const { return RankLayout(strategy, cluster.gpus_per_node); }
  int deviceStages() const { return strategy.pp; }                          // P
  int virtualStages() const { return static_cast<int>(stages.size()); }     // P*v
  int chunksPerDevice() const { return virtualStages() / deviceStages(); }  // v
  // Which device stage and chunk each virtual stage runs on (the schedule's layout).
  PipelineLayout pipelineLayout() const {
    return evsim::pipelineLayout(strategy.schedule, deviceStages(), chunksPerDevice());
  }
  // The virtual stages device stage `device_stage` runs, in chunk order (size v).
  std::vector<int> deviceChunks(int device_stage) const;
  // Which pipeline class DP replica `dp` belongs to.
  int pipelineOf(int dp) const;
};

// Validates the strategy (InputError naming the rule) and builds the plan. `cache` (optional, for
// one model and cluster) shares stage partitions, group placements and plan cores (plan_core.h:
// plans that differ only in ZeRO stage 0/1/2, DP overlap, non-interleaved schedule, optimizer
// offload or global batch share their op lists) between plans; the plan is the same with or
// without it.
IterationPlan buildIterationPlan(const ModelConfig& model, const ClusterConfig& cluster,
                                 const Strategy& strategy, PlanCache* cache = nullptr);

// The first transformer block of each of the P*v model chunks, the blocks balanced by the FLOPs of
// their forward + backward ops, recomputation included (StagePlan::first_layer of the plan). No
// validation.
std::vector<int> stageFirstLayers(const ModelConfig& model, const Strategy& strategy,
                                  PlanCache* cache = nullptr);
// The same into `first`, reusing its storage: the closed-form tier asks once per class of
// candidates, and a vector handed out per call was a fifth of what it allocated there.
void stageFirstLayers(const ModelConfig& model, const Strategy& strategy, PlanCache* cache,
                      std::vector<int>& first);
// The parameters one device of a chunk holds, its TP shard (StagePlan::parameters): blocks
// [first_layer, end_layer), the embedding on the first chunk, the final norm and the LM head's own
// weight (untied, or the tied weight's copy when the embedding is on another chunk) on the last.
// Summed from the layers' op lists (layer_footprint.h); `cache` shares them between calls.
int64_t chunkParameters(const ModelConfig& model, const Strategy& strategy, int first_layer,
                        int end_layer, bool has_embedding, bool has_head,
                        PlanCache* cache = nullptr);
// The same from the strategy's footprint (strategyFootprint or cachedFootprint), for a caller
// that holds it already: the closed-form tier sums every chunk of a class without a PlanCache
// look-up (and its lock) per chunk (issue 34).
int64_t chunkParameters(const ModelConfig& model, const ModelFootprint& footprint, int first_layer,
                        int end_layer, bool has_embedding, bool has_head);
// The footprints of every layer kind under `strategy` (its b, M, SP and recomputation), computed
// once per shape in `cache`.
const ModelFootprint& cachedFootprint(const ModelConfig& model, const Strategy& strategy,
                                      PlanCache& cache);
// The ops of one optimizer step over `params` parameters (a rank's shard under ZeRO), in order: the
// GPU's Adam; or, offloading the optimizer, the fp32 gradients' copy to the host, the host's Adam
// and the updated weights' copy back in the model's dtype (ZeRO-Offload's step).
struct StepOp {
  Event event;
  Stream stream = Stream::kCompute;
  std::string_view name;
};
std::vector<StepOp> optimizerStepOps(int64_t params, DType model_dtype, Offload offload);
// With activation offload: after each layer's forward ops, a copy of its saved activations to the
// host beside the next layer's ops (the chunk's last layer in order, nothing left to hide it);
// before each layer's backward, their copy back beside the backward of the layer before it (the
// first in order). Called on a plan core's op lists, before any DDP bucket points into them (the
// buckets skip the host stream's copies). No validation.
void addActivationOffload(StagePlan& stage, DType dtype, EventTable& table);
// The worst TP and DP group placement of each device stage (RankLayout::worstTpGroup/DpGroup).
const PlanCache::Placements& stagePlacements(const Strategy& strategy, int gpus_per_node,
                                             PlanCache& cache);

}  // namespace evsim

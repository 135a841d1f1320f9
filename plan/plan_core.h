#pragma once
// The part of an iteration plan that ZeRO stages 0-2, DP overlap and the choice among the
// non-interleaved schedules (gpipe, dapple, zbh1, zbh2) leave unchanged, built once and shared by
// the candidates of a search that differ only in those (PlanCache::core):
//   - the chunk partition and, per chunk, its forward and backward op lists of one micro-batch,
//     parameters and TP / DP / expert-DP group placements;
//   - the pipeline classes with their P2P events.
// ZeRO-3 puts per-layer parameter gathers and gradient reduce-scatters into the op lists, so it
// has cores of its own (CoreKey's ZeRO-3 flag).
//
// buildIterationPlan = validate + core (cached or built) + finishPlan. finishPlan adds what
// depends on the rest of the strategy: each chunk's optimizer step, its gradient sync (one
// collective, or DDP buckets with overlap), ZeRO 1/2's parameter all-gathers, and every event's
// count (the global batch sets m). It interns events in the order a plan built in one pass would:
// per chunk its op lists' new events (activation offload's copies after the others), then its
// optimizer and gradient events; the P2P events last.
// So event indices, the event table and the op lists are the same whether the core was reused or
// not (tests/modeler/plan_reuse_test.cpp).

#include <cstdint>
#include <memory>
#include <vector>

#include "events/event_table.h"
#include "plan/iteration_plan.h"
#include "plan/layer_params.h"
#include "plan/layer_shape.h"
#include "plan/plan_cache.h"

namespace evsim {

struct PlanCore {
  // One per model chunk (P*v). Optimizer, gradient sync fields and buckets empty; op events index
  // `events`.
  std::vector<StagePlan> stages;
  // Per chunk: each layer's parameters on one rank (kEmbeddingLayer, the blocks, kHeadLayer with
  // the LM head's own weight), and the same without the routed experts' (the DDP buckets' share
  // under expert parallelism; equal to `layer_params` without it).
  std::vector<LayerParams> layer_params;
  std::vector<LayerParams> dense_params;
  // The op lists' events, then the P2P events, each in first-use order: chunk k's op lists first
  // use events [stage_events_end[k-1], stage_events_end[k]) (from 0 for k = 0); the P2P events
  // are those from stage_events_end.back() on.
  EventTable events;
  std::vector<int> stage_events_end;
  // Per event: its uses in all chunks' forward and backward lists (each runs m times on each of a
  // chunk's M*C*D devices), and its P2P sends + receives over the pipeline classes, per micro-batch
  // and TP x CP rank (x m x M x C). Counts are 0 in `events`; finishPlan multiplies these.
  std::vector<int64_t> op_uses;
  std::vector<int64_t> p2p_uses;
  std::vector<PipelineClass> pipelines;
};

// The ZeRO stage in effect: 0 over a DP x CP group of one rank (plan_core.cpp, finish_plan.cpp).
int effectiveZero(const Strategy& strategy);

// The key of `strategy`'s core (PlanCache::CoreKey): `strategy` with the fields only finishPlan
// reads reset: the ZeRO stage to 3, 2 or 0 (ZeRO-3's gathers and scatters and ZeRO-2's bucket
// reductions are in the op lists; ZeRO does nothing over a DP x CP group of one rank), and, but
// under ZeRO-2 (whose reductions they shape), DP overlap, bucket size and the gradient
// reduction's type; the global batch, AdamW's implementation, and a non-interleaved schedule to one of them.
// A new Strategy field is part of the key until it is reset here, which is right for any field
// that changes op lists, the partition or placements.
PlanCache::CoreKey planCoreKey(const Strategy& strategy);

// What `strategy`'s simulated timeline depends on: strategies with equal timing keys build plans
// with the same op lists, events, counts, placements, schedule and batch, so they simulate to the
// same timeline and summary (they differ in memory only; a search simulates one of them,
// pruned_search.cpp). Reset: selective recomputation to none when attention is fused (`flash_attention`: no s x s tensor is saved, so
// selective recomputation re-runs nothing and builds the same ops; layer_ops.h). Checked by
// tests/modeler/timing_key_test.cpp.
Strategy timingKey(const ModelConfig& model, const Strategy& strategy);

// The pipeline classes of `strategy`'s (M, P, D, C, E, ETP), cached in `cache`
// (PlanCache::PipelineClasses): the core's P2P events are over their pairs.
const PlanCache::PipelineClasses& pipelineClasses(const Strategy& strategy, int gpus_per_node,
                                                  PlanCache& cache);
// Bytes a chunk sends the next one per micro-batch (its P2P activation, and the gradient back),
// `next_layer` being the next chunk's first layer.
int64_t stageOutputBytes(const ModelConfig& model, const LayerShape& shape, int next_layer);

// Builds the core of a plan of `strategy` (valid for `model` and `cluster`: validateStrategy),
// sharing partitions, footprints and placements through `cache`.
std::shared_ptr<const PlanCore> buildPlanCore(const ModelConfig& model,
                                              const ClusterConfig& cluster,
                                              const Strategy& strategy, PlanCache& cache);

// Completes `plan` from `core`: `plan` has its model, cluster, strategy and micro_batches set and
// no events yet (its stages, if any, are a previous plan's, assigned over); `core` is
// planCoreKey(plan.strategy)'s.
void finishPlan(const PlanCore& core, IterationPlan& plan);

// Makes `plan` buildIterationPlan(plan.model, plan.cluster, strategy, &cache)'s, in place: `plan`
// is a plan built before for the same model and cluster (or one with only those set), which keep
// theirs (not copied again), and its stages' op lists and buckets and its pipeline classes keep
// their storage. A search's worker simulates plan after plan: fresh ones copied the cluster's
// device parameters and allocated every op list anew, most of it under the search heap's lock
// (bench/RESULTS.md, session 29, alloc29).
void rebuildIterationPlan(const Strategy& strategy, PlanCache& cache, IterationPlan& plan);

// The LM head GEMM has its own weight unless it is tied to the embedding on the same chunk
// (Megatron keeps a copy of a tied weight on the last stage when P > 1).
bool headOwnsOutputWeight(const ModelConfig& model, bool has_embedding);
// The last chunk's head parameters on one rank: the head's ops (final norm; multi-token
// prediction's depths), the output layer when it owns it, and multi-token prediction's copy of
// the embedding table when the embedding is on another chunk (as Megatron keeps one there).
int64_t headParameters(const ModelConfig& model, const ModelFootprint& footprint,
                       bool has_embedding);

}  // namespace evsim

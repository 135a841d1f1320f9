#pragma once
// The first tier of a pruned search: per valid candidate, from per-layer sums alone (no op list,
// no rank placement beyond the cached worst groups), its exact peak memory and a provable lower
// bound on the iteration time the full simulation would give.
//
// Memory: the memory model (memory_model.h) over the chunks' layers and parameters, the same
// function the plan's estimate calls, so fits/OOM are exactly the full path's. Under
// --grad-reduce-sync step simulate adds what its timeline's walk finds of the pending ZeRO-2
// buckets; here, without a timeline, the least first bucket of the device's chunks while it
// fills (DeviceChunkSums::pending_reductions, a plateau's), never more than the walk: a lower
// bound.
//
// Time bound, per device stage s (chunk c is virtual stage k = c*P + s; F_k, B_k the sums of the
// op times of one micro-batch's forward and backward of chunk k — compute, TP communication and,
// under ZeRO-3, the blocks' parameter gathers and gradient reduce-scatters, which run in the task
// between the layers' ops — which the host-issue recurrence can only lengthen):
//   work_s  = m * sum over s's chunks of (F_k + B_k)     (its tasks run one after another, each
//             timed as the simulation times it without host issue: op_offsets.h)
//   fill_s  = sum_{k < s} F_k   (micro-batch 0 must pass virtual stages 0..s-1 first)
//   drain_s = sum_{k < s} B_k   (s's last task is chunk 0's last backward; stages s-1..0 follow)
//   post_s  = s's gradient sync without overlap + optimizer steps (with optimizer offload: the
//             copies and the host's Adam) + ZeRO 1/2 all-gathers, each with its host issue time,
//             as the simulation charges them (under expert parallelism the dense parameters'
//             only: the experts' own sync can only add)
// Under a schedule with fused tasks (DualPipeV) and expert parallelism, work_s is halved: a fused
// task lasts max(compute, all-to-all), at least half its members' sum (timing_engine.h).
// With activation offload F_k and B_k are at least the sums of the task's copies out and in (they
// run one at a time on the host stream, and the task ends after the last).
//   bound = max_s max(fill_s + work_s + post_s, fill_s + work_s + drain_s + post_0)
// P2P sends (not under fused tasks): a lone task's send holds its device right after the task and
// the data arrives when it ends, so work_s also counts m x each of s's chunks' sends (the
// activation of chunk k < K-1, the gradient of chunk k > 0: each link's least issued time over
// the pipeline classes; none inside one device), fill_s the activation sends of links 0..s-1 and
// drain_s the gradient sends of links 0..s-2 (s's own is in work_s).
// Bubbles beyond fill/drain, exposed overlapped buckets, link sharing's stretches and the
// embedding's and the head's ZeRO-3 transfers (left out) only add time, so the simulated iteration
// time is never below the bound. When the cost model lacks an event the bound is 0 (the candidate is never pruned; the
// full path reports the missing events).
//
// Incremental: candidates that differ only in ZeRO stage, DP overlap and offload (the
// enumeration's innermost dimensions, so they come one after another) share their chunks' layers,
// memory inputs and F_k, B_k; a Workspace keeps them for the last such class it saw, and memoises
// layer times and step costs for one thread without a lock (the layer times computed once for
// all workspaces: closed_form_facts.h).

#include <cstdint>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/cost_model.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_cache.h"
#include "plan/strategy.h"

namespace evsim {

struct ClosedFormResult {
  int64_t micro_batches = 0;
  int64_t peak_memory_bytes = 0;
  int peak_memory_stage = 0;
  bool fits = false;
  // False when an out-of-memory candidate's peak_memory_bytes is a lower bound of its peak
  // (evaluate's `exact_peak_below`).
  bool peak_exact = true;
  double lower_bound_us = 0;  // of the simulated iteration time; 0 when it cannot be bounded
};

class ClosedFormTier {
 public:
  // All references must outlive the tier; `cache` is shared with the plans the search builds.
  ClosedFormTier(const ModelConfig& model, const ClusterConfig& cluster, const CostModel& costs,
                 double headroom, PlanCache& cache);
  ~ClosedFormTier();

  // One thread's memo (see above). Results do not depend on what a workspace saw before: every
  // value it keeps is a pure function of its key.
  class Workspace {
   public:
    Workspace();
    ~Workspace();
    Workspace(Workspace&&) noexcept;
    Workspace& operator=(Workspace&&) noexcept;
    // Frees what the workspace keeps (its memos start again empty).
    void release();
    struct State;  // closed_form_facts.h

   private:
    friend class ClosedFormTier;
    std::unique_ptr<State> state_;
  };

  // Frees the activation states and layer times the workspaces share (below); a later evaluate
  // computes them again.
  // Not while another thread evaluates.
  void releaseShared() const;

  // `strategy` must be valid (strategyViolation is empty). Thread-safe across workspaces; a
  // workspace serves one thread at a time. An out-of-memory candidate's peak is exact only below
  // `exact_peak_below`: from there it may be a lower bound of it (peak_exact false;
  // estimateMemoryPeak's `bound_from`), which spares the full estimate of most OOM candidates to
  // a caller that keeps only the least OOM peak. Whether the candidate fits is the same.
  ClosedFormResult evaluate(const Strategy& strategy, Workspace& workspace,
                            int64_t exact_peak_below = std::numeric_limits<int64_t>::max()) const;
  ClosedFormResult evaluate(const Strategy& strategy) const;  // with a workspace of its own

  // Op-time sums of one micro-batch of a block of each kind, the embedding and the head.
  struct LayerTimes {
    double self_forward = 0, self_backward = 0;
    double cross_forward = 0, cross_backward = 0;
    double moe_forward = 0, moe_backward = 0;  // a block whose MLP is the mixture of experts
    double embedding_forward = 0, embedding_backward = 0;
    double head_forward = 0, head_backward = 0;
    bool complete = true;  // every op had a cost
    // Some backward op runs beside the ops after it (TP comm overlap, a CP ring step, an expert
    // all-to-all): an op inserted into the list may take a window's slot instead of adding its
    // whole time (the ZeRO-2 bound, closed_form_bound.cpp).
    bool backward_windows = false;
  };
  // The groups whose placement changes a layer's communication times, on one device stage: TP,
  // the CP ring pair, EP and (ZeRO-3's gathers) the DP group.
  struct StageGroups {
    Placement tp, cp_ring, ep, dp, etp;
    Placement cp_group;  // the CP collectives' group (--cp-comm-type a2a, allgather, a2a+p2p)
  };
  // (b, M, SP, recompute, C, E, ZeRO-3 (0/1), framework, reshard, and the TP, CP ring, EP and DP
  // placements as (group size, nodes, ranks per node); the DP group is all 1 without ZeRO-3;
  // then the expert TP size and its group's placement, --tp-comm-overlap and the MoE
  // dispatcher, the kernels the op lists run: 0 Megatron's, 1 FSDP compiled, 2 FSDP eager, 3 FSDP
  // compiled blocks with an eager loss; then
  // the CP collectives' group, --cp-comm-type and the a2a+p2p a2a size).
  using PlacementKey = std::tuple<int, int, int>;
  using LayerKey = std::tuple<int64_t, int, bool, int, int, int, int, int, int, PlacementKey,
                              PlacementKey, PlacementKey, PlacementKey, int, PlacementKey,
                              bool, int, int, PlacementKey, int, int>;
  struct Facts;  // one class's chunks (closed_form_facts.h)

 private:
  // `footprint`: the strategy's (cachedFootprint), used for ZeRO-3's transfers.
  LayerTimes layerTimes(const Strategy& strategy, bool zero3, const StageGroups& groups,
                        const ModelFootprint& footprint, Workspace::State& workspace) const;
  // Builds the layers' op lists in `workspace`'s event table (kept across keys: LayerEvents).
  LayerTimes computeLayerTimes(const Strategy& strategy, bool zero3, const StageGroups& groups,
                               const ModelFootprint& footprint, Workspace::State& workspace) const;
  // host + device time of one execution, or a negative value when no source covers it.
  double issuedUs(const Event& event) const;
  // The same for the communication makeCommunication(kind, bytes, placement, dtype), memoised in
  // `workspace`; `dtype` the one the plan's event carries (the DP gradient reduction's wire type,
  // optimizer_step.h, else the model's).
  double communicationUs(EventKind kind, int64_t bytes, const Placement& placement, DType dtype,
                         Workspace::State& workspace) const;
  // The same communication's device time alone (EventCost::time_us, no host issue: an op inside a
  // task, whose host issue may hide behind the ops before it), or a negative value when uncosted.
  double communicationDeviceUs(EventKind kind, int64_t bytes, const Placement& placement,
                               DType dtype, Workspace::State& workspace) const;
  // The class of `strategy` in `workspace`, its chunks computed when the class changes.
  Facts& facts(const Strategy& strategy, Workspace::State& workspace) const;
  // Fills facts' F_k and B_k (ZeRO-3's transfers with `zero3`); false when an op has no cost.
  bool chunkTimes(const Strategy& strategy, bool zero3, Facts& facts,
                  Workspace::State& workspace) const;
  // Fills facts' P2P send times per link; false when one has no cost.
  bool sendTimes(const Strategy& strategy, Facts& facts, Workspace::State& workspace) const;
  // Fills facts' activation copies' sums out and in per chunk (activation offload).
  void activationCopyTimes(Facts& facts, Workspace::State& workspace) const;
  double lowerBoundUs(const Strategy& strategy, int64_t micro_batches, Facts& facts,
                      Workspace::State& workspace) const;

  // The activation states of a pipeline shape (schedule, P, v, m, group), walked once for all
  // workspaces: the workers of a search claim groups of one micro-batch size, and every group of
  // the same P, b and M x C (the same m) walks the same orders. Per workspace, two workers walked
  // each shape twice (1,120 walks instead of 594 for Llama 3.1 405B on 1,024 GPUs, 8% of the
  // search's CPU). closed_form_tier.cpp.
  struct SharedStates;
  std::shared_ptr<const std::vector<ActivationStates>> sharedStates(
      Schedule schedule, const PipelineShape& shape,
      const std::tuple<int, int, int, int64_t, int>& key) const;

  // The layer times computed once for all workspaces (closed_form_facts.h).
  struct SharedLayerTimes;

  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const CostModel& costs_;
  double headroom_;
  PlanCache& cache_;
  std::unique_ptr<SharedStates> shared_states_;
  std::unique_ptr<SharedLayerTimes> shared_layer_times_;
};

}  // namespace evsim

// The closed-form tier's lower bound on the simulated iteration time (closed_form_tier.h).
#include "modeler/closed_form_tier.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "modeler/closed_form_facts.h"
#include "plan/iteration_plan.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_core.h"
#include "plan/task_graph.h"

namespace evsim {

double ClosedFormTier::lowerBoundUs(const Strategy& strategy, int64_t micro_batches, Facts& facts,
                                    Workspace::State& workspace) const {
  const int P = strategy.pp, G = strategy.gradGroupSize();
  const int K = static_cast<int>(facts.first_layer.size());
  const int v = K / P;
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, v);
  const int zero = G > 1 ? strategy.zero_stage : 0;
  const int64_t elem_bytes = dtypeBytes(model_.dtype);
  const PlanCache::Placements& placements = *facts.placements;

  // Per virtual stage: one micro-batch's forward and backward op-time sums.
  const bool zero3 = zero == 3;
  if (!chunkTimes(strategy, zero3, facts, workspace)) return 0;
  const std::vector<double>* forward = &facts.forward[zero3 ? 1 : 0];
  const std::vector<double>* backward = &facts.backward[zero3 ? 1 : 0];
  // With activation offload F_k and B_k are at least the copies' sums (withCopies, below, when a
  // stage's work is first summed for these lists).
  const bool copies = offloadsActivations(strategy.offload);
  auto withCopies = [&] {
    // The workspace's scratch vectors: no allocation per candidate (a million in the 70B search,
    // contended in malloc at two threads).
    std::vector<double>& with_copies_forward = workspace.copies_forward_us;
    std::vector<double>& with_copies_backward = workspace.copies_backward_us;
    if (!facts.copies_ready) activationCopyTimes(facts, workspace);
    with_copies_forward = *forward;
    with_copies_backward = *backward;
    for (int k = 0; k < K; ++k) {
      with_copies_forward[k] = std::max(with_copies_forward[k], facts.copy_out[k]);
      with_copies_backward[k] = std::max(with_copies_backward[k], facts.copy_in[k]);
    }
    forward = &with_copies_forward;
    backward = &with_copies_backward;
  };
  auto memoStepUs = [&](int64_t params) {
    auto [it, inserted] =
        workspace.step_us.try_emplace({params, static_cast<int>(strategy.offload) +
                                                   16 * static_cast<int>(strategy.framework) +
                                                   64 * static_cast<int>(strategy.optimizer_impl)},
                                      0.0);
    if (inserted) {
      for (const StepOp& op : frameworkStepOps(params, model_.dtype, strategy.offload,
                                               strategy.framework, strategy.optimizer_impl)) {
        const double t = issuedUs(op.event);
        if (t < 0) {
          it->second = -1;
          break;
        }
        it->second += t;
      }
    }
    return it->second;
  };
  // One optimizer step's ops over `params`, issued one after another (memoised per thread). The
  // chunks of a class mostly hold as many parameters as the one before: the last answer is kept
  // here too, which spares the memo's look-up (a map look-up per chunk for each of a class's
  // step variants).
  int64_t last_step_params = -1;
  double last_step_us = 0;
  auto stepUs = [&](int64_t params) {
    if (params == last_step_params) return last_step_us;
    last_step_params = params;
    last_step_us = memoStepUs(params);
    return last_step_us;
  };
  // Sums `chunk_us(k)` per device stage into `sums` the first time; false when one is uncosted.
  auto stageSums = [&](Facts::StageSums& sums, auto&& chunk_us) {
    if (!sums.ready) {
      sums.ready = true;
      sums.us.assign(P, 0.0);
      for (int k = 0; k < K && sums.complete; ++k) {
        const double t = chunk_us(k);
        if (t < 0) sums.complete = false;
        sums.us[pipeline.device(k)] += t;
      }
    }
    return sums.complete;
  };
  // Gradients travel in the DP reduction's dtype (fp32 for Megatron's bf16 models), the ZeRO 1/2
  // parameter gathers in the model's (finish_plan.cpp, plan_core.cpp, optimizer_step.h).
  // The events carry that dtype as the plan's do, so a profile's records are found by signature.
  const DType grad_wire =
      dataParallelGradDtype(strategy.framework, model_.dtype, strategy.grad_reduce_in_bf16);
  const int64_t grad_bytes = dtypeBytes(grad_wire);
  // ZeRO-2: one reduce-scatter of chunk k's dense gradients, device time only (the plan adds a
  // bucket's dense reduction only over a DP group of two or more).
  auto zero2ReductionDeviceUs = [&](int k) {
    const Placement& dp = placements.dp[pipeline.device(k)];
    return dp.group_size < 2 ? 0.0
                             : communicationDeviceUs(EventKind::kReduceScatter,
                                                     facts.dense_parameters[k] * grad_bytes, dp,
                                                     grad_wire, workspace);
  };
  // The last answer kept, as stepUs': chunks in a row mostly send as many bytes over the same
  // placement.
  std::optional<std::tuple<EventKind, int64_t, Placement>> last_sync;
  double last_sync_us = 0;
  auto syncUs = [&](EventKind kind, int k) {
    const bool gather = kind == EventKind::kAllGather;
    const int64_t bytes = facts.dense_parameters[k] * (gather ? elem_bytes : grad_bytes);
    const Placement& dp = placements.dp[pipeline.device(k)];
    if (last_sync && *last_sync == std::tuple{kind, bytes, dp}) return last_sync_us;
    last_sync = std::tuple{kind, bytes, dp};
    last_sync_us =
        communicationUs(kind, bytes, dp, gather ? model_.dtype : grad_wire, workspace);
    return last_sync_us;
  };
  // After the pipeline: gradient sync (not overlapped), optimizer, ZeRO 1/2 parameter gathers.
  const int offload = static_cast<int>(strategy.offload);
  EVSIM_CHECK(offload >= 0 && offload < 4, "offload {}", offload);
  Facts::StageSums& steps = facts.steps[zero > 0 ? 1 : 0][offload];
  // Under EP the experts' shard is over fewer ranks: dividing all by G stays below the plan's.
  if (!stageSums(steps, [&](int k) {
        return stepUs(zero > 0 ? (facts.parameters[k] + G - 1) / G : facts.parameters[k]);
      })) {
    return 0;
  }
  std::vector<double>& post = workspace.post_us;
  post = steps.us;
  if (G > 1 && zero < 3) {
    // ZeRO-2 reduces in the backward's op list (plan/zero2_buckets.h): no step sync to add.
    if (!strategy.dp_overlap && zero < 2) {
      const EventKind kind = zero > 0 ? EventKind::kReduceScatter : EventKind::kAllReduce;
      Facts::StageSums& syncs = facts.syncs[zero > 0 ? 1 : 0];
      if (!stageSums(syncs, [&](int k) { return syncUs(kind, k); })) return 0;
      for (int s = 0; s < P; ++s) post[s] += syncs.us[s];
    }
    // Overlapped with the next forward (--overlap-param-gather), the gathers stall it by >= 0.
    if (zero > 0 && !strategy.overlap_param_gather) {
      if (!stageSums(facts.gathers,
                     [&](int k) { return syncUs(EventKind::kAllGather, k); })) {
        return 0;
      }
      for (int s = 0; s < P; ++s) post[s] += facts.gathers.us[s];
    }
  }
  const double m = static_cast<double>(micro_batches);
  // Fused tasks: DualPipeV's, or the combined 1F1B of --overlap-moe-expert-parallel-comm.
  const bool fuses = fusesTasks(strategy);
  // A fused task (DualPipeV) lasts max(compute, all-to-all) >= half its members' sum: with expert
  // all-to-alls to hide, only half the work is a bound (timing_engine.h).
  const double work_share = fuses && strategy.ep > 1 ? 0.5 : 1.0;
  // P2P sends: a lone task's send holds its device right after it, and the data arrives when the
  // send ends (timing_engine.h): each forward of chunk k < K-1 and each backward (B) of chunk
  // k > 0 adds its link's send to its device's work, and the sends along micro-batch 0's first
  // forwards and the last backwards to fill and drain. Left out wherever tasks fuse (a fused
  // task's sends go out on the communication stream; lone tasks beside them are left out too).
  if (!fuses && !sendTimes(strategy, facts, workspace)) return 0;
  auto sendUs = [&](int link) {
    return fuses || link < 0 || link + 1 >= K ? 0.0 : facts.send_us[static_cast<size_t>(link)];
  };
  // ZeRO-2's reductions run inside each micro-batch's backward (plan/zero2_buckets.h): without
  // --dp-overlap on its stream one after another with the compute ops, so the task lasts at
  // least B_k plus its buckets' device times; with it beside the ops, but one bucket at a time on
  // the DP stream and the task ends after the last, so at least the longer of the two. The buckets
  // of one backward cost no less than one reduce-scatter of all the chunk's dense gradients (a
  // collective's cost is concave in its bytes, as above). Only the device's work counts it
  // (a split backward reduces in its W tasks, which fill and drain do not wait for), and not
  // where tasks fuse (their ops interleave with a partner's).
  // Under --grad-reduce-sync step they leave the task for the DP stream's queue (timing_engine.h):
  // only the weaker form below (the DP stream's m reductions before the step) holds.
  int reductions_variant = 0;  // ZeRO-2's reductions in the work: 0 none, 1 in series, 2 beside
  if (G > 1 && zero == 2 && !fuses && !strategy.reducesAtStep()) {
    Facts::StageSums& reductions = facts.zero2_chunk_reductions;
    if (!reductions.ready) {
      reductions.ready = true;
      reductions.us.assign(K, 0.0);
      for (int k = 0; k < K && reductions.complete; ++k) {
        const double t = zero2ReductionDeviceUs(k);
        if (t < 0) reductions.complete = false;
        reductions.us[k] = t;
      }
    }
    // Uncosted: the plan's reductions are too (the full path reports them); no tighter bound.
    // In series the reductions add their whole time, unless the backward has windows (an op
    // beside the next ones): a bucket inserted inside one takes a window's slot, and the op it
    // displaces runs after the window, so the task may grow by less than the reduction. It
    // still lasts at least its ops without the reductions and at least the reductions (one
    // after another, each in its own run of ops): the longer of the two stays a bound.
    if (reductions.complete) {
      const bool in_series =
          !strategy.dp_overlap && !facts.backward_windows[zero3 ? 1 : 0] && !copies;
      reductions_variant = in_series ? 1 : 2;
    }
  }
  // The backward each task's work counts: B_k, or with ZeRO-2's reductions in it.
  auto withReductions = [&]() -> const std::vector<double>* {
    if (reductions_variant == 0) return backward;
    const std::vector<double>& compute = facts.backward[zero3 ? 1 : 0];
    const std::vector<double>& reduction_us = facts.zero2_chunk_reductions.us;
    std::vector<double>& with_reductions = workspace.zero2_backward_us;
    with_reductions.resize(K);
    for (int k = 0; k < K; ++k) {
      const double in_task = reductions_variant == 1 ? compute[k] + reduction_us[k]
                                                     : std::max(compute[k], reduction_us[k]);
      // (*backward)[k] is compute[k], or its max with the activation copies in.
      with_reductions[k] = std::max(in_task, (*backward)[k]);
    }
    return &with_reductions;
  };
  double bound = 0;
  // ZeRO-2 reduce-scatters every micro-batch's gradients bucket by bucket on the DP stream, one
  // bucket at a time (plan/zero2_buckets.h), and the step's ops wait for the last: a device's
  // iteration lasts at least m of its chunks' reductions plus its step. A chunk's buckets cost at
  // least one reduce-scatter of all its dense gradients (a collective's cost is concave in its
  // bytes: one message of the sum costs no more than the parts), which syncUs gives. This holds
  // under --grad-reduce-sync step too: the queue is the same DP stream, and the step waits for it;
  // but the queue issues its reductions without host time (timing_engine.cpp), so there only
  // their device time counts (an issued time, host included, could exceed the simulated time by
  // m host ops).
  if (G > 1 && zero == 2) {
    const bool queued = strategy.reducesAtStep();
    Facts::StageSums& syncs = queued ? facts.zero2_queued_reductions : facts.syncs[1];
    auto reductionUs = [&](int k) {
      return queued ? zero2ReductionDeviceUs(k) : syncUs(EventKind::kReduceScatter, k);
    };
    if (!stageSums(syncs, reductionUs)) return 0;
    for (int s = 0; s < P; ++s) bound = std::max(bound, m * syncs.us[s] + post[s]);
  }
  // Per stage: one micro-batch's work, and the fill and drain before it (Facts::StageWork), for
  // the lists this candidate reads; computed by the class's first member that reads them.
  Facts::StageWork& stage_work =
      facts.stage_work[static_cast<size_t>((zero3 ? 1 : 0) + 2 * (copies ? 1 : 0) +
                                           4 * reductions_variant)];
  if (!stage_work.ready) {
    stage_work.ready = true;
    if (copies) withCopies();
    const std::vector<double>* work_backward = withReductions();
    double fill = 0, drain = 0;
    stage_work.per_micro_batch.resize(static_cast<size_t>(P));
    stage_work.fill.resize(static_cast<size_t>(P));
    stage_work.drain.resize(static_cast<size_t>(P));
    for (int s = 0; s < P; ++s) {
      double per_micro_batch = 0;
      for (int c = 0; c < v; ++c) {
        const int k = pipeline.virtualStage(s, c);
        per_micro_batch += (*forward)[k] + (*work_backward)[k] + sendUs(k) + sendUs(k - 1);
      }
      stage_work.per_micro_batch[static_cast<size_t>(s)] = per_micro_batch;
      stage_work.fill[static_cast<size_t>(s)] = fill;
      stage_work.drain[static_cast<size_t>(s)] = drain;
      fill += (*forward)[s] + sendUs(s);
      // Device s's gradient send to s-1 is in its work: the drain's chain sends from s-1 on.
      drain += (*backward)[s] + sendUs(s - 1);
    }
  }
  for (int s = 0; s < P; ++s) {
    const size_t i = static_cast<size_t>(s);
    const double work = m * stage_work.per_micro_batch[i] * work_share;
    bound = std::max(bound, stage_work.fill[i] + work + post[s]);
    bound = std::max(bound, stage_work.fill[i] + work + stage_work.drain[i] + post[0]);
  }
  return bound;
}

}  // namespace evsim

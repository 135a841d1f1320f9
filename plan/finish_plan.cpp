// finishPlan (plan_core.h): a plan completed from its core with what depends on the rest of the
// strategy: each chunk's optimizer step and FP8 casts, its gradient sync (one collective or DDP
// buckets), ZeRO's parameter all-gathers, FSDP's once-per-step sync, and every event's count.
// Apart from plan_core.cpp, which builds the shared core once per CoreKey: this runs per candidate.
#include <algorithm>

#include "common/checked.h"
#include "common/error.h"
#include "ops/fp8_casts.h"
#include "plan/ddp_buckets.h"
#include "plan/optimizer_step.h"
#include "plan/plan_core.h"
#include "plan/zero2_buckets.h"

namespace evsim {

namespace {

// Chunks: P*v model chunks (v = 1 unless the schedule runs several per device), placed on the
// device stages by the schedule's layout (pipeline_layout.h).
int chunkCount(const Strategy& strategy) { return pipelineLayout(strategy).stages(); }

// Weight elements of the FP8 GEMMs among `ops` (forward ops own their weights).
int64_t fp8WeightElements(const OpList& ops, const EventTable& table) {
  int64_t total = 0;
  for (const OpInstance& op : ops) {
    if (op.weights > 0 && isFp8(table[op.event].event.dtype)) total += op.weights;
  }
  return total;
}

// Splits the stage's gradients into DDP buckets in backward order; a bucket closes at the end of a
// layer once it holds at least `bucket_bytes` (PyTorch fills buckets by whole parameters).
template <typename Intern>
void buildBuckets(StagePlan& stage, const LayerParams& layer_params, int64_t grad_bytes,
                  int64_t bucket_bytes, Placement dp_group, DType dtype, EventKind kind,
                  Intern&& intern) {
  int64_t pending = 0;
  auto close = [&](int op_index) {
    if (pending == 0) return;
    int event = intern(makeCommunication(kind, pending, dp_group, dtype));
    stage.dp_buckets.push_back(GradBucket{event, op_index, pending});
    pending = 0;
  };
  // Activation prefetches (host stream) sit before the layer they overlap, with their own layer's
  // index: they compute no gradient, so a layer ends at its last op off the host stream.
  std::vector<int> ops;
  for (size_t i = 0; i < stage.backward.size(); ++i) {
    if (stage.backward[i].stream != Stream::kHost) ops.push_back(static_cast<int>(i));
  }
  for (size_t j = 0; j < ops.size(); ++j) {
    const int layer = stage.backward[ops[j]].layer;
    const bool layer_ends = j + 1 == ops.size() || stage.backward[ops[j + 1]].layer != layer;
    if (!layer_ends) continue;
    pending += layer_params.at(layer) * grad_bytes;
    if (pending >= bucket_bytes) close(ops[j]);
  }
  close(ops.empty() ? -1 : ops.back());
}

// The index of the first op of `forward` that `uses` selects (0 when none does: needed at once).
template <typename Uses>
int firstForwardOp(const OpList& forward, Uses uses) {
  for (size_t i = 0; i < forward.size(); ++i) {
    if (uses(forward[i])) return static_cast<int>(i);
  }
  return 0;
}

}  // namespace

void finishPlan(const PlanCore& core, IterationPlan& plan) {
  const ModelConfig& model = plan.model;
  const Strategy& strategy = plan.strategy;
  const int K = chunkCount(strategy);
  EVSIM_CHECK(static_cast<int>(core.stages.size()) == K, "plan core of {} chunks for {} chunks",
              core.stages.size(), K);
  EVSIM_CHECK(plan.events.size() == 0,
              "plan to finish already has {} events (finishPlan interns them all anew)",
              plan.events.size());
  const DType dtype = model.dtype;
  const int64_t elem_bytes = dtypeBytes(dtype);
  const int zero = effectiveZero(strategy);
  const PipelineLayout layout = pipelineLayout(strategy);
  EventTable& table = plan.events;

  // The core's events go into the plan's table in their order, each chunk's optimizer and
  // gradient events after that chunk's own. A core event can equal only an event finishPlan
  // added before it (the core's events are unique), so it is looked up only when there are some.
  std::vector<int> remap(static_cast<size_t>(core.events.size()), -1);
  // The core's events and the few finishPlan adds per chunk (optimizer, casts, syncs).
  table.reserve(static_cast<size_t>(core.events.size()) + 8 * static_cast<size_t>(K));
  bool finished_any = false;
  auto take = [&](int i) {
    const UniqueEvent& u = core.events[i];
    const uint64_t hash = core.events.hashAt(i);
    const int found = finished_any ? table.find(u.event, hash) : -1;
    remap[i] = found >= 0 ? found : table.appendNew(u, hash);
  };
  auto intern = [&](const Event& e) {
    const int before = table.size();
    const int index = table.intern(e);
    finished_any = finished_any || index == before;
    return index;
  };
  // FSDP under PP without reshard (Strategy::fsdpSyncsOncePerStep): each chunk's parameters are
  // gathered once per step (the wire type per layer as in the per-layer gathers: fp8 for blocks'
  // linear weights with Float8 all-gather) and its gradients reduce-scattered once in fp32 after
  // its last backward (PyTorch's pipelining runs FSDP's post-backward then, layer after layer, not
  // overlapped with that backward). The gathers are FSDP2's: each fully_shard unit (torchtitan's
  // apply_fsdp: the embedding, every block, the final norm with the output layer) all-gathers in
  // its pre-forward hook of the chunk's first micro-batch (under the root wrapping the root's
  // embedding and [final norm, output] first), one after another on the DP stream as
  // the host runs ahead (param_buckets, timing_engine.h), the forward waiting only where a layer's
  // gather is not done; the optimizer step only updates the shards.
  auto addStepSync = [&](int k, StagePlan& stage) {
    const DType gather_wire = model.fp8WeightGather() ? DType::kFp8 : dtype;
    int64_t dense_grads = 0, expert_grads = 0;
    for (const auto& [layer, params] : core.layer_params[k]) {
      // The routed experts' share (dense_params leaves it out under expert parallelism).
      const int64_t experts = params - core.dense_params[k].at(layer);
      dense_grads = checkedAdd(dense_grads, params - experts, "gradient elements");
      expert_grads = checkedAdd(expert_grads, experts, "gradient elements");
    }
    auto collective = [&](EventKind kind, int64_t bytes, const Placement& group, DType wire) {
      return bytes > 0 && group.group_size > 1 ? intern(makeCommunication(kind, bytes, group, wire))
                                               : -1;
    };
    const int64_t fp32 = dtypeBytes(DType::kFp32);
    stage.dp_reduce_scatter =
        collective(EventKind::kReduceScatter, checkedMul(dense_grads, fp32, "gradient bytes"),
                   stage.dp_group, DType::kFp32);
    stage.expert_grad_sync =
        collective(EventKind::kReduceScatter, checkedMul(expert_grads, fp32, "gradient bytes"),
                   stage.expert_dp_group, DType::kFp32);
    // Per unit in forward order (embedding, blocks, head): its dense gather, then its experts'.
    // Under the root wrapping the chunk's root holds the embedding and [final norm, output]: the
    // root's pre-forward gathers them before any block's and waits for them (FSDP2's pre_forward
    // unshards, then waits), so they come first and the chunk's first op needs them.
    const bool root_group = strategy.fsdpRootGroup();
    auto unit = [&](int layer, int64_t params) {
      const int64_t experts = params - core.dense_params[k].at(layer);
      const DType wire = layer >= 0 ? gather_wire : dtype;
      const int needed =
          root_group && layer < 0
              ? 0
              : firstForwardOp(stage.forward,
                               [&](const OpInstance& op) { return op.layer == layer; });
      for (const auto& [count, group] : {std::pair{params - experts, stage.dp_group},
                                         std::pair{experts, stage.expert_dp_group}}) {
        const int64_t bytes = checkedMul(count, dtypeBytes(wire), "gather bytes");
        // Labelled with its wire type, as the per-layer gathers are: one signature per transfer.
        const int event = collective(EventKind::kAllGather, bytes, group, wire);
        if (event >= 0) stage.param_buckets.push_back({event, needed, bytes});
      }
    };
    const LayerParams& layers = core.layer_params[k];
    if (const int64_t* params = layers.find(kEmbeddingLayer)) unit(kEmbeddingLayer, *params);
    const int64_t* head = layers.find(kHeadLayer);
    if (root_group && head != nullptr) unit(kHeadLayer, *head);
    for (const auto& [layer, params] : layers) {
      if (layer >= 0) unit(layer, params);
    }
    if (!root_group && head != nullptr) unit(kHeadLayer, *head);
  };
  int next = 0;
  // A rebuilt plan's stages (rebuildIterationPlan) are assigned over: their op lists and buckets
  // keep their storage.
  plan.stages.resize(core.stages.size());
  for (int k = 0; k < K; ++k) {
    for (; next < core.stage_events_end[k]; ++next) take(next);
    StagePlan& stage = plan.stages[k];
    stage = core.stages[k];
    for (OpInstance& op : stage.forward) op.event = remap[op.event];
    for (OpInstance& op : stage.backward) op.event = remap[op.event];
    for (GradBucket& b : stage.micro_batch_buckets) b.event = remap[b.event];

    const int64_t synced_apart = strategy.expertsSyncApart() ? stage.expert_parameters : 0;
    // Under ZeRO each DP rank steps only its shard (the last shard may be smaller; we take the
    // larger, rounded-up one, which is what the slowest rank runs).
    // Dense parameters shard over D x C ranks, routed experts' (with E > 1) over D x C / E.
    const int G = strategy.gradGroupSize(), Ge = strategy.expertGradGroupSize();
    const int64_t optimizer_params =
        zero > 0 ? (stage.parameters - synced_apart + G - 1) / G + (synced_apart + Ge - 1) / Ge
                 : stage.parameters;
    for (const StepOp& op :
         frameworkStepOps(optimizer_params, dtype, strategy.offload, strategy.framework,
                          strategy.optimizer_impl)) {
      stage.optimizer.push_back(OpInstance{intern(op.event), op.stream, kEmbeddingLayer, op.name});
    }
    // FP8 weights are cast once per iteration after the step (ops/fp8_casts.h): the whole weights
    // on the rank, or, under ZeRO-3 / FSDP (cast before the gather), the rank's shard.
    const int64_t fp8_weights = fp8WeightElements(stage.forward, table);
    if (fp8_weights > 0) {
      const int64_t cast = zero == 3 ? (fp8_weights + G - 1) / G : fp8_weights;
      for (const Fp8Cast& c : fp8WeightCasts(model.spec.fp8_recipe, cast)) {
        stage.optimizer.push_back(
            OpInstance{intern(c.event), Stream::kCompute, kEmbeddingLayer, c.name});
      }
    }

    const EventKind grad_kind = zero > 0 ? EventKind::kReduceScatter : EventKind::kAllReduce;
    // The DP gradient reduction's wire type (dataParallelGradDtype): fp32 for Megatron's bf16
    // models; the ZeRO-1/2 parameter all-gathers stay in the model dtype.
    const DType grad_wire =
        dataParallelGradDtype(strategy.framework, dtype, strategy.grad_reduce_in_bf16);
    const int64_t grad_bytes = dtypeBytes(grad_wire);
    auto gathered_bytes = [&](int64_t reduced_bytes) {
      return reduced_bytes / grad_bytes * elem_bytes;
    };
    if (strategy.gradGroupSize() > 1 && zero < 3) {
      const int64_t dense_bytes =
          checkedMul(stage.parameters - synced_apart, grad_bytes, "gradient bytes");
      if (zero == 2) {
        // Reduced bucket by bucket in the backward's op list (buildPlanCore), every micro-batch.
      } else if (strategy.dp_overlap) {
        buildBuckets(stage, core.dense_params[k], grad_bytes,
                     ddpBucketCloseBytes(strategy, layout.device(k), layout.chunk(k), grad_bytes),
                     stage.dp_group, grad_wire, grad_kind, intern);
      } else {
        int event = intern(makeCommunication(grad_kind, dense_bytes, stage.dp_group, grad_wire));
        (zero > 0 ? stage.dp_reduce_scatter : stage.dp_allreduce) = event;
      }
      // A grad bucket's parameters (`grad_bucket_bytes` of gradients), gathered before the first
      // forward op of the layer that closed it (its first layer in forward order).
      auto gather_bucket = [&](int layer, int64_t grad_bucket_bytes) {
        const int64_t bytes = gathered_bytes(grad_bucket_bytes);
        stage.param_buckets.push_back(
            {intern(makeCommunication(EventKind::kAllGather, bytes, stage.dp_group, dtype)),
             firstForwardOp(stage.forward, [&](const OpInstance& op) { return op.layer == layer; }),
             bytes});
      };
      if (zero == 2 && strategy.overlap_param_gather) {
        // ZeRO-2's buckets: each reduction in the backward, buckets in forward order. A bucket
        // reduced at the first gradient of a layer (plan/zero2_buckets.h) is gathered before
        // that layer, one earlier than its own first: the forward may wait a layer early.
        for (auto it = stage.backward.rbegin(); it != stage.backward.rend(); ++it) {
          if (it->name == kZero2ReduceName) {
            gather_bucket(it->layer, table[it->event].event.message_bytes);
          }
        }
        // Under --grad-reduce-sync step the same reductions, out of the list: each after its op.
        for (auto it = stage.micro_batch_buckets.rbegin(); it != stage.micro_batch_buckets.rend();
             ++it) {
          if (it->expert) continue;
          gather_bucket(it->ready_after_op < 0 ? kEmbeddingLayer
                                               : stage.backward[it->ready_after_op].layer,
                        it->bytes);
        }
      } else if (zero > 0 && strategy.overlap_param_gather) {
        // DDP's grad buckets, in forward order.
        for (auto it = stage.dp_buckets.rbegin(); it != stage.dp_buckets.rend(); ++it) {
          if (it->expert) continue;
          gather_bucket(it->ready_after_op < 0 ? kEmbeddingLayer
                                               : stage.backward[it->ready_after_op].layer,
                        it->bytes);
        }
      } else if (zero > 0) {
        stage.dp_allgather = intern(makeCommunication(
            EventKind::kAllGather, gathered_bytes(dense_bytes), stage.dp_group, dtype));
      }
    }
    if (zero == 3 && strategy.fsdpSyncsOncePerStep()) addStepSync(k, stage);
    // ZeRO-3 reduce-scatters the experts' gradients layer by layer in the backward (zero3_op).
    if (synced_apart > 0 && strategy.expertGradGroupSize() > 1 && zero < 3) {
      const int64_t bytes = checkedMul(synced_apart, grad_bytes, "expert gradient bytes");
      const int64_t gathered = gathered_bytes(bytes);
      const int event =
          intern(makeCommunication(grad_kind, bytes, stage.expert_dp_group, grad_wire));
      if (zero == 2) {
        // In the backward's buckets (buildPlanCore).
      } else if (strategy.dp_overlap) {
        stage.dp_buckets.push_back(
            GradBucket{event, static_cast<int>(stage.backward.size()) - 1, bytes, true});
      } else {
        stage.expert_grad_sync = event;
      }
      if (zero > 0 && strategy.overlap_param_gather) {
        // Needed by the first routed expert's op; in forward order among the dense buckets.
        ParamGatherBucket bucket{
            intern(makeCommunication(EventKind::kAllGather, gathered, stage.expert_dp_group,
                                     dtype)),
            firstForwardOp(stage.forward, [](const OpInstance& op) { return op.expert; }),
            gathered};
        auto at = std::upper_bound(stage.param_buckets.begin(), stage.param_buckets.end(), bucket,
                                   [](const ParamGatherBucket& a, const ParamGatherBucket& b) {
                                     return a.needed_before_op < b.needed_before_op;
                                   });
        stage.param_buckets.insert(at, bucket);
      } else if (zero > 0) {
        stage.expert_allgather = intern(
            makeCommunication(EventKind::kAllGather, gathered, stage.expert_dp_group, dtype));
      }
    }
  }
  for (; next < core.events.size(); ++next) take(next);  // the P2P events
  plan.pipelines = core.pipelines;
  for (PipelineClass& pipeline : plan.pipelines) {
    for (int& e : pipeline.forward_p2p) e = e < 0 ? e : remap[e];
    for (int& e : pipeline.backward_p2p) e = e < 0 ? e : remap[e];
  }

  // Counts over all devices: each chunk's op lists run m times on each of its M*C*D devices, its
  // optimizer and gradient sync once per device; a transfer counts its send and its receive on
  // each of the M*C rank pairs of a replica, m times.
  const int64_t m = plan.micro_batches;
  const int64_t devices_per_stage = int64_t{strategy.tp} * strategy.cp * strategy.dp;
  const int64_t per_op_use = checkedMul(m, devices_per_stage, "op executions");
  const int64_t per_p2p_use = checkedMul(m, int64_t{strategy.tp} * strategy.cp, "op executions");
  for (int i = 0; i < core.events.size(); ++i) {
    if (core.op_uses[i] > 0) {
      table.addCount(remap[i], checkedMul(core.op_uses[i], per_op_use, "op executions"));
    }
    if (core.p2p_uses[i] > 0) {
      table.addCount(remap[i], checkedMul(core.p2p_uses[i], per_p2p_use, "op executions"));
    }
  }
  for (const StagePlan& stage : plan.stages) {
    for (const OpInstance& op : stage.optimizer) table.addCount(op.event, devices_per_stage);
    if (stage.dp_allreduce >= 0) table.addCount(stage.dp_allreduce, devices_per_stage);
    if (stage.dp_reduce_scatter >= 0) table.addCount(stage.dp_reduce_scatter, devices_per_stage);
    if (stage.dp_allgather >= 0) table.addCount(stage.dp_allgather, devices_per_stage);
    if (stage.expert_grad_sync >= 0) table.addCount(stage.expert_grad_sync, devices_per_stage);
    if (stage.expert_allgather >= 0) table.addCount(stage.expert_allgather, devices_per_stage);
    for (const GradBucket& b : stage.dp_buckets) table.addCount(b.event, devices_per_stage);
    for (const ParamGatherBucket& b : stage.param_buckets) {
      table.addCount(b.event, devices_per_stage);
    }
  }
  for (const UniqueEvent& e : table.events()) {
    plan.op_executions = checkedAdd(plan.op_executions, e.count, "op executions");
  }
}

}  // namespace evsim

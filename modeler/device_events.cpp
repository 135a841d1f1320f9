#include "modeler/device_events.h"

#include "plan/zero2_buckets.h"

namespace evsim {

void forEachDeviceEvent(const Simulation& sim, int64_t rank,
                        const std::function<void(const DeviceEvent&)>& visit) {
  const IterationPlan& plan = sim.plan;
  const RankCoord coord = plan.layout().coord(rank);
  const int pipeline = plan.pipelineOf(coord.dp);
  const StageTimeline& timeline = sim.timeline.pipelines[pipeline].stages[coord.pp];
  const PipelineClass& links = plan.pipelines[pipeline];
  // This device's chunks as virtual stages (the schedule's layout), looked up once.
  const std::vector<int> chunk_stage = plan.deviceChunks(coord.pp);

  const TaskGraph& graph = sim.timeline.graph;
  const double slow = stageSlowdown(sim, pipeline, coord.pp);  // straggler: every op stretches
  for (size_t i = 0; i < timeline.tasks.size(); ++i) {
    const TaskTiming& task = timeline.tasks[i];
    // Chunk c of this device is virtual stage k; its ops carry that chunk's layer numbers.
    const TaskNode& node = graph.nodes[timeline.node(i)];
    const StagePlan& stage = plan.stages[node.virtual_stage];
    const StageOpOffsets& offsets = sim.offsets[node.virtual_stage];
    const Phase phase = node.task.phase;
    const bool forward = phase == Phase::kForward;
    const OpList& ops = forward ? stage.forward : stage.backward;
    const std::vector<double>& starts =
        forward ? offsets.forward_start_us : offsets.backward_start_us;
    for (size_t o = 0; o < ops.size(); ++o) {
      const OpInstance& op = ops[o];
      if (!forward && !runsIn(op, phase, graph.split_backward)) continue;
      visit(DeviceEvent{op.stream, op.recompute ? Phase::kRecompute : phase, op.name, op.event,
                        op.layer, node.task.micro_batch, task.run.start_us + starts[o] * slow,
                        sim.costUs(op.event) * slow, node.task.chunk});
    }
    if (node.send != Send::kNone) {
      const bool activation = node.send == Send::kActivation;
      visit(DeviceEvent{Stream::kPpComm, phase, activation ? "send_activation" : "send_gradient",
                        activation ? links.forward_p2p[linkOf(node)]
                                   : links.backward_p2p[linkOf(node)],
                        kEmbeddingLayer, node.task.micro_batch, task.send().start_us,
                        task.send().duration(), node.task.chunk});
    }
  }
  // Grad syncs come grouped by chunk (timeline.grad_sync_chunk); buckets in order within a chunk.
  int bucket = 0;
  for (size_t i = 0; i < timeline.grad_sync.size(); ++i) {
    const Interval& sync = timeline.grad_sync[i];
    const int chunk = timeline.grad_sync_chunk[i];
    if (i > 0 && timeline.grad_sync_chunk[i - 1] != chunk) bucket = 0;
    const StagePlan& stage = plan.stages[chunk_stage[chunk]];
    if (!timeline.grad_sync_bucket.empty()) {  // --grad-reduce-sync step: ZeRO-2's, queued
      const GradBucket& b =
          stage.micro_batch_buckets[static_cast<size_t>(timeline.grad_sync_bucket[i])];
      visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync,
                        b.expert ? kZero2ExpertReduceName : kZero2ReduceName, b.event,
                        kEmbeddingLayer, -1, sync.start_us, sync.duration(), chunk});
      continue;
    }
    const bool whole = stage.gradSyncEvent() >= 0;
    const bool expert_bucket = !whole && stage.dp_buckets[bucket].expert;
    const int event = whole ? stage.gradSyncEvent() : stage.dp_buckets[bucket++].event;
    const bool scatter = plan.events[event].event.kind == EventKind::kReduceScatter;
    std::string_view name =
        whole ? (scatter ? "grad_reduce_scatter" : "grad_allreduce")
        : expert_bucket ? (scatter ? "expert_grad_reduce_scatter" : "expert_grad_allreduce")
                        : (scatter ? "grad_bucket_reduce_scatter" : "grad_bucket_allreduce");
    if (whole && stage.expert_grad_sync >= 0) {
      // One interval holds the dense sync, then the routed experts' (timing engine).
      const double expert_us = sim.costUs(stage.expert_grad_sync);
      visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync, name, event, kEmbeddingLayer, -1,
                        sync.start_us, sync.duration() - expert_us, chunk});
      visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync,
                        scatter ? "expert_grad_reduce_scatter" : "expert_grad_allreduce",
                        stage.expert_grad_sync, kEmbeddingLayer, -1, sync.end_us - expert_us,
                        expert_us, chunk});
      continue;
    }
    visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync, name, event, kEmbeddingLayer, -1,
                      sync.start_us, sync.duration(), chunk});
  }
  // The chunks' optimizer steps, v-1 first (the timing engine's order).
  double t = timeline.optimizer.start_us;
  for (int chunk = plan.chunksPerDevice() - 1; chunk >= 0; --chunk) {
    for (const OpInstance& op : plan.stages[chunk_stage[chunk]].optimizer) {
      visit(DeviceEvent{op.stream, Phase::kOptimizer, op.name, op.event, op.layer, -1, t,
                        sim.costUs(op.event) * slow, chunk});
      t += sim.costUs(op.event) * slow;
    }
  }
  // --overlap-param-gather: each chunk's buckets before and beside its first forward.
  std::vector<size_t> next_bucket(chunk_stage.size(), 0);
  for (size_t i = 0; i < timeline.param_gathers.size(); ++i) {
    const int chunk = timeline.param_gather_chunk[i];
    const StagePlan& stage = plan.stages[chunk_stage[chunk]];
    const int event = stage.param_buckets[next_bucket[chunk]++].event;
    visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync, "param_gather_bucket", event,
                      kEmbeddingLayer, -1, timeline.param_gathers[i].start_us,
                      timeline.param_gathers[i].duration(), chunk});
  }
  // ZeRO 1/2: the chunks' parameter all-gathers after the optimizer, v-1 first.
  t = timeline.param_allgather.start_us;
  for (int chunk = plan.chunksPerDevice() - 1; chunk >= 0; --chunk) {
    const StagePlan& stage = plan.stages[chunk_stage[chunk]];
    for (int event : {stage.dp_allgather, stage.expert_allgather}) {
      if (event < 0) continue;
      visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync,
                        event == stage.dp_allgather ? "param_allgather" : "expert_param_allgather",
                        event, kEmbeddingLayer, -1, t, sim.costUs(event), chunk});
      t += sim.costUs(event);
    }
  }
}

}  // namespace evsim

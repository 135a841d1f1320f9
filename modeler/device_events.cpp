#include "modeler/device_events.h"

namespace evsim {

void forEachDeviceEvent(const Simulation& sim, int64_t rank,
                        const std::function<void(const DeviceEvent&)>& visit) {
  const IterationPlan& plan = sim.plan;
  const RankCoord coord = plan.layout().coord(rank);
  const int pipeline = plan.pipelineOf(coord.dp);
  const StagePlan& stage = plan.stages[coord.pp];
  const StageTimeline& timeline = sim.timeline.pipelines[pipeline].stages[coord.pp];
  const StageOpOffsets& offsets = sim.offsets[coord.pp];
  const PipelineClass& links = plan.pipelines[pipeline];

  for (const TaskTiming& task : timeline.tasks) {
    const bool forward = task.task.phase == Phase::kForward;
    const OpList& ops = forward ? stage.forward : stage.backward;
    const std::vector<double>& starts = forward ? offsets.forward_start_us : offsets.backward_start_us;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpInstance& op = ops[i];
      visit(DeviceEvent{op.stream, op.recompute ? Phase::kRecompute : task.task.phase, op.name,
                        op.event, op.layer, task.task.micro_batch, task.run.start_us + starts[i],
                        sim.costUs(op.event)});
    }
    int send_event = -1;
    if (forward && coord.pp + 1 < plan.strategy.pp) send_event = links.forward_p2p[coord.pp];
    if (!forward && coord.pp > 0) send_event = links.backward_p2p[coord.pp - 1];
    if (send_event >= 0) {
      visit(DeviceEvent{Stream::kPpComm, task.task.phase,
                        forward ? "send_activation" : "send_gradient", send_event, kEmbeddingLayer,
                        task.task.micro_batch, task.send.start_us, task.send.duration()});
    }
  }
  for (size_t i = 0; i < timeline.grad_sync.size(); ++i) {
    const Interval& sync = timeline.grad_sync[i];
    const bool whole = stage.gradSyncEvent() >= 0;
    const int event = whole ? stage.gradSyncEvent() : stage.dp_buckets[i].event;
    const bool scatter = plan.events[event].event.kind == EventKind::kReduceScatter;
    std::string_view name =
        whole ? (scatter ? "grad_reduce_scatter" : "grad_allreduce")
              : (scatter ? "grad_bucket_reduce_scatter" : "grad_bucket_allreduce");
    visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync, name, event, kEmbeddingLayer, -1,
                      sync.start_us, sync.duration()});
  }
  double t = timeline.optimizer.start_us;
  for (const OpInstance& op : stage.optimizer) {
    visit(DeviceEvent{op.stream, Phase::kOptimizer, op.name, op.event, op.layer, -1, t,
                      sim.costUs(op.event)});
    t += sim.costUs(op.event);
  }
  if (stage.dp_allgather >= 0) {
    const Interval& gather = timeline.param_allgather;
    visit(DeviceEvent{Stream::kDpComm, Phase::kGradSync, "param_allgather", stage.dp_allgather,
                      kEmbeddingLayer, -1, gather.start_us, gather.duration()});
  }
}

}  // namespace evsim

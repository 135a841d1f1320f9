#include "modeler/timing_engine.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

namespace {

// Times the pipeline's stage tasks in dependency order. Each stage walks its own schedule; a task
// runs once its input is known, so we sweep the stages until every task is placed.
PipelineTimeline timePipeline(const TimingInput& input, const PipelineCost& links) {
  const int P = static_cast<int>(input.stages.size());
  const int64_t m = input.micro_batches;
  PipelineTimeline out;
  out.stages.resize(P);
  std::vector<std::vector<StageTask>> orders(P);
  for (int s = 0; s < P; ++s) {
    orders[s] = stageTaskOrder(input.schedule, s, P, m);
    out.stages[s].tasks.reserve(orders[s].size());
    out.stages[s].peak_activations = peakActivationsInFlight(orders[s]);
  }
  // Arrival time of each stage's inputs; -1 means not produced yet.
  std::vector<std::vector<double>> fwd_arrival(P, std::vector<double>(m, -1.0));
  std::vector<std::vector<double>> bwd_arrival(P, std::vector<double>(m, -1.0));
  std::vector<size_t> next(P, 0);
  std::vector<double> device_free(P, 0.0);

  size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < P; ++s) {
      while (next[s] < orders[s].size()) {
        const StageTask task = orders[s][next[s]];
        const int mb = task.micro_batch;
        double ready = 0;
        if (task.phase == Phase::kForward && s > 0) ready = fwd_arrival[s][mb];
        if (task.phase == Phase::kBackward && s + 1 < P) ready = bwd_arrival[s][mb];
        if (ready < 0) break;  // input not produced yet: try other stages

        TaskTiming t;
        t.task = task;
        t.input_ready_us = ready;
        t.run.start_us = std::max(device_free[s], ready);
        const StageCost& cost = input.stages[s];
        t.run.end_us = t.run.start_us + (task.phase == Phase::kForward ? cost.forward_us : cost.backward_us);
        t.send = Interval{t.run.end_us, t.run.end_us};
        if (task.phase == Phase::kForward && s + 1 < P) {
          t.send.end_us += links.send_forward_us[s];
          fwd_arrival[s + 1][mb] = t.send.end_us;
        } else if (task.phase == Phase::kBackward && s > 0) {
          t.send.end_us += links.send_backward_us[s - 1];
          bwd_arrival[s - 1][mb] = t.send.end_us;
        }
        device_free[s] = t.send.end_us;
        out.stages[s].busy_in_pipeline_us += t.run.duration() + t.send.duration();
        out.stages[s].tasks.push_back(t);
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    EVSIM_CHECK(progressed, "pipeline schedule {} deadlocked", scheduleName(input.schedule));
  }
  for (int s = 0; s < P; ++s) {
    out.stages[s].pipeline_end_us = device_free[s];
    out.flush_us = std::max(out.flush_us, device_free[s]);
  }
  return out;
}

}  // namespace

IterationTimeline computeTimeline(const TimingInput& input) {
  const size_t P = input.stages.size();
  EVSIM_CHECK(P >= 1 && input.micro_batches >= 1 && !input.pipelines.empty(), "empty timing input");
  for (const PipelineCost& p : input.pipelines) {
    EVSIM_CHECK(p.send_forward_us.size() == P - 1 && p.send_backward_us.size() == P - 1,
                "pipeline links: {} / {} for {} stages", p.send_forward_us.size(),
                p.send_backward_us.size(), P);
  }
  IterationTimeline out;
  for (const PipelineCost& links : input.pipelines) out.pipelines.push_back(timePipeline(input, links));

  // Data parallelism: a stage's gradient collectives span every replica, so each one starts when
  // the slowest replica is ready for it.
  for (size_t s = 0; s < P; ++s) {
    const StageCost& cost = input.stages[s];
    std::vector<Interval> sync;
    double last_sync_end = 0;
    if (input.dp_overlap && !cost.buckets.empty()) {
      double last_backward_start = 0;
      for (const PipelineTimeline& p : out.pipelines) {
        last_backward_start = std::max(last_backward_start, p.stages[s].tasks.back().run.start_us);
      }
      double stream_free = 0;
      for (const BucketCost& bucket : cost.buckets) {
        Interval i;
        i.start_us = std::max(stream_free, last_backward_start + bucket.ready_offset_us);
        i.end_us = i.start_us + bucket.allreduce_us;
        stream_free = i.end_us;
        sync.push_back(i);
      }
      last_sync_end = stream_free;
    } else if (cost.grad_allreduce_us > 0) {
      double ready = 0;
      for (const PipelineTimeline& p : out.pipelines) ready = std::max(ready, p.stages[s].pipeline_end_us);
      sync.push_back(Interval{ready, ready + cost.grad_allreduce_us});
      last_sync_end = sync.back().end_us;
    }
    double optimizer_end = 0;
    for (PipelineTimeline& p : out.pipelines) {
      StageTimeline& stage = p.stages[s];
      stage.grad_sync = sync;
      stage.optimizer.start_us = std::max(stage.pipeline_end_us, last_sync_end);
      stage.optimizer.end_us = stage.optimizer.start_us + cost.optimizer_us;
      optimizer_end = std::max(optimizer_end, stage.optimizer.end_us);
      out.iteration_us = std::max(out.iteration_us, stage.optimizer.end_us);
    }
    if (cost.param_allgather_us > 0) {
      const Interval gather{optimizer_end, optimizer_end + cost.param_allgather_us};
      for (PipelineTimeline& p : out.pipelines) p.stages[s].param_allgather = gather;
      out.iteration_us = std::max(out.iteration_us, gather.end_us);
    }
  }
  return out;
}

}  // namespace evsim

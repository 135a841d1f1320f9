#include "modeler/timing_engine.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

namespace {

// Times the pipeline's tasks in dependency order. Each device walks its own schedule; a task runs
// once its input is known, so we sweep the devices until every task is placed.
PipelineTimeline timePipeline(const TimingInput& input, const PipelineCost& links) {
  const int K = static_cast<int>(input.stages.size());
  const int v = input.virtual_stages;
  const int P = K / v;
  const int64_t m = input.micro_batches;
  PipelineTimeline out;
  out.stages.resize(P);
  std::vector<std::vector<StageTask>> orders(P);
  for (int s = 0; s < P; ++s) {
    orders[s] = stageTaskOrder(input.schedule, s, P, m, v);
    out.stages[s].tasks.reserve(orders[s].size());
    out.stages[s].peak_activations = peakActivationsInFlight(orders[s]);
  }
  // Arrival time of each virtual stage's inputs; -1 means not produced yet.
  std::vector<std::vector<double>> fwd_arrival(K, std::vector<double>(m, -1.0));
  std::vector<std::vector<double>> bwd_arrival(K, std::vector<double>(m, -1.0));
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
        const int k = task.chunk * P + s;
        double ready = 0;
        if (task.phase == Phase::kForward && k > 0) ready = fwd_arrival[k][mb];
        if (task.phase == Phase::kBackward && k + 1 < K) ready = bwd_arrival[k][mb];
        if (ready < 0) break;  // input not produced yet: try other devices

        TaskTiming t;
        t.task = task;
        t.input_ready_us = ready;
        t.run.start_us = std::max(device_free[s], ready);
        const StageCost& cost = input.stages[k];
        t.run.end_us =
            t.run.start_us + (task.phase == Phase::kForward ? cost.forward_us : cost.backward_us);
        t.send = Interval{t.run.end_us, t.run.end_us};
        if (task.phase == Phase::kForward && k + 1 < K) {
          t.send.end_us += links.send_forward_us[k];
          fwd_arrival[k + 1][mb] = t.send.end_us;
        } else if (task.phase == Phase::kBackward && k > 0) {
          t.send.end_us += links.send_backward_us[k - 1];
          bwd_arrival[k - 1][mb] = t.send.end_us;
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

// Start of the last backward task of `chunk` on a device (its gradients are complete after it).
double lastBackwardStart(const StageTimeline& stage, int chunk) {
  for (auto it = stage.tasks.rbegin(); it != stage.tasks.rend(); ++it) {
    if (it->task.phase == Phase::kBackward && it->task.chunk == chunk) return it->run.start_us;
  }
  EVSIM_THROW(Error, "no backward task of chunk {}", chunk);
}

}  // namespace

IterationTimeline computeTimeline(const TimingInput& input) {
  const size_t K = input.stages.size();
  const int v = input.virtual_stages;
  EVSIM_CHECK(K >= 1 && input.micro_batches >= 1 && !input.pipelines.empty(), "empty timing input");
  EVSIM_CHECK(v >= 1 && K % v == 0 && (v == 1 || input.schedule == Schedule::kInterleaved),
              "{} virtual stages of {} per device, schedule {}", K, v,
              scheduleName(input.schedule));
  for (const PipelineCost& p : input.pipelines) {
    EVSIM_CHECK(p.send_forward_us.size() == K - 1 && p.send_backward_us.size() == K - 1,
                "pipeline links: {} / {} for {} stages", p.send_forward_us.size(),
                p.send_backward_us.size(), K);
  }
  const int P = static_cast<int>(K) / v;
  IterationTimeline out;
  for (const PipelineCost& links : input.pipelines)
    out.pipelines.push_back(timePipeline(input, links));

  // Data parallelism: a chunk's gradient collectives span every replica, so each one starts when
  // the slowest replica is ready for it; a device's syncs share its DP stream.
  for (int s = 0; s < P; ++s) {
    std::vector<Interval> sync;
    std::vector<int> sync_chunk;
    double stream_free = 0;
    double optimizer_us = 0;
    double param_allgather_us = 0;
    for (int c = v - 1; c >= 0; --c) {
      const StageCost& cost = input.stages[static_cast<size_t>(c) * P + s];
      optimizer_us += cost.optimizer_us;
      param_allgather_us += cost.param_allgather_us;
      if (input.dp_overlap && !cost.buckets.empty()) {
        double last_backward_start = 0;
        for (const PipelineTimeline& p : out.pipelines) {
          last_backward_start = std::max(last_backward_start, lastBackwardStart(p.stages[s], c));
        }
        for (const BucketCost& bucket : cost.buckets) {
          Interval i;
          i.start_us = std::max(stream_free, last_backward_start + bucket.ready_offset_us);
          i.end_us = i.start_us + bucket.allreduce_us;
          stream_free = i.end_us;
          sync.push_back(i);
          sync_chunk.push_back(c);
        }
      } else if (cost.grad_allreduce_us > 0) {
        double ready = 0;
        for (const PipelineTimeline& p : out.pipelines)
          ready = std::max(ready, p.stages[s].pipeline_end_us);
        Interval i{std::max(stream_free, ready), 0};
        i.end_us = i.start_us + cost.grad_allreduce_us;
        stream_free = i.end_us;
        sync.push_back(i);
        sync_chunk.push_back(c);
      }
    }
    double optimizer_end = 0;
    for (PipelineTimeline& p : out.pipelines) {
      StageTimeline& stage = p.stages[s];
      stage.grad_sync = sync;
      stage.grad_sync_chunk = sync_chunk;
      stage.optimizer.start_us = std::max(stage.pipeline_end_us, stream_free);
      stage.optimizer.end_us = stage.optimizer.start_us + optimizer_us;
      optimizer_end = std::max(optimizer_end, stage.optimizer.end_us);
      out.iteration_us = std::max(out.iteration_us, stage.optimizer.end_us);
    }
    if (param_allgather_us > 0) {
      const Interval gather{optimizer_end, optimizer_end + param_allgather_us};
      for (PipelineTimeline& p : out.pipelines) p.stages[s].param_allgather = gather;
      out.iteration_us = std::max(out.iteration_us, gather.end_us);
    }
  }
  return out;
}

}  // namespace evsim

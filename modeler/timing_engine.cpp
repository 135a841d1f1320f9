#include "modeler/timing_engine.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/error.h"
#include "modeler/lone_tasks.h"
#include "modeler/overlap_slowdown.h"

namespace evsim {

namespace {

using lone::jitterUs;
using lone::LoneDevice;
using lone::LoneGraph;
using lone::Output;
using lone::placeLoneTasks;
using lone::taskPhaseIndex;
using lone::taskUs;

// The all-to-all part of a task (StageCost::forward_overlap_us / backward_overlap_us).
double overlapUs(const StageCost& cost, Phase phase) {
  const double part = phase == Phase::kForward    ? cost.forward_overlap_us
                      : phase == Phase::kBackward ? cost.backward_overlap_us
                                                  : 0.0;
  return std::min(part, taskUs(cost, phase));
}

}  // namespace

double fusedTaskUs(double compute_us, double comm_us, double factor) {
  if (comm_us <= 0) return compute_us;
  const SlowInterval a2a{0, comm_us, factor};
  return std::max(comm_us, slowedEndUs(0, compute_us, std::span(&a2a, 1)));
}

namespace {

double slowdown(const PipelineCost& links, int device) {
  return links.stage_slowdown.empty() ? 1.0 : links.stage_slowdown[device];
}

// The DP buckets of one device as the list scheduler sees them (overlap slowdown, the header):
// the position in the device's order of each chunk's last gradient task, and the buckets placed
// so far on the device's DP stream.
struct DeviceBuckets {
  // Per position: the chunk whose buckets it issues, or -1 (chunks are below
  // kMaxChunksPerDevice: a byte).
  std::vector<int8_t> last_gradient_chunk;
  std::vector<SlowInterval> in_flight;
  double stream_free_us = 0;
};

// --grad-reduce-sync step: one device's queue of ZeRO-2 reductions on its DP stream as one
// pipeline class issues them (timing_engine.h).
struct ReductionQueue {
  std::vector<SlowInterval> in_flight;  // issued and slowing compute (factor > 1), maybe over
  std::vector<double> end_us;           // every reduction issued, in order
  double stream_free_us = 0;
};

// What link sharing added to device stage s's grad_sync interval `i` (TimingInput).
double syncStretch(const TimingInput& input, int s, size_t i) {
  return input.grad_sync_stretch_us.empty() ? 0 : input.grad_sync_stretch_us[s][i];
}

// The index among device stage s's grad_sync intervals of chunk `chunk`'s first one, in the order
// computeTimeline places them (chunk v-1 first; per chunk its buckets under DP overlap, else its
// one collective).
size_t firstSyncOf(const TimingInput& input, const PipelineLayout& layout, int s, int chunk) {
  size_t at = 0;
  for (int c = input.virtual_stages - 1; c > chunk; --c) {
    const StageCost& cost = input.stages[static_cast<size_t>(layout.virtualStage(s, c))];
    if (input.dp_overlap && !cost.buckets.empty()) {
      at += cost.buckets.size();
    } else if (cost.grad_allreduce_us > 0) {
      ++at;
    }
  }
  return at;
}

// Empty when no bucket slows compute (no DP overlap, or factors of 1): the scheduler then skips
// the slowdown altogether.
std::vector<DeviceBuckets> slowingBuckets(const TimingInput& input, const TaskGraph& graph) {
  if (!input.dp_overlap) return {};
  bool slows = false;
  for (const StageCost& stage : input.stages) {
    for (const BucketCost& b : stage.buckets) slows = slows || b.compute_slowdown > 1;
  }
  if (!slows) return {};
  const Phase last = graph.split_backward ? Phase::kWeightGrad : Phase::kBackward;
  std::vector<DeviceBuckets> out(graph.devices);
  for (int s = 0; s < graph.devices; ++s) {
    const size_t tasks = static_cast<size_t>(graph.tasks_per_device);
    out[s].last_gradient_chunk.assign(tasks, -1);
    std::vector<bool> seen(input.virtual_stages, false);
    for (size_t i = tasks; i-- > 0;) {
      const NodeTask& task = graph.nodes[graph.nodeAt(s, i)].task;
      if (task.phase != last || seen[task.chunk]) continue;
      seen[task.chunk] = true;
      out[s].last_gradient_chunk[i] = static_cast<int8_t>(task.chunk);
    }
  }
  return out;
}

// The chunk's deferred parameter gathers before and beside its first forward `run`, dispatched at
// `dispatch_us` on the device's DP stream (free from `stream_free_us`; timing_engine.h). Moves
// the run's end; returns the overlap-slowdown part of what it added (the wait goes to `stage`).
double gatherBeforeForward(const StageCost& cost, int chunk, double dispatch_us,
                           double& stream_free_us, Interval& run, StageTimeline& stage) {
  if (cost.param_gathers.empty()) return 0;
  std::vector<SlowInterval> gathers;
  gathers.reserve(cost.param_gathers.size());
  for (const ParamGatherCost& g : cost.param_gathers) {
    const double start = std::max(stream_free_us, dispatch_us);
    stream_free_us = start + g.allgather_us;
    gathers.push_back({start, stream_free_us, g.compute_slowdown});
    stage.param_gathers.push_back({start, stream_free_us});
    stage.param_gather_chunk.push_back(chunk);
  }
  // The task's work; its ops' offsets scale as a straggler's or jitter's task does.
  const double work = run.duration();
  const double scale = cost.forward_us > 0 ? work / cost.forward_us : 1.0;
  double plain = run.start_us, slowed = run.start_us, done = 0;
  for (size_t i = 0; i < gathers.size(); ++i) {
    const double step =
        std::clamp(cost.param_gathers[i].needed_offset_us * scale - done, 0.0, work - done);
    done += step;
    plain = std::max(plain + step, gathers[i].end_us);
    slowed = std::max(slowedEndUs(slowed, step, gathers), gathers[i].end_us);
  }
  plain += work - done;
  slowed = slowedEndUs(slowed, work - done, gathers);
  stage.param_gather_wait_us += plain - run.end_us;
  run.end_us = slowed;
  return slowed - plain;
}

// List-schedules the graph on one pipeline class's links: each device walks its order; a task is
// placed once all its inputs are placed, so we sweep the devices until every task is.
PipelineTimeline timePipeline(const TimingInput& input, const TaskGraph& graph,
                              const PipelineCost& links,
                              const std::vector<std::vector<double>>& send_stretch,
                              const std::vector<std::vector<double>>& task_stretch, uint64_t seed) {
  const int P = graph.devices;
  std::mt19937_64 rng(seed);
  PipelineTimeline out;
  out.stages.resize(P);
  // Each device's timings go straight into its task list, in its order: a producer is placed once
  // its device has passed its position, and its timing sits there.
  std::vector<size_t> next(P, 0);
  std::vector<double> device_free(P, 0.0);
  // Sized once (each task's timing written at its position below, every field): no capacity check
  // per task, and the scheduler's pointers into the graph need no reload after each write.
  const size_t tasks_per_device = static_cast<size_t>(graph.tasks_per_device);
  for (int s = 0; s < P; ++s) {
    out.stages[s].tasks.resize(tasks_per_device);
    out.stages[s].first_node = graph.nodeAt(s, 0);
  }
  std::vector<DeviceBuckets> buckets = slowingBuckets(input, graph);
  const PipelineLayout layout = pipelineLayout(input.schedule, P, input.virtual_stages);
  // --overlap-param-gather: which chunks of each device have had their first forward, and each
  // device's DP stream as the gathers leave it.
  const bool param_gathers = std::any_of(input.stages.begin(), input.stages.end(),
                                         [](const StageCost& c) { return !c.param_gathers.empty(); });
  std::vector<std::vector<char>> gathered(param_gathers ? P : 0,
                                          std::vector<char>(input.virtual_stages, 0));
  std::vector<double> gather_stream_free(P, 0.0);
  if (!buckets.empty()) {
    for (int s = 0; s < P; ++s) out.stages[s].bucket_ready_us.resize(input.virtual_stages);
  }

  std::vector<Output> output(graph.nodes.size());
  const LoneGraph lone{graph.nodes.data(),           graph.edges.data(),
                       links.send_forward_us.data(), links.send_backward_us.data(),
                       input.stages.data(),          output.data()};
  // Per device, the node its next task found unplaced (-1: none): the sweep passes the device by
  // until that node is placed, as the task could not start anyway (the same placements in the same
  // order, so the same jitter draws, without re-reading the task's inputs on every sweep).
  std::vector<int> waiting(P, -1);
  // Nothing beside a lone task's run: no DP buckets slowing it, no deferred parameter gathers, no
  // stretch from shared links inside it.
  // --grad-reduce-sync step: each device's reductions as this class queues them.
  const bool at_step = input.grad_reduce_at_step;
  std::vector<ReductionQueue> queues(at_step ? P : 0);
  const Phase gradient_phase = graph.split_backward ? Phase::kWeightGrad : Phase::kBackward;
  const size_t queue_bound = static_cast<size_t>(std::max(0, input.grad_reduce_queue));
  const bool lone_plain = buckets.empty() && !param_gathers && task_stretch.empty() && !at_step;
  const bool jittered = input.jitter.sigma > 0;
  std::vector<double> busy(P, 0.0);  // each device's busy_in_pipeline_us, summed in its order
  // Each device's slowdown, looked up once rather than at each resume.
  std::vector<double> slow_of(P);
  for (int s = 0; s < P; ++s) slow_of[s] = slowdown(links, s);
  size_t remaining = graph.nodes.size();
  while (remaining > 0) {
    const size_t before_sweep = remaining;  // a sweep that places nothing is a deadlock
    for (int s = 0; s < P; ++s) {
      if (waiting[s] >= 0) {
        if (output[waiting[s]].run_end_us < 0) continue;
        waiting[s] = -1;
      }
      const int first_node = graph.nodeAt(s, 0);
      std::vector<TaskTiming>& tasks = out.stages[s].tasks;
      const double slow = slow_of[s];
      while (next[s] < tasks_per_device) {
        if (lone_plain) {
          // Lone tasks with nothing beside them (most tasks of most plans): placeLoneTasks, the
          // branch on jitter and on a send stretch taken once per resume, not per task.
          LoneDevice d{first_node,   tasks_per_device,
                       tasks.data(), send_stretch.empty() ? nullptr : send_stretch[s].data(),
                       next[s],      device_free[s],
                       busy[s],      slow};
          const size_t first = next[s];
          auto draw = [&](int vs, Phase phase) { return jitterUs(input.jitter, vs, phase, rng); };
          const int blocked =
              jittered ? (d.stretch == nullptr ? placeLoneTasks<true, false>(lone, d, draw)
                                               : placeLoneTasks<true, true>(lone, d, draw))
                       : (d.stretch == nullptr ? placeLoneTasks<false, false>(lone, d, draw)
                                               : placeLoneTasks<false, true>(lone, d, draw));
          remaining -= d.at - first;
          next[s] = d.at;
          device_free[s] = d.free_us;
          busy[s] = d.busy_us;
          if (blocked >= 0) {  // input not produced yet: try other devices
            waiting[s] = blocked;
            break;
          }
          if (d.at == d.size) break;
        }
        // The task at next[s]: one node, or a fused task's fused_size nodes (timing_engine.h).
        const size_t first = next[s];
        const int head_id = first_node + static_cast<int>(first);
        const TaskNode& head = graph.nodes[head_id];
        const size_t members = static_cast<size_t>(head.fused_size);
        double ready = 0;
        int blocked = -1;  // an input's producer not placed yet
        for (size_t at = first; at < first + members && blocked < 0; ++at) {
          for (const TaskEdge& e : graph.inputs(first_node + static_cast<int>(at))) {
            // A W on its own B inside the fused task (ids follow the device's order).
            if (members > 1 && e.from >= head_id && e.from < head_id + static_cast<int>(members)) {
              continue;
            }
            const Output& from = output[e.from];
            if (from.run_end_us < 0) {
              blocked = e.from;
              break;
            }
            const double arrival = e.transfer ? from.send_end_us : from.run_end_us;
            ready = std::max(ready, arrival);
          }
        }
        if (blocked >= 0) {  // input not produced yet: try other devices
          waiting[s] = blocked;
          break;
        }

        // The run: one task's time, or the fused rule's max(compute, all-to-all).
        double compute_us = 0, comm_us = 0, jitter_us = 0, a2a_factor = 1;
        if (members == 1) {
          compute_us = taskUs(input.stages[head.virtual_stage], head.task.phase);
          jitter_us = jitterUs(input.jitter, head.virtual_stage, head.task.phase, rng);
        } else {
          for (size_t at = first; at < first + members; ++at) {
            const TaskNode& node = graph.nodes[first_node + static_cast<int>(at)];
            const StageCost& cost = input.stages[node.virtual_stage];
            const double a2a_us = overlapUs(cost, node.task.phase);
            compute_us += taskUs(cost, node.task.phase) - a2a_us;
            comm_us += a2a_us;
            if (a2a_us > 0) a2a_factor = std::max(a2a_factor, cost.a2a_compute_slowdown);
            jitter_us += jitterUs(input.jitter, node.virtual_stage, node.task.phase, rng);
          }
        }
        // A fused task's compute slows while the all-to-alls are in flight (overlap_slowdown.h).
        const double body_us =
            members == 1 ? compute_us : fusedTaskUs(compute_us, comm_us, a2a_factor);
        Interval run;
        run.start_us = std::max(device_free[s], ready);
        run.end_us = run.start_us + (body_us + jitter_us) * slow;
        double overlap_slowdown_us = (body_us - std::max(compute_us, comm_us)) * slow;
        for (size_t at = first; at < first + members && param_gathers; ++at) {
          const TaskNode& node = graph.nodes[first_node + static_cast<int>(at)];
          if (node.task.phase != Phase::kForward || gathered[s][node.task.chunk]) continue;
          gathered[s][node.task.chunk] = 1;
          // One chunk: its first module's pre-hook; several: aligned at the iteration's start.
          const double dispatch =
              input.virtual_stages > 1 && input.align_param_gather ? 0.0 : run.start_us;
          overlap_slowdown_us +=
              gatherBeforeForward(input.stages[node.virtual_stage], node.task.chunk, dispatch,
                                  gather_stream_free[s], run, out.stages[s]);
        }
        if (!buckets.empty()) {
          DeviceBuckets& dp = buckets[s];
          // Tasks on a device start in order: buckets already over stay over.
          std::erase_if(dp.in_flight,
                        [&](const SlowInterval& b) { return b.end_us <= run.start_us; });
          for (size_t at = first; at < first + members; ++at) {
            const int chunk = dp.last_gradient_chunk[at];
            if (chunk < 0) continue;
            // A bucket is ready when the task has done its ready offset's work, slowed by the
            // buckets before it (it and later ones start after that point). It is in flight for
            // its time as link sharing left it (its standalone time plus the stretch): compute
            // slows for the time the two really overlap.
            std::vector<double>& ready_us = out.stages[s].bucket_ready_us[chunk];
            const size_t first_sync = firstSyncOf(input, layout, s, chunk);
            const std::vector<BucketCost>& chunk_buckets =
                input.stages[static_cast<size_t>(layout.virtualStage(s, chunk))].buckets;
            for (size_t i = 0; i < chunk_buckets.size(); ++i) {
              const BucketCost& b = chunk_buckets[i];
              ready_us.push_back(slowedEndUs(run.start_us, b.ready_offset_us * slow, dp.in_flight));
              const double start = std::max(dp.stream_free_us, ready_us.back());
              dp.stream_free_us = start + b.allreduce_us + syncStretch(input, s, first_sync + i);
              dp.in_flight.push_back({start, dp.stream_free_us, b.compute_slowdown});
            }
          }
          const double end = slowedEndUs(run.start_us, run.duration(), dp.in_flight);
          overlap_slowdown_us += end - run.end_us;
          run.end_us = end;
        }
        if (at_step) {
          ReductionQueue& q = queues[s];
          StageTimeline& stage = out.stages[s];
          std::erase_if(q.in_flight,
                        [&](const SlowInterval& b) { return b.end_us <= run.start_us; });
          for (size_t at = first; at < first + members; ++at) {
            const TaskNode& node = graph.nodes[first_node + static_cast<int>(at)];
            if (node.task.phase != gradient_phase) continue;
            const std::vector<BucketCost>& reductions =
                input.stages[node.virtual_stage].micro_batch_buckets;
            for (size_t i = 0; i < reductions.size(); ++i) {
              const BucketCost& b = reductions[i];
              // Ready when the task has done its offset's work, slowed by what is in flight.
              const double ready =
                  slowedEndUs(run.start_us, b.ready_offset_us * slow, q.in_flight);
              const double start = std::max(q.stream_free_us, ready);
              q.stream_free_us = start + b.allreduce_us + syncStretch(input, s, q.end_us.size());
              q.end_us.push_back(q.stream_free_us);
              if (b.compute_slowdown > 1) {
                q.in_flight.push_back({start, q.stream_free_us, b.compute_slowdown});
              }
              stage.reduction_ready_us.push_back(ready);
              stage.grad_sync_chunk.push_back(node.task.chunk);
              stage.grad_sync_bucket.push_back(static_cast<int>(i));
            }
          }
          if (!q.in_flight.empty()) {
            const double end = slowedEndUs(run.start_us, run.duration(), q.in_flight);
            overlap_slowdown_us += end - run.end_us;
            run.end_us = end;
          }
        }
        if (!task_stretch.empty()) run.end_us += task_stretch[s][first];
        if (overlap_slowdown_us != 0) {  // on the head, counted once
          std::vector<double>& slowdowns = out.stages[s].overlap_slowdown_us;
          if (slowdowns.empty()) slowdowns.assign(tasks_per_device, 0.0);
          slowdowns[first] = overlap_slowdown_us;
        }
        double free_us = run.end_us;
        for (size_t at = first; at < first + members; ++at) {
          const int id = first_node + static_cast<int>(at);
          const TaskNode& node = graph.nodes[id];
          TaskTiming& t = tasks[at];
          t.run = run;
          t.send_end_us = run.end_us;
          if (node.send == Send::kActivation) t.send_end_us += links.send_forward_us[linkOf(node)];
          if (node.send == Send::kGradient) t.send_end_us += links.send_backward_us[linkOf(node)];
          if (!send_stretch.empty()) t.send_end_us += send_stretch[s][at];
          output[id] = Output{run.end_us, t.send_end_us};
          // A lone task's send holds the device; a fused task's go out on the comm stream.
          if (members == 1) free_us = t.send_end_us;
          if (members == 1) busy[s] += t.send().duration();
        }
        busy[s] += run.duration();
        // A queue bound: past K reductions pending, the compute stream waits for the oldest.
        if (queue_bound > 0 && !queues.empty() && queues[s].end_us.size() > queue_bound) {
          const std::vector<double>& ends = queues[s].end_us;
          const double oldest = ends[ends.size() - queue_bound - 1];
          if (oldest > free_us) {
            out.stages[s].grad_reduce_wait_us += oldest - free_us;
            free_us = oldest;
          }
        }
        device_free[s] = free_us;
        next[s] += members;
        remaining -= members;
      }
    }
    EVSIM_CHECK(remaining < before_sweep, "pipeline schedule {} deadlocked",
                scheduleName(input.schedule));
  }
  for (int s = 0; s < P; ++s) {
    out.stages[s].busy_in_pipeline_us = busy[s];
    out.stages[s].pipeline_end_us = device_free[s];
    out.flush_us = std::max(out.flush_us, device_free[s]);
  }
  return out;
}

// Start of the last task of `chunk` on a device that produces gradients (the last W when the
// backward is split, else the last B): its gradients are complete after it.
double lastGradientTaskStart(const TaskGraph& graph, const StageTimeline& stage, int chunk) {
  const Phase last = graph.split_backward ? Phase::kWeightGrad : Phase::kBackward;
  for (size_t i = stage.tasks.size(); i-- > 0;) {
    const NodeTask& task = graph.nodes[stage.node(i)].task;
    if (task.phase == last && task.chunk == chunk) return stage.tasks[i].run.start_us;
  }
  EVSIM_THROW(Error, "no {} task of chunk {}", phaseName(last), chunk);
}

// The input's device stages P, after checking it is consistent.
int checkedDevices(const TimingInput& input) {
  const size_t K = input.stages.size();
  const int v = input.virtual_stages;
  EVSIM_CHECK(K >= 1 && input.micro_batches >= 1 && !input.pipelines.empty(), "empty timing input");
  EVSIM_CHECK(v >= 1 && K % v == 0 && (v == 1 || pipelineSchedule(input.schedule).allowsChunks()),
              "{} virtual stages of {} per device, schedule {}", K, v,
              scheduleName(input.schedule));
  for (const PipelineCost& p : input.pipelines) {
    EVSIM_CHECK(p.send_forward_us.size() == K - 1 && p.send_backward_us.size() == K - 1,
                "pipeline links: {} / {} for {} stages", p.send_forward_us.size(),
                p.send_backward_us.size(), K);
    EVSIM_CHECK(p.stage_slowdown.empty() || p.stage_slowdown.size() == K / v,
                "{} stage slowdowns for {} device stages", p.stage_slowdown.size(), K / v);
  }
  EVSIM_CHECK(input.jitter.sigma <= 0 || input.jitter.op_us.size() == K,
              "jitter op times for {} of {} virtual stages", input.jitter.op_us.size(), K);
  // Task times are sums of op times: never below 0 (the lone-task path relies on it) nor NaN.
  for (size_t k = 0; k < K; ++k) {
    const StageCost& c = input.stages[k];
    EVSIM_CHECK(c.forward_us >= 0 && c.backward_us >= 0 && c.weight_grad_us >= 0,
                "virtual stage {}: task times F {} B {} W {} us, not all >= 0", k, c.forward_us,
                c.backward_us, c.weight_grad_us);
  }
  return static_cast<int>(K) / v;
}

}  // namespace

TaskGraph taskGraphOf(const TimingInput& input) {
  return buildTaskGraph(input.schedule, checkedDevices(input), input.virtual_stages,
                        input.micro_batches, input.microbatch_group, input.fuse_moe_a2a);
}

IterationTimeline computeTimeline(const TimingInput& input) {
  return computeTimeline(input, taskGraphOf(input));
}

IterationTimeline computeTimeline(const TimingInput& input, TaskGraph graph) {
  const int P = checkedDevices(input);
  EVSIM_CHECK(graph.devices == P, "a task graph of {} devices for {}", graph.devices, P);
  const size_t K = input.stages.size();
  const int v = input.virtual_stages;
  const PipelineLayout pipeline = pipelineLayout(input.schedule, static_cast<int>(K) / v, v);
  IterationTimeline out;
  out.graph = std::move(graph);
  for (size_t k = 0; k < input.pipelines.size(); ++k) {
    // One generator per class, seeded apart (splitmix-style offsets of the jitter seed).
    const uint64_t seed = input.jitter.seed + 0x9E3779B97F4A7C15ull * (k + 1);
    static const std::vector<std::vector<double>> kNone;
    const auto& stretch = input.send_stretch_us.empty() ? kNone : input.send_stretch_us[k];
    const auto& task = input.task_stretch_us.empty() ? kNone : input.task_stretch_us[k];
    out.pipelines.push_back(
        timePipeline(input, out.graph, input.pipelines[k], stretch, task, seed));
  }
  // Micro-batch chunks held at once along each device's order (the memory model's walk).
  for (int s = 0; s < P; ++s) {
    const int peak = peakInFlight(out.graph, s);
    for (PipelineTimeline& p : out.pipelines) p.stages[s].peak_activations = peak;
  }

  // Data parallelism: a chunk's gradient collectives span every replica, so each one starts when
  // the slowest replica is ready for it; a device's syncs share its DP stream.
  for (int s = 0; s < P; ++s) {
    std::vector<Interval> sync;
    std::vector<int> sync_chunk;
    double stream_free = 0;
    double optimizer_us = 0;
    double param_allgather_us = 0;
    std::vector<int> sync_bucket;
    if (input.grad_reduce_at_step) {
      // The reductions in issue order (the same in every class: one graph, one order), each
      // ready in every replica at the latest class's ready time.
      const StageTimeline& first = out.pipelines.front().stages[s];
      for (size_t i = 0; i < first.reduction_ready_us.size(); ++i) {
        double ready = 0;
        for (const PipelineTimeline& p : out.pipelines) {
          ready = std::max(ready, p.stages[s].reduction_ready_us[i]);
        }
        const int c = first.grad_sync_chunk[i];
        const StageCost& cost = input.stages[static_cast<size_t>(pipeline.virtualStage(s, c))];
        Interval r{std::max(stream_free, ready), 0};
        r.end_us = r.start_us +
                   cost.micro_batch_buckets[static_cast<size_t>(first.grad_sync_bucket[i])]
                       .allreduce_us +
                   syncStretch(input, s, sync.size());
        stream_free = r.end_us;
        sync.push_back(r);
        sync_chunk.push_back(c);
        sync_bucket.push_back(first.grad_sync_bucket[i]);
      }
    }
    for (int c = v - 1; c >= 0; --c) {
      const StageCost& cost = input.stages[static_cast<size_t>(pipeline.virtualStage(s, c))];
      optimizer_us += cost.optimizer_us;
      param_allgather_us += cost.param_allgather_us;
      if (input.dp_overlap && !cost.buckets.empty()) {
        double last_backward_start = 0;
        for (const PipelineTimeline& p : out.pipelines) {
          last_backward_start =
              std::max(last_backward_start, lastGradientTaskStart(out.graph, p.stages[s], c));
        }
        for (size_t b = 0; b < cost.buckets.size(); ++b) {
          // Ready in every replica: at the latest start plus its offset, or where the overlap
          // slowdown placed it in each class (timePipeline).
          double ready = last_backward_start + cost.buckets[b].ready_offset_us;
          if (!out.pipelines[0].stages[s].bucket_ready_us.empty()) {
            ready = 0;
            for (const PipelineTimeline& p : out.pipelines) {
              ready = std::max(ready, p.stages[s].bucket_ready_us[c][b]);
            }
          }
          const BucketCost& bucket = cost.buckets[b];
          Interval i;
          i.start_us = std::max(stream_free, ready);
          i.end_us = i.start_us + bucket.allreduce_us + syncStretch(input, s, sync.size());
          stream_free = i.end_us;
          sync.push_back(i);
          sync_chunk.push_back(c);
        }
      } else if (cost.grad_allreduce_us > 0) {
        double ready = 0;
        for (const PipelineTimeline& p : out.pipelines)
          ready = std::max(ready, p.stages[s].pipeline_end_us);
        Interval i{std::max(stream_free, ready), 0};
        i.end_us = i.start_us + cost.grad_allreduce_us + syncStretch(input, s, sync.size());
        stream_free = i.end_us;
        sync.push_back(i);
        sync_chunk.push_back(c);
      }
    }
    double optimizer_end = 0;
    for (size_t k = 0; k < out.pipelines.size(); ++k) {
      StageTimeline& stage = out.pipelines[k].stages[s];
      stage.grad_sync = sync;
      stage.grad_sync_chunk = sync_chunk;
      stage.grad_sync_bucket = sync_bucket;
      stage.optimizer.start_us = std::max(stage.pipeline_end_us, stream_free);
      stage.optimizer.end_us =
          stage.optimizer.start_us + optimizer_us * slowdown(input.pipelines[k], s);
      optimizer_end = std::max(optimizer_end, stage.optimizer.end_us);
      out.iteration_us = std::max(out.iteration_us, stage.optimizer.end_us);
    }
    if (param_allgather_us > 0) {
      if (!input.param_allgather_stretch_us.empty()) {
        param_allgather_us += input.param_allgather_stretch_us[s];
      }
      const Interval gather{optimizer_end, optimizer_end + param_allgather_us};
      for (PipelineTimeline& p : out.pipelines) p.stages[s].param_allgather = gather;
      out.iteration_us = std::max(out.iteration_us, gather.end_us);
    }
  }
  return out;
}

}  // namespace evsim

// A simulation's metrics from its timeline: per device (deviceMetrics), folded over devices and
// stages into the summary (summarize), and MFU against the device's peaks. Apart from
// simulation.cpp, which builds the timing input and runs the timing: this only reads its result.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/units.h"
#include "modeler/simulation.h"
#include "modeler/simulation_internal.h"

namespace evsim {

namespace {

double streamTime(const OpList& ops, const std::vector<EventCost>& costs, Stream stream) {
  double t = 0;
  for (const OpInstance& op : ops) {
    if (op.stream == stream) t += costs[op.event].time_us;
  }
  return t;
}

// Every per-device figure, for min / mean / max folds.
// clang-format off
constexpr double DeviceMetrics::*kDeviceFields[] = {&DeviceMetrics::compute_us,
                                                    &DeviceMetrics::overlap_slowdown_us,
                                                    &DeviceMetrics::tp_comm_us,
                                                    &DeviceMetrics::exposed_tp_comm_us,
                                                    &DeviceMetrics::pp_comm_us,
                                                    &DeviceMetrics::dp_comm_us,
                                                    &DeviceMetrics::exposed_dp_comm_us,
                                                    &DeviceMetrics::zero_comm_us,
                                                    &DeviceMetrics::cp_comm_us,
                                                    &DeviceMetrics::exposed_cp_comm_us,
                                                    &DeviceMetrics::ep_comm_us,
                                                    &DeviceMetrics::offload_us,
                                                    &DeviceMetrics::exposed_offload_us,
                                                    &DeviceMetrics::idle_us,
                                                    &DeviceMetrics::bubble_fraction,
                                                    &DeviceMetrics::utilization};
// clang-format on

void foldDevice(DeviceMetrics& min, DeviceMetrics& max, DeviceMetrics& sum, const DeviceMetrics& d,
                double weight, double DeviceMetrics::*field) {
  min.*field = std::min(min.*field, d.*field);
  max.*field = std::max(max.*field, d.*field);
  sum.*field += d.*field * weight;
}

// The expert all-to-all time that fused tasks hide on one device (deviceMetrics).
double hiddenAllToAllUs(const Simulation& sim, const StageTimeline& timeline) {
  double hidden = 0;
  const TaskGraph& graph = sim.timeline.graph;
  if (!graph.fused) return hidden;  // no fused task: a pass over the tasks for nothing
  for (size_t i = 0; i < timeline.tasks.size(); ++i) {
    const int members = graph.nodes[timeline.node(i)].fused_size;
    if (members < 2) continue;
    double a2a = 0, compute = 0;
    for (size_t at = i; at < i + static_cast<size_t>(members); ++at) {
      const TaskNode& node = graph.nodes[timeline.node(at)];
      const StageCost& cost = sim.input.stages[node.virtual_stage];
      const Phase phase = node.task.phase;
      const double task = phase == Phase::kForward    ? cost.forward_us
                          : phase == Phase::kBackward ? cost.backward_us
                                                      : cost.weight_grad_us;
      const double part = std::min(task, phase == Phase::kForward    ? cost.forward_overlap_us
                                         : phase == Phase::kBackward ? cost.backward_overlap_us
                                                                     : 0.0);
      a2a += part;
      compute += task - part;
    }
    hidden += std::min(a2a, compute);
  }
  return hidden;
}

}  // namespace

DeviceMetrics deviceMetrics(const Simulation& sim, int pipeline, int stage) {
  const StageTimeline& timeline = sim.timeline.pipelines[pipeline].stages[stage];
  const double m = static_cast<double>(sim.plan.micro_batches);
  DeviceMetrics d;
  double zero3_us = 0, zero3_exposed_us = 0, optimizer_host_us = 0;
  for (int k : sim.plan.deviceChunks(stage)) {
    const StagePlan& plan = sim.plan.stages[k];
    // One micro-batch's forward and backward, m times: all of a stream's time, or what the ops
    // it runs beside leave exposed.
    auto tasks = [&](auto time_of, Stream stream) {
      return m *
             (time_of(plan.forward, sim.costs, stream) + time_of(plan.backward, sim.costs, stream));
    };
    // What each stream leaves exposed: one pass over each list serves every stream.
    const auto exposed_forward = exposedByStream(plan.forward, sim.costs);
    const auto exposed_backward = exposedByStream(plan.backward, sim.costs);
    auto exposed = [&](Stream stream) {
      const size_t i = static_cast<size_t>(stream);
      return m * (exposed_forward[i] + exposed_backward[i]);
    };
    d.compute_us += tasks(streamTime, Stream::kCompute);
    // Compute slowed beside the task's own transfers (a CP exchange): compute time too.
    const StageOpOffsets& offsets = sim.offsets[k];
    d.overlap_slowdown_us += m * (offsets.forward_slowdown_us + offsets.backward_slowdown_us);
    d.tp_comm_us += tasks(streamTime, Stream::kTpComm);
    d.exposed_tp_comm_us += exposed(Stream::kTpComm);
    // DeepEP's RDMA hop runs beside its NVLink hop: the pair costs the longer.
    d.ep_comm_us += exposed(Stream::kEpComm);
    d.cp_comm_us += tasks(streamTime, Stream::kCpComm);
    d.exposed_cp_comm_us += exposed(Stream::kCpComm);
    d.offload_us += tasks(streamTime, Stream::kHost);
    d.exposed_offload_us += exposed(Stream::kHost);
    // The optimizer step's host side (copies, the host's Adam) runs between synchronisations:
    // nothing hides it.
    for (const OpInstance& op : plan.optimizer) {
      if (op.stream != Stream::kHost) continue;
      optimizer_host_us += issued(sim.costs[op.event]);
    }
    // ZeRO-3 gathers and scatters inside the tasks: the prefetched ones cost only what outlasts
    // the layer beside them (sharded_prefetch.h), the task's first gathers and last scatters all.
    zero3_us += tasks(streamTime, Stream::kDpComm);
    zero3_exposed_us += exposed(Stream::kDpComm);
  }
  // A straggler's tasks (compute and TP collectives alike) run `slow` times longer.
  const double slow = stageSlowdown(sim, pipeline, stage);
  // Fused F&B tasks (DualPipeV, --overlap-moe-expert-parallel-comm): of A all-to-all beside C
  // compute, min(A, C) is hidden and max(0, A - C) left exposed (timing_engine.h's rule; the
  // compute's slowdown beside it is overlap slowdown), so ep-comm counts only the latter.
  d.ep_comm_us -= slow * hiddenAllToAllUs(sim, timeline);
  d.overlap_slowdown_us *= slow;
  // And beside the DP buckets (timing_engine.cpp stretched those tasks after the straggler). The
  // sends' time in the same pass (summed in the same order: the same bits as a pass of its own).
  double pp_comm_us = 0;
  for (size_t i = 0; i < timeline.tasks.size(); ++i) {
    d.overlap_slowdown_us += timeline.overlapSlowdownUs(i);
    pp_comm_us += timeline.tasks[i].send().duration();
  }
  d.compute_us *= slow;
  d.tp_comm_us *= slow;
  d.exposed_tp_comm_us *= slow;
  // What link sharing added to the task's collectives across nodes (link_flows.h): in the
  // timeline's runs, hence communication time of their kinds (a blocking TP, EP or ZeRO-3
  // collective is exposed; a CP exchange only past the attention step beside it, the rest hidden),
  // and compute slowed beside the longer exchanges (stretched_task.h).
  if (!sim.task_link_stretch.empty()) {
    const TaskLinkStretch& shared = sim.task_link_stretch[pipeline][stage];
    d.tp_comm_us += shared.tp_us;
    d.exposed_tp_comm_us += shared.tp_us;
    d.cp_comm_us += shared.cp_us + shared.cp_hidden_us;
    d.exposed_cp_comm_us += shared.cp_us;
    d.overlap_slowdown_us += shared.slowdown_us;
    d.ep_comm_us += shared.ep_us;
    zero3_us += shared.zero3_us;
    zero3_exposed_us += shared.zero3_us;
  }
  // The optimizer step (stretched by `slow` like the rest, timing_engine.cpp) less its host side.
  d.compute_us += timeline.optimizer.duration() - optimizer_host_us * slow + d.overlap_slowdown_us;
  d.offload_us += optimizer_host_us * slow;
  d.exposed_offload_us += optimizer_host_us * slow;
  d.pp_comm_us = pp_comm_us;
  d.dp_comm_us += zero3_us + timeline.param_allgather.duration();
  d.exposed_dp_comm_us += zero3_exposed_us + timeline.param_allgather.duration();
  d.zero_comm_us = zero3_exposed_us + timeline.param_allgather.duration();
  // --overlap-param-gather: the gathers beside the first forwards, exposed where they waited.
  for (const Interval& gather : timeline.param_gathers) d.dp_comm_us += gather.duration();
  d.exposed_dp_comm_us += timeline.param_gather_wait_us;
  d.zero_comm_us += timeline.param_gather_wait_us;
  for (const Interval& sync : timeline.grad_sync) {
    d.dp_comm_us += sync.duration();
    // Overlapped buckets only cost the device the part after its own compute has finished.
    // So do ZeRO-2's reductions queued until the step (--grad-reduce-sync step), whose waits
    // for a queue bound are exposed.
    const bool beside = sim.input.dp_overlap || sim.input.grad_reduce_at_step;
    double hidden_until = beside ? timeline.pipeline_end_us : sync.start_us;
    d.exposed_dp_comm_us += std::max(0.0, sync.end_us - std::max(sync.start_us, hidden_until));
  }
  d.exposed_dp_comm_us += timeline.grad_reduce_wait_us;
  double busy = d.compute_us + d.exposed_tp_comm_us + d.pp_comm_us + d.exposed_dp_comm_us +
                d.ep_comm_us + d.exposed_cp_comm_us + d.exposed_offload_us;
  d.idle_us = std::max(0.0, sim.timeline.iteration_us - busy);
  double flush = sim.timeline.pipelines[pipeline].flush_us;
  d.bubble_fraction = flush > 0 ? std::max(0.0, (flush - timeline.busy_in_pipeline_us) / flush) : 0;
  d.utilization = sim.timeline.iteration_us > 0 ? d.compute_us / sim.timeline.iteration_us : 0;
  return d;
}

// simulate()'s metrics from its timeline.
void summarize(Simulation& sim) {
  const IterationPlan& p = sim.plan;
  const std::vector<EventCost>& c = sim.costs;
  // Finite event times can still add up past double's range (issue 17: an infinite time, exit 0).
  if (!std::isfinite(sim.timeline.iteration_us)) {
    EVSIM_THROW(InputError, "the iteration time is not finite: the inputs imply more than {:g} us",
                std::numeric_limits<double>::max());
  }

  // Metrics.
  SimulationSummary& sum = sim.summary;
  const Strategy& strategy = p.strategy;
  sum.iteration_us = sim.timeline.iteration_us;
  const double seconds = sum.iteration_us / kUsPerSecond;
  sum.samples_per_s = strategy.global_batch / seconds;
  sum.tokens_per_s = sum.samples_per_s * p.model.seq_length;
  std::array<double, kProvenanceCount> time_by_source{};
  for (int e = 0; e < p.events.size(); ++e) {
    const UniqueEvent& u = p.events[e];
    if (countsModelFlops(u.event)) sum.model_flops += u.event.flops * u.count;
    time_by_source[static_cast<int>(c[e].provenance)] += c[e].time_us * u.count;
  }
  // MFU counts the model's FLOPs only: recomputed forward ops are hardware work (HFU), not model
  // work (Korthikanti et al. 2022), so they come off again.
  const double devices_per_stage = static_cast<double>(strategy.tp) * strategy.cp * strategy.dp;
  for (const StagePlan& stage : p.stages) {
    for (const OpInstance& op : stage.backward) {
      if (op.recompute && countsModelFlops(p.events[op.event].event)) {
        sum.model_flops -= p.events[op.event].event.flops * static_cast<double>(p.micro_batches) *
                           devices_per_stage;
      }
    }
  }
  double total_time = 0;
  for (double t : time_by_source) total_time += t;
  for (int i = 0; i < kProvenanceCount; ++i) {
    sum.provenance_share[i] = total_time > 0 ? time_by_source[i] / total_time : 0;
  }
  sum.flops_per_gpu_per_s = sum.model_flops / seconds / static_cast<double>(strategy.gpus());
  sum.mfu_by_peak = mfuFigures(p.cluster.device, p.model, sum.flops_per_gpu_per_s);
  sum.mfu = sum.mfu_by_peak.front().mfu;

  constexpr double kInf = std::numeric_limits<double>::infinity();
  DeviceMetrics lo, hi, total;
  for (auto field : kDeviceFields) lo.*field = kInf;
  double weight_sum = 0, best_busy = -1;
  for (int s = 0; s < p.deviceStages(); ++s) {
    StageSummary stage;
    stage.stage = s;
    for (int k : p.deviceChunks(s)) stage.num_layers += p.stages[k].num_layers;
    double stage_weight = 0;
    for (size_t k = 0; k < p.pipelines.size(); ++k) {
      DeviceMetrics d = deviceMetrics(sim, static_cast<int>(k), s);
      double weight =
          static_cast<double>(p.pipelines[k].replicas.size()) * strategy.tp * strategy.cp;
      for (auto field : kDeviceFields) {
        foldDevice(lo, hi, total, d, weight, field);
        stage.device.*field += d.*field * weight;
      }
      stage_weight += weight;
      stage.peak_activations =
          std::max(stage.peak_activations, sim.timeline.pipelines[k].stages[s].peak_activations);
    }
    for (auto field : kDeviceFields) {
      stage.device.*field /= stage_weight;
    }
    weight_sum += stage_weight;
    double busy = sum.iteration_us - stage.device.idle_us;
    if (busy > best_busy) {
      best_busy = busy;
      sum.critical_stage = stage.stage;
    }
    sum.stages.push_back(stage);
  }
  for (auto field : kDeviceFields) {
    total.*field /= weight_sum;
  }
  sum.min_device = lo;
  sum.max_device = hi;
  sum.mean_device = total;
  sum.bubble_fraction = total.bubble_fraction;
}

std::vector<MfuFigure> mfuFigures(const DeviceSpec& device, const ModelConfig& model,
                                  double flops_per_gpu_per_s) {
  std::vector<MfuFigure> figures;
  for (DType dtype : {peakDType(model.gemmDtype()), model.dtype}) {
    if (!figures.empty() && figures.front().dtype == dtype) break;
    const double peak_tflops = device.peakTflops(dtype);
    figures.push_back({dtype, peak_tflops, flops_per_gpu_per_s / (peak_tflops * kFlopsPerTflop)});
  }
  return figures;
}

std::string mfuText(const std::vector<MfuFigure>& figures) {
  std::string out;
  for (const MfuFigure& f : figures) {
    out += fmt::format("{}{:.1f}% of {:g} TFLOP/s {}", out.empty() ? "" : ", ", 100 * f.mfu,
                       f.peak_tflops, dtypeName(f.dtype));
  }
  return out;
}

}  // namespace evsim

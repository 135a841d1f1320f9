#include "modeler/simulation.h"
#include "modeler/simulation_in_place.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/units.h"
#include "modeler/link_flows.h"
#include "modeler/op_offsets.h"
#include "modeler/stretched_task.h"
#include "modeler/simulation_internal.h"

namespace evsim {

namespace {

// Each op's start within its task (op_offsets.h) into `starts` (an entry for every op of `ops`,
// selected or not), and the task's duration, compute beside an overlapping transfer slowed.
template <typename Select>
double taskOpStarts(const IterationPlan& plan, const OpList& ops,
                    const std::vector<EventCost>& costs, Select in_task,
                    std::vector<double>& starts) {
  starts.resize(ops.size());
  return opOffsets(
      ops, in_task,
      [&](const OpInstance& op) {
        const EventCost& c = costs[op.event];
        return std::pair{issueHostUs(op, c), c.time_us};
      },
      [&](size_t i, double start) { starts[i] = start; },
      [&](const OpInstance& op) {
        return op.stream == Stream::kHost
                   ? 1.0
                   : slowdownBeside(plan.cluster.device, plan.events[op.event]);
      });
}

// The time the overlap slowdown adds to a task (its duration less the same task's without it): 0
// at once when no op of the task runs beside others on a communication stream.
template <typename Select>
double taskSlowdownUs(const IterationPlan& plan, const OpList& ops,
                      const std::vector<EventCost>& costs, Select in_task, double slowed_us) {
  const OverlapSlowdown& f = plan.cluster.device.overlap_slowdown;
  if (f.nvlink.value <= 1 && f.network.value <= 1) return 0;
  const bool beside_transfer = std::any_of(ops.begin(), ops.end(), [&](const OpInstance& op) {
    return op.overlap_ops > 0 && op.stream != Stream::kHost && in_task(op);
  });
  if (!beside_transfer) return 0;
  const double alone_us = opOffsets(
      ops, in_task,
      [&](const OpInstance& op) {
        return std::pair{issueHostUs(op, costs[op.event]), costs[op.event].time_us};
      },
      [](size_t, double) {});
  return slowed_us - alone_us;
}

}  // namespace

// The time the device waits on each stream's ops in one pass over a task's list, by op_offsets.h's
// rule without host time or slowdown: a blocking op's whole time (and any wait for its stream), an
// op beside the next n ops what outlasts the device's own work when it is released. Ops beside
// the same ops run one at a time on their stream (a ZeRO-3 scatter, then the next gather), so a
// pair [S, G] beside a layer leaves max(0, S + G - layer) exposed, not the sum of their
// separate excesses.
std::array<double, kStreamCount> exposedByStream(const OpList& ops,
                                                 const std::vector<EventCost>& costs) {
  struct Beside {
    size_t release;
    double end;
    Stream stream;
  };
  std::vector<Beside> beside;
  std::array<double, kStreamCount> stream_free{}, exposed{};
  double device_free = 0;
  auto wait_until = [&](double end, Stream waited_on) {
    if (end <= device_free) return;
    exposed[static_cast<size_t>(waited_on)] += end - device_free;
    device_free = end;
  };
  for (size_t i = 0; i <= ops.size(); ++i) {
    // Released here (or at the task's end, which waits for every op).
    for (size_t j = 0; j < beside.size();) {
      if (beside[j].release <= i || i == ops.size()) {
        wait_until(beside[j].end, beside[j].stream);
        beside[j] = beside.back();
        beside.pop_back();
      } else {
        ++j;
      }
    }
    if (i == ops.size()) break;
    const OpInstance& op = ops[i];
    const double time_us = costs[op.event].time_us;
    double& free_at = stream_free[static_cast<size_t>(op.stream)];
    if (op.overlap_ops > 0) {
      const double start = std::max(device_free, free_at);
      if (!op.pipelined_with_next) free_at = start + time_us;
      beside.push_back({i + 1 + static_cast<size_t>(op.overlap_ops), start + time_us, op.stream});
      continue;
    }
    wait_until(free_at, op.stream);  // its stream still busy with an op that ran beside others
    exposed[static_cast<size_t>(op.stream)] += time_us;
    device_free += time_us;
  }
  return exposed;
}

namespace {

double exposedStreamTime(const OpList& ops, const std::vector<EventCost>& costs, Stream stream) {
  return exposedByStream(ops, costs)[static_cast<size_t>(stream)];
}

}  // namespace

// An op outside a task — a P2P send, the gradient sync, the optimizer step — starts after a
// synchronisation (the task's end, or the collective's rendezvous), so its host issue time is not
// hidden behind earlier kernels: it adds to the op's time.
double issued(const EventCost& c) { return c.host_us + c.time_us; }

TimingInput timingInput(const IterationPlan& p, const std::vector<EventCost>& c,
                        std::vector<StageOpOffsets>& offsets_out) {
  TimingInput input;
  input.schedule = p.strategy.schedule;
  input.micro_batches = p.micro_batches;
  input.virtual_stages = p.chunksPerDevice();
  input.microbatch_group = p.strategy.microbatch_group;
  input.align_param_gather = p.strategy.framework != Framework::kFsdp;
  input.dp_overlap = p.strategy.dp_overlap;
  input.grad_reduce_at_step = p.strategy.reducesAtStep();
  input.grad_reduce_queue = p.strategy.grad_reduce_queue;
  input.fuse_moe_a2a = p.strategy.moe_a2a_overlap;
  const bool split = pipelineSchedule(input.schedule).splitsBackward();
  const bool fuses = fusesTasks(p.strategy);
  offsets_out.assign(p.stages.size(), StageOpOffsets{});
  // Sized once: a search times a plan per simulation, and each growth was an allocation (most
  // under the search heap's lock: bench/RESULTS.md, session 29, alloc29).
  input.stages.reserve(p.stages.size());
  input.pipelines.reserve(p.pipelines.size());
  std::vector<double> w_starts;  // W's op starts, per stage in turn
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const StagePlan& stage = p.stages[s];
    StageOpOffsets& offsets = offsets_out[s];
    StageCost cost;
    auto all = [](const OpInstance&) { return true; };
    auto in_b = [&](const OpInstance& op) { return runsIn(op, Phase::kBackward, split); };
    cost.forward_us = taskOpStarts(p, stage.forward, c, all, offsets.forward_start_us);
    cost.backward_us = taskOpStarts(p, stage.backward, c, in_b, offsets.backward_start_us);
    offsets.forward_slowdown_us = taskSlowdownUs(p, stage.forward, c, all, cost.forward_us);
    offsets.backward_slowdown_us = taskSlowdownUs(p, stage.backward, c, in_b, cost.backward_us);
    if (split) {
      // W's offsets go into the same per-op vector: each op sits in exactly one of B and W.
      auto in_w = [](const OpInstance& op) { return runsIn(op, Phase::kWeightGrad, true); };
      cost.weight_grad_us = taskOpStarts(p, stage.backward, c, in_w, w_starts);
      offsets.backward_slowdown_us +=
          taskSlowdownUs(p, stage.backward, c, in_w, cost.weight_grad_us);
      for (size_t i = 0; i < w_starts.size(); ++i) {
        if (in_w(stage.backward[i])) offsets.backward_start_us[i] = w_starts[i];
      }
    }
    if (fuses) {
      // A fused task's partner hides the expert all-to-alls (timing_engine.h).
      // (DeepEP's two pipelined hops count as the longer: exposedStreamTime.)
      cost.forward_overlap_us = exposedStreamTime(stage.forward, c, Stream::kEpComm);
      cost.backward_overlap_us = exposedStreamTime(stage.backward, c, Stream::kEpComm);
      for (const OpInstance& op : stage.forward) {
        if (op.stream != Stream::kEpComm) continue;
        cost.a2a_compute_slowdown = std::max(cost.a2a_compute_slowdown,
                                             slowdownBeside(p.cluster.device, p.events[op.event]));
      }
    }
    for (const OpInstance& op : stage.optimizer) cost.optimizer_us += issued(c[op.event]);
    if (stage.gradSyncEvent() >= 0) cost.grad_allreduce_us = issued(c[stage.gradSyncEvent()]);
    if (stage.dp_allgather >= 0) cost.param_allgather_us = issued(c[stage.dp_allgather]);
    // Expert parallelism: the routed experts' sync and gather follow the dense ones.
    if (stage.expert_grad_sync >= 0) cost.grad_allreduce_us += issued(c[stage.expert_grad_sync]);
    if (stage.expert_allgather >= 0) cost.param_allgather_us += issued(c[stage.expert_allgather]);
    cost.param_gathers.reserve(stage.param_buckets.size());
    for (const ParamGatherBucket& b : stage.param_buckets) {
      cost.param_gathers.push_back(
          ParamGatherCost{offsets.forward_start_us[static_cast<size_t>(b.needed_before_op)],
                          c[b.event].time_us, slowdownBeside(p.cluster.device, p.events[b.event])});
    }
    // DDP's buckets, complete after their op in the chunk's last gradient task; ZeRO-2's under
    // --grad-reduce-sync step after theirs in every gradient task (task_graph.h: bucketIssueOp).
    auto bucketCost = [&](const GradBucket& b) {
      const int op = bucketIssueOp(stage.backward, b.ready_after_op, split);
      const double ready =
          op < 0 ? 0 : offsets.backward_start_us[op] + c[stage.backward[op].event].time_us;
      return BucketCost{ready, c[b.event].time_us,
                        slowdownBeside(p.cluster.device, p.events[b.event])};
    };
    cost.buckets.reserve(stage.dp_buckets.size());
    cost.micro_batch_buckets.reserve(stage.micro_batch_buckets.size());
    for (const GradBucket& b : stage.dp_buckets) cost.buckets.push_back(bucketCost(b));
    for (const GradBucket& b : stage.micro_batch_buckets) {
      cost.micro_batch_buckets.push_back(bucketCost(b));
    }
    input.stages.push_back(std::move(cost));
  }
  for (const PipelineClass& pipeline : p.pipelines) {
    PipelineCost links;
    links.send_forward_us.reserve(pipeline.forward_p2p.size());
    links.send_backward_us.reserve(pipeline.backward_p2p.size());
    // A link inside one device (the V layout's turn) has no transfer: 0.
    for (int e : pipeline.forward_p2p) links.send_forward_us.push_back(e < 0 ? 0 : issued(c[e]));
    for (int e : pipeline.backward_p2p) links.send_backward_us.push_back(e < 0 ? 0 : issued(c[e]));
    input.pipelines.push_back(std::move(links));
  }
  return input;
}

double stageSlowdown(const Simulation& sim, int pipeline, int stage) {
  const std::vector<double>& f = sim.input.pipelines[pipeline].stage_slowdown;
  return f.empty() ? 1.0 : f[stage];
}

namespace {

// simulate()'s timing: the unshared timeline (its iteration time in `unshared_us`), then, unless
// that already ends after `limit_us` (false), link sharing.
bool timeSimulation(Simulation& sim, std::vector<std::vector<double>> stage_slowdown,
                    double limit_us, double& unshared_us) {
  const IterationPlan& p = sim.plan;
  EVSIM_CHECK(static_cast<int>(sim.costs.size()) == p.events.size(), "{} costs for {} events",
              sim.costs.size(), p.events.size());
  sim.input = timingInput(p, sim.costs, sim.offsets);
  if (!stage_slowdown.empty()) {
    EVSIM_CHECK(stage_slowdown.size() == p.pipelines.size(), "{} slowdown vectors for {} classes",
                stage_slowdown.size(), p.pipelines.size());
    for (size_t k = 0; k < stage_slowdown.size(); ++k) {
      sim.input.pipelines[k].stage_slowdown = std::move(stage_slowdown[k]);
    }
  }
  sim.timeline = computeTimeline(sim.input);
  unshared_us = sim.timeline.iteration_us;
  // (Not an infinite time: summarize() refuses it, as it does when nothing is pruned.)
  if (unshared_us > limit_us && std::isfinite(unshared_us)) return false;
  shareLinksOverTime(p, sim.costs, sim.offsets, sim.input, sim.timeline, &sim.task_link_stretch);
  return true;
}

}  // namespace

Simulation simulate(IterationPlan plan, std::vector<EventCost> costs,
                    std::vector<std::vector<double>> stage_slowdown) {
  Simulation sim;
  sim.plan = std::move(plan);
  sim.costs = std::move(costs);
  double unshared_us = 0;
  timeSimulation(sim, std::move(stage_slowdown), std::numeric_limits<double>::infinity(),
                 unshared_us);
  summarize(sim);
  return sim;
}

bool simulateWithinInPlace(Simulation& sim, double limit_us, double& unshared_us) {
  // What timeSimulation and summarize add to rather than set: as a new Simulation's.
  sim.task_link_stretch.clear();
  sim.summary = SimulationSummary{};
  if (!timeSimulation(sim, {}, limit_us, unshared_us)) return false;
  summarize(sim);
  return true;
}

// The search's path (simulateWithinInPlace) on a Simulation of its own: one timing and summary
// path for both, so the tests of this one test what the search runs.
std::optional<Simulation> simulateWithin(IterationPlan plan, std::vector<EventCost> costs,
                                         double limit_us, double& unshared_us) {
  std::optional<Simulation> sim(std::in_place);
  sim->plan = std::move(plan);
  sim->costs = std::move(costs);
  if (!simulateWithinInPlace(*sim, limit_us, unshared_us)) return std::nullopt;
  return sim;
}

}  // namespace evsim

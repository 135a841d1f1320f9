// What sharing added to each transfer, as the timing's stretch fields; link_stretch.h.
#include "modeler/link_stretch.h"

#include <algorithm>
#include <array>
#include <utility>

#include "modeler/stretched_task.h"

namespace evsim {

namespace {

constexpr double kStretchedUs = 1e-3;      // less is rounding

size_t kindSlot(FlowKind kind) {  // TaskLinkStretch's order: tp, cp, ep, zero3
  return kind == FlowKind::kTp ? 0 : kind == FlowKind::kCp ? 1 : kind == FlowKind::kEp ? 2 : 3;
}

}  // namespace

UnsharedTimeline::UnsharedTimeline(const IterationTimeline& timeline, const InTaskOps& in_task) {
  const size_t classes = timeline.pipelines.size();
  tasks.resize(classes);
  run_us.resize(classes);
  // A lone task (not fused) with collectives across nodes: the same in every class (one graph,
  // one plan's ops), as walkTimelineFlows lists them.
  const TaskGraph& graph = timeline.graph;
  const bool lone =
      !in_task.empty() &&
      std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const TaskNode& n) {
        return n.fused_size == 1 && !in_task[n.virtual_stage][phaseIndex(n.task.phase)].empty();
      });
  for (size_t k = 0; k < classes; ++k) {
    for (const StageTimeline& stage : timeline.pipelines[k].stages) {
      tasks[k].push_back(stage.tasks.size());
      if (!lone) continue;
      std::vector<double>& runs = run_us[k].emplace_back();
      runs.reserve(stage.tasks.size());
      for (const TaskTiming& t : stage.tasks) runs.push_back(t.run.duration());
    }
  }
  for (const StageTimeline& stage : timeline.pipelines.front().stages) {
    syncs.push_back(stage.grad_sync.size());
  }
}

// Sets the stretch fields of `input` from shared ends, and `by_kind` (per class and device stage)
// from the in-task ones; returns whether any is above rounding. `graph`: the unshared timing's.
bool applyStretch(const IterationPlan& plan, const std::vector<EventCost>& costs,
                  const TimelineFlows& flows, const SharingResult& shared, int stages,
                  TimingInput& input, const UnsharedTimeline& timeline, const TaskGraph& graph,
                  std::vector<std::vector<TaskLinkStretch>>* by_kind) {
  const FlowList& list = flows.list;
  const FlowEnds& ends = shared.end_us;
  // Only flows that sharing lengthened (extra above 0) stretch anything: a flow's entry starts
  // at 0 and takes the larger of it and what the flow added, a task's stretch takes only flows
  // with some, so the walks below visit those alone (FlowEnds::forEachExtra; issue 34: most of
  // ~10^6 flows add nothing, and each visit reads the flow's origin).
  bool changed = false;
  ends.forEachExtra([&](size_t, double extra, double) {
    changed = extra > kStretchedUs;
    return !changed;
  });
  if (!changed) return false;
  // What sharing added to the flow `after` that flow `i` follows: flow i - 1's is the walk's.
  auto extraOfAfter = [&](size_t i, int after, double before) {
    return static_cast<size_t>(after) + 1 == i ? before : ends.extraUs(static_cast<size_t>(after));
  };
  // Fresh vectors, each entry what this pass measured.
  const size_t classes = input.pipelines.size();
  std::vector<std::vector<std::vector<double>>> send(classes), task(classes);
  for (size_t k = 0; k < classes; ++k) {
    send[k].resize(stages);
    for (int s = 0; s < stages; ++s) {
      send[k][s].assign(timeline.tasks[k][s], 0.0);
    }
  }
  std::vector<std::vector<double>> sync(stages);
  for (int s = 0; s < stages; ++s) {
    sync[s].assign(timeline.syncs[s], 0.0);
  }
  std::vector<double> gather(stages, 0.0);
  if (by_kind != nullptr) by_kind->assign(classes, std::vector<TaskLinkStretch>(stages));
  auto zerosLikeSends = [&](size_t k) {
    if (!task[k].empty()) return;
    task[k].resize(stages);
    for (int s = 0; s < stages; ++s) task[k][s].assign(send[k][s].size(), 0.0);
  };
  size_t run = 0;
  ends.forEachExtra([&](size_t i, double extra, double before) {
    const TimelineFlows::Origin o = flows.origin(i, run);
    const int after = list.after(i);
    switch (o.kind) {
      case FlowKind::kPp:
        send[o.pipeline][o.stage][o.index] = extra;
        break;
      case FlowKind::kDp: {  // the collective waits for its slowest class
        // A queued one (--grad-reduce-sync step) follows the one before it (SharedFlow::queued):
        // only its own part, as the timing's queue carries what that one's end pushed it by
        // (past its own start: nothing where it waited idle for its bucket and still does).
        double own = extra;
        if (after >= 0) {
          const size_t a = static_cast<size_t>(after);
          const double pushed = extraOfAfter(i, after, before) + list.startUs(a) +
                                list.shape(list.shapeOf(a)).duration_us - list.startUs(i);
          own = std::max(0.0, extra - std::max(0.0, pushed));
        }
        sync[o.stage][o.index] = std::max(sync[o.stage][o.index], own);
        break;
      }
      case FlowKind::kZero:
        gather[o.stage] = std::max(gather[o.stage], extra);
        break;
      default: {  // in a task: each collective's extra holds those before it (they follow)
        if (o.op >= 0) break;  // a lone task: timed again below with each collective's own part
        zerosLikeSends(o.pipeline);
        double& stretch = task[o.pipeline][o.stage][o.index];
        stretch = std::max(stretch, extra - o.slack_us);  // a fused task's stream may hide some
        if (by_kind == nullptr) break;
        TaskLinkStretch& sum = (*by_kind)[o.pipeline][o.stage];
        double TaskLinkStretch::*field = o.kind == FlowKind::kTp   ? &TaskLinkStretch::tp_us
                                         : o.kind == FlowKind::kCp ? &TaskLinkStretch::cp_us
                                         : o.kind == FlowKind::kEp ? &TaskLinkStretch::ep_us
                                                                   : &TaskLinkStretch::zero3_us;
        // Its own part: what it added to the delay it inherited from the one it follows, past
        // its stream's slack in a fused task (a delay the compute hides is not exposed).
        const double inherited = after < 0 ? 0 : std::max(0.0, extraOfAfter(i, after, before));
        sum.*field += std::max(
            0.0, std::max(0.0, extra - o.slack_us) - std::max(0.0, inherited - o.slack_us));
      }
    }
    return true;
  });
  // Lone tasks (stretched_task.h), in a second walk of the flows (not a list of their stretches:
  // issue 34, memory): the flows of one task are consecutive; per task, its ops' own stretches
  // (what sharing added to each collective beyond what it inherited from the one it follows), in
  // the task's time (the run is the standalone task scaled by a straggler's factor or jitter:
  // `input` has no stretch yet).
  TaskRetimer retimer(plan, costs, graph.split_backward);
  std::vector<OpStretch> ops;
  std::vector<std::pair<FlowKind, double>> owns;  // the task's stretched collectives' own parts
  TimelineFlows::Origin o;                         // the task's (its first stretched collective's)
  auto retimeTask = [&] {
    const TaskNode& node = graph.nodes[graph.nodeAt(o.stage, static_cast<size_t>(o.index))];
    const Phase phase = node.task.phase;
    const StageCost& cost = input.stages[node.virtual_stage];
    const double alone_us = phase == Phase::kForward    ? cost.forward_us
                            : phase == Phase::kBackward ? cost.backward_us
                                                        : cost.weight_grad_us;
    const double run_us = timeline.run_us[o.pipeline][o.stage][o.index];
    const double scale = alone_us > 0 ? run_us / alone_us : 1;
    double own_sum = 0;
    std::array<double, 4> own_by_kind{};  // tp, cp, ep, zero3
    for (size_t j = 0; j < ops.size(); ++j) {
      own_sum += owns[j].second;
      own_by_kind[kindSlot(owns[j].first)] += owns[j].second;
      ops[j].extra_us = owns[j].second / scale;
    }
    const StretchedTask st = retimer.of(node.virtual_stage, phase, ops);
    const double delay = std::max(0.0, st.delay_us * scale);
    if (delay <= 0 && own_sum <= 0) return;
    zerosLikeSends(o.pipeline);
    task[o.pipeline][o.stage][o.index] = delay;
    if (by_kind == nullptr) return;
    // The delay less its slowdown (the delay without the slowdown: >= 0) is communication
    // exposed, shared by kind as their own parts; the CP exchanges' own time beyond their exposed
    // part was hidden beside their steps. The slowdown part may be negative: a step's slowdown
    // that the stretched exchange now outlasts (stretched_task.h's test, e = 4).
    TaskLinkStretch& sum = (*by_kind)[o.pipeline][o.stage];
    const double slowdown = st.slowdown_us * scale;
    const double exposed = std::max(0.0, delay - slowdown);
    sum.slowdown_us += slowdown;
    double TaskLinkStretch::*fields[] = {&TaskLinkStretch::tp_us, &TaskLinkStretch::cp_us,
                                         &TaskLinkStretch::ep_us, &TaskLinkStretch::zero3_us};
    for (size_t kind = 0; kind < 4 && own_sum > 0; ++kind) {
      sum.*fields[kind] += exposed * own_by_kind[kind] / own_sum;
    }
    if (own_sum > 0) {
      const double cp_exposed = exposed * own_by_kind[1] / own_sum;
      sum.cp_hidden_us += std::max(0.0, own_by_kind[1] - cp_exposed);
    }
  };
  const bool lone_flows = std::any_of(
      flows.shape_origins.begin(), flows.shape_origins.end(), [](const TimelineFlows::Origin& o) {
        return o.op >= 0 && o.kind != FlowKind::kPp && o.kind != FlowKind::kDp &&
               o.kind != FlowKind::kZero;
      });
  run = 0;
  if (lone_flows) {
    ends.forEachExtra([&](size_t i, double extra, double before) {
      const TimelineFlows::Origin oi = flows.origin(i, run);
      if (oi.op < 0 || oi.kind == FlowKind::kPp || oi.kind == FlowKind::kDp ||
          oi.kind == FlowKind::kZero) {
        return true;
      }
      if (!ops.empty() &&
          (oi.pipeline != o.pipeline || oi.stage != o.stage || oi.index != o.index)) {
        retimeTask();
        ops.clear();
        owns.clear();
      }
      if (ops.empty()) o = oi;
      const int after = list.after(i);
      const double inherited = after < 0 ? 0 : std::max(0.0, extraOfAfter(i, after, before));
      ops.push_back({oi.op, 0});
      owns.emplace_back(oi.kind, std::max(0.0, extra - inherited));
      return true;
    });
  }
  if (!ops.empty()) retimeTask();
  // A class whose tasks nothing stretched still needs its (zero) entries once any class has some.
  const bool tasks =
      std::any_of(task.begin(), task.end(), [](const auto& t) { return !t.empty(); });
  for (size_t k = 0; k < classes && tasks; ++k) zerosLikeSends(k);
  input.send_stretch_us = std::move(send);
  input.grad_sync_stretch_us = std::move(sync);
  input.param_allgather_stretch_us = std::move(gather);
  if (tasks) input.task_stretch_us = std::move(task);
  return true;
}

}  // namespace evsim

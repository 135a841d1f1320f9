// Transfers as flows over the cluster's links, and the sharing pass; link_flows.h states
// the model.
#include "modeler/link_flows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "common/error.h"
#include "events/collective.h"
#include "fmt/format.h"
#include "modeler/in_task_flows.h"
#include "modeler/network/nccl_tuner.h"
#include "modeler/network/ring_channels.h"
#include "modeler/timeline_flow_walk.h"
#include "modeler/stretched_task.h"

namespace evsim {

namespace {

constexpr double kStretchedUs = 1e-3;      // less is rounding

// Whether two sends into one device overlap in time (on its NVLink or on its NICs). The arrivals
// from one sender are in time order and never overlap each other (a send holds its device), so
// an overlap is between two senders' arrivals, found by merging them (no sort: this runs on every
// timing that may share). Each sender's arrivals are read from its task list in place: copying
// them out per receiver was most of this check's cost (issue 34 item 3).
bool arrivalsOverlap(const IterationPlan& plan, const IterationTimeline& timeline) {
  const PipelineLayout layout = plan.pipelineLayout();
  const int P = plan.deviceStages();
  const size_t links = plan.virtualStages() - 1;
  constexpr size_t kNoKey = SIZE_MAX;
  const TaskGraph& graph = timeline.graph;
  // Per link and direction (2 link + (gradient)): its receiver key.
  std::vector<size_t> key_of(2 * links, kNoKey);
  // Per (receiver, inter-node) key: the devices sending into it, in device order.
  std::vector<std::vector<int>> senders(2 * static_cast<size_t>(P));
  // Per send code of a device: whether its sends go into the key merged (the graph's codes,
  // TaskGraph::send_codes: one byte read a task instead of its node, issue 34 item 3).
  using Into = std::array<uint8_t, 256>;
  Into into_a{}, into_b{};
  for (size_t k = 0; k < timeline.pipelines.size(); ++k) {
    const PipelineClass& pipeline = plan.pipelines[k];
    for (auto& list : senders) list.clear();
    // Each link's key once per class, not once per send; none: no event.
    for (size_t l = 0; l < links; ++l) {
      for (const Send send : {Send::kActivation, Send::kGradient}) {
        const bool forward = send == Send::kActivation;
        const int e = forward ? pipeline.forward_p2p[l] : pipeline.backward_p2p[l];
        const int link = static_cast<int>(l);
        const int to = layout.device(linkReceiver(send, link));
        const size_t key =
            e < 0 ? kNoKey
                  : 2 * static_cast<size_t>(to) + plan.events[e].event.placement.interNode();
        key_of[2 * l + !forward] = key;
        if (key != kNoKey) senders[key].push_back(layout.device(forward ? link : link + 1));
      }
    }
    const std::vector<StageTimeline>& stages = timeline.pipelines[k].stages;
    // Device d's codes whose sends go into `key`, marked in `into`.
    auto markInto = [&](Into& into, int d, size_t key) {
      into.fill(0);
      for (int c = 1; sendCodeChunk(c) < plan.chunksPerDevice(); ++c) {
        const int w = flow_walk::sendSlot(layout, d, c);
        if (w >= 0) into[c] = key_of[static_cast<size_t>(w)] == key;
      }
    };
    // A device's next arrival into the key marked in `into` at or after `c` (its end when none):
    // its timing and its send code, moved together.
    struct Cursor {
      const TaskTiming* t;
      const uint8_t* code;
    };
    auto nextInto = [](const Into& into, Cursor c, const TaskTiming* end) {
      for (; c.t != end; ++c.t, ++c.code) {
        if (into[*c.code] && !(c.t->send_end_us <= c.t->run.end_us)) break;
      }
      return c;
    };
    for (size_t key = 0; key < senders.size(); ++key) {
      std::vector<int>& from = senders[key];
      std::sort(from.begin(), from.end());
      from.erase(std::unique(from.begin(), from.end()), from.end());
      for (size_t i = 0; i < from.size(); ++i) {
        for (size_t j = i + 1; j < from.size(); ++j) {
          const std::vector<TaskTiming>& ta = stages[from[i]].tasks;
          const std::vector<TaskTiming>& tb = stages[from[j]].tasks;
          const TaskTiming* const a_end = ta.data() + ta.size();
          const TaskTiming* const b_end = tb.data() + tb.size();
          markInto(into_a, from[i], key);
          markInto(into_b, from[j], key);
          Cursor a = nextInto(into_a, {ta.data(), graph.deviceSendCodes(from[i]).data()}, a_end);
          Cursor b = nextInto(into_b, {tb.data(), graph.deviceSendCodes(from[j]).data()}, b_end);
          // Two time-sorted lists of non-overlapping intervals overlap where a merge finds it.
          while (a.t != a_end && b.t != b_end) {
            if (a.t->run.end_us < b.t->send_end_us && b.t->run.end_us < a.t->send_end_us) {
              return true;
            }
            if (a.t->send_end_us <= b.t->send_end_us) {
              a = nextInto(into_a, {a.t + 1, a.code + 1}, a_end);
            } else {
              b = nextInto(into_b, {b.t + 1, b.code + 1}, b_end);
            }
          }
        }
      }
    }
  }
  return false;
}

// Whether two of the timeline's transfers share a resource at once, or may: DP buckets in flight
// beside the pipeline, or two representative devices on one node (both: the flows decide); else
// only sends arriving at one device from two neighbours at once. Sends of one device never
// overlap each other (a send holds its device), and the DP collectives and the ZeRO gather
// without overlap start after every transfer of the device.
bool mayShare(const IterationPlan& plan, const TimingInput& input,
              const IterationTimeline& timeline) {
  if (input.dp_overlap || input.grad_reduce_at_step) {
    for (const StageCost& s : input.stages) {
      if (!s.buckets.empty() || !s.micro_batch_buckets.empty()) return true;
    }
  }
  std::vector<int> nodes;
  for (const std::vector<int>& pipeline : deviceNodes(plan)) {
    nodes.insert(nodes.end(), pipeline.begin(), pipeline.end());
  }
  std::sort(nodes.begin(), nodes.end());
  if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) return true;
  return plan.virtualStages() > 2 && arrivalsOverlap(plan, timeline);
}

size_t kindSlot(FlowKind kind) {  // TaskLinkStretch's order: tp, cp, ep, zero3
  return kind == FlowKind::kTp ? 0 : kind == FlowKind::kCp ? 1 : kind == FlowKind::kEp ? 2 : 3;
}

// What applyStretch reads of the unshared timeline, kept while the links are shared without the
// timeline itself (issue 34: its per-task records, 56 bytes a task, were 9.4 MB of a 405B
// search's peak beside ~10^6 flows): each device's task and DP-collective counts, and the run of
// each task whose in-task collectives a lone task's retiming needs (its node is its position in
// the device's order, TaskGraph::nodeAt). Taken before the flows are listed, which free the
// timeline's records as they go (shareLinksOverTime).
struct UnsharedTimeline {
  std::vector<std::vector<size_t>> tasks;  // per class, device stage: its task count
  std::vector<size_t> syncs;               // per device stage: its grad_sync intervals
  // Per class, device stage and position: the task's run duration, where some task has a lone
  // task's in-task flow (else empty).
  std::vector<std::vector<std::vector<double>>> run_us;

  UnsharedTimeline(const IterationTimeline& timeline, const InTaskOps& in_task) {
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
};

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

}  // namespace

double linkBytes(const Event& event) {
  const double bytes = static_cast<double>(event.message_bytes);
  if (event.kind == EventKind::kP2P) return bytes;
  return bytes * collectiveOf(event.kind).bus_factor(event.placement.group_size);
}

bool crossesTier(const NetworkTopology& topology, const FabricTier& tier, int nodes) {
  return nodes > 1 && (topology.placement == JobPlacement::kScattered || nodes > tier.nodes);
}

void addUplinks(const NetworkTopology& topology, const std::vector<int>& uplinks, int nodes,
                float copies, LinkUses& uses) {
  for (size_t t = 0; t < topology.tiers.size(); ++t) {
    if (!crossesTier(topology, topology.tiers[t], nodes)) break;
    if (uplinks[t] >= 0) uses.push_back({uplinks[t], copies});
  }
}

SharedFlow collectiveFlow(const NetworkTopology& topology, const DeviceLinks& d,
                          const Placement& placement, double bytes, double start_us,
                          double duration_us, bool tree) {
  SharedFlow f{start_us, duration_us, bytes, {}};
  // The channels' way through each node (network/ring_channels.h: NCCL_CROSS_NIC, PXN closing
  // the ring): the NVLink share, and whether the hops between nodes change rail (a tree's never).
  RingChannels route{};
  if (d.rail >= 0) {
    route = tree ? treeChannels(topology, d.rails, d.pci_rails, placement)
                 : ringChannels(topology, d.rails, d.pci_rails, placement);
  }
  if (placement.ranks_per_node > 1) {
    const float nvlink = static_cast<float>(route.nvlink);
    f.uses.push_back({d.nvlink_tx, nvlink});
    f.uses.push_back({d.nvlink_rx, nvlink});
  }
  if (placement.nodes > 1) {
    // Each of the node's copies of this device is in its own group unless the group has several
    // ranks on the node (a ring then crosses the node's NICs once per group). Per GPU the group's
    // rings leave through its ranks' rails, one rail per channel: each of its rails carries
    // 1 / ranks_per_node of the group's traffic (in and out: with crossNic a channel's two NICs
    // differ, but each rail is one channel's way in and another's way out), same-rail on every
    // node where the channels stay on their NIC, so a rail-optimised tier keeps it on the rail
    // switch; where they change rail every channel's traffic goes up that tier's uplinks.
    const float rpn = static_cast<float>(placement.ranks_per_node);
    const float copies =
        topology.perGpuNics() ? d.nic_copies / rpn : std::max(1.0f, d.copies / rpn);
    f.uses.push_back({d.nic_tx, copies});
    f.uses.push_back({d.nic_rx, copies});
    addUplinks(topology, d.uplink_tx, placement.nodes, copies, f.uses);
    addUplinks(topology, d.uplink_rx, placement.nodes, copies, f.uses);
    if (route.cross_rail && topology.railOptimized() &&
        !crossesTier(topology, topology.tiers.front(), placement.nodes) &&
        d.uplink_tx.front() >= 0) {
      f.uses.push_back({d.uplink_tx.front(), copies});
      f.uses.push_back({d.uplink_rx.front(), copies});
    }
  }
  return f;
}

bool treeKeepsRail(const ClusterConfig& cluster, const DeviceLinks& d, const Event& event) {
  return TreeRailRule(cluster).keepsRail(d, event);
}

bool TreeRailRule::keepsRail(const DeviceLinks& d, const Event& event) {
  const Placement& p = event.placement;
  if (event.kind != EventKind::kAllReduce || d.rail < 0 || p.nodes <= 1) return false;
  if (!ringChannels(cluster_.topology, d.rails, d.pci_rails, p).cross_rail) return false;
  auto [it, fresh] = runs_as_tree_.try_emplace(&event, false);
  if (fresh) {
    if (!tuner_) tuner_.emplace(cluster_);
    it->second = tuner_->choose(event.kind, p, event.message_bytes).algorithm == "tree";
  }
  return it->second;
}

const char* flowKindName(FlowKind kind) {
  switch (kind) {
    case FlowKind::kPp:
      return "pp";
    case FlowKind::kDp:
      return "dp";
    case FlowKind::kZero:
      return "zero";
    case FlowKind::kTp:
      return "tp";
    case FlowKind::kCp:
      return "cp";
    case FlowKind::kEp:
      return "ep";
    default:
      return "zero3";
  }
}

namespace {

// timelineFlows with `in_task` (inTaskOps') given; `stage_done` as walkTimelineFlows'.
template <typename StageDone>
TimelineFlows listFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                        const InTaskOps& in_task, const TimingInput& input,
                        const IterationTimeline& timeline, const LinkMap& map,
                        StageDone stage_done) {
  TimelineFlows out;
  // Exactly the flows to come (and at most a run of one index per flow outside tasks): no
  // growth by doubling, whose copies sat beside the list at its largest.
  size_t transfers = 0, outside_tasks = 0;
  for (const PipelineTimeline& p : timeline.pipelines) {
    for (const StageTimeline& stage : p.stages) {
      outside_tasks += stage.tasks.size() + stage.grad_sync.size() + 1;
      if (in_task.empty()) continue;
      for (size_t i = 0; i < stage.tasks.size(); ++i) {
        const TaskNode& node = timeline.graph.nodes[stage.node(i)];
        transfers += in_task[node.virtual_stage][phaseIndex(node.task.phase)].size();
      }
    }
  }
  out.list.reserve(transfers + outside_tasks);
  out.index_runs.reserve(outside_tasks);
  flow_walk::walkTimelineFlows(
      plan, costs, in_task, input, timeline, map, &out,
      [&](const SharedFlow& f, double start_us, int after, const TimelineFlows::Origin& o, int,
          int* slot) {
        if (slot != nullptr && *slot >= 0) {
          return out.add(start_us, *slot, after, o.index);
        }
        SharedFlow g = f;
        g.start_us = start_us;
        g.after = after;
        const int i = out.add(g, o);
        if (slot != nullptr) *slot = out.list.shapeOf(static_cast<size_t>(i));
        return i;
      },
      /*with_tasks=*/true, stage_done);
  return out;
}

}  // namespace

TimelineFlows timelineFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                            const std::vector<StageOpOffsets>& offsets, const TimingInput& input,
                            const IterationTimeline& timeline, const LinkMap& map) {
  const InTaskOps in_task = inTaskOps(plan, costs, offsets, timeline.graph.split_backward);
  return listFlows(plan, costs, in_task, input, timeline, map, flow_walk::NoStageDone{});
}

size_t sharingFlowCount(const IterationPlan& plan, const std::vector<EventCost>& costs) {
  if (!plan.cluster.topology.link_sharing) return 0;
  const size_t phases = pipelineSchedule(plan.strategy.schedule).splitsBackward() ? 3 : 2;
  const size_t m = static_cast<size_t>(plan.micro_batches);
  size_t per_class = 0;
  for (const StagePlan& stage : plan.stages) {
    size_t in_task = 0;
    for (const std::vector<OpInstance>* ops : {&stage.forward, &stage.backward}) {
      for (const OpInstance& op : *ops) in_task += inTaskFlowKind(plan, costs, op).has_value();
    }
    // Under --grad-reduce-sync step every micro-batch's buckets are flows of their own (queued
    // on the DP stream), and they have left the backward's op list.
    per_class += m * (phases + in_task + stage.micro_batch_buckets.size()) +
                 std::max<size_t>(1, stage.dp_buckets.size()) + 1;
  }
  return per_class * plan.pipelines.size();
}

int TimelineFlows::add(const SharedFlow& f, const Origin& origin) {
  shape_origins.push_back(origin);
  return add(f.start_us, list.addShape(f.duration_us, f.bytes, f.uses, f.queued), f.after,
             origin.index);
}

int TimelineFlows::add(double start_us, int shape, int after, int at) {
  const int f = list.add(start_us, shape, after);
  if (index_runs.empty() || index_runs.back().second != at) index_runs.emplace_back(f, at);
  return f;
}

bool transferLoads(const IterationPlan& plan, const std::vector<EventCost>& costs,
                   const std::vector<StageOpOffsets>& offsets, const TimingInput& input,
                   const IterationTimeline& timeline, const LinkMap& map,
                   std::vector<double>& capacity, std::vector<std::vector<LoadSegment>>& load) {
  if (hasInTaskOps(plan, costs, offsets)) return false;
  load.assign(capacity.size(), {});
  // A flow's loads alone: what each resource it uses carries (demand x copies), and `capacity`
  // raised where that is more; none for a flow with no use, bytes or time (link_sharing.cpp's
  // `shares`). Every send over one link of a class is the same flow but its start, so its loads
  // are worked out once per class (the same values, and `capacity` takes the same maxima).
  struct Loads {
    int pipeline = -1;  // the class they were worked out for (sends only)
    int count = 0;
    FlowLoads at;
  };
  auto loadsOf = [&](const SharedFlow& f, Loads& out) { out.count = flowLoads(f, capacity, out.at); };
  std::vector<Loads> send_loads;  // per link and direction (walkTimelineFlows' `send`)
  Loads other;
  flow_walk::walkTimelineFlows(
      plan, costs, {}, input, timeline, map, nullptr,
      [&](const SharedFlow& f, double start_us, int, const TimelineFlows::Origin& o, int send,
          int*) {
        Loads* loads = &other;
        if (send >= 0) {
          if (static_cast<size_t>(send) >= send_loads.size()) {
            send_loads.resize(static_cast<size_t>(send) + 1);
          }
          loads = &send_loads[static_cast<size_t>(send)];
        }
        if (send < 0 || loads->pipeline != o.pipeline) {
          loadsOf(f, *loads);
          loads->pipeline = o.pipeline;
        }
        const double end_us = start_us + f.duration_us;
        for (int i = 0; i < loads->count; ++i) {
          const auto& [r, bytes_per_us] = loads->at[static_cast<size_t>(i)];
          load[r].push_back({start_us, end_us, bytes_per_us});
        }
        return -1;
      });
  return true;
}

bool shareLinksOverTime(const IterationPlan& plan, const std::vector<EventCost>& costs,
                        const std::vector<StageOpOffsets>& offsets, TimingInput& input,
                        IterationTimeline& timeline,
                        std::vector<std::vector<TaskLinkStretch>>* by_kind) {
  if (!plan.cluster.topology.link_sharing) return false;
  // The cheap checks first, the link map only for a plan that may share (most of this call's
  // cost where nothing can share: issue 34, the 2,048-GPU simulate); a bad topology is an error
  // either way.
  checkSharedTiers(plan.cluster);
  if (!hasInTaskOps(plan, costs, offsets) && !mayShare(plan, input, timeline)) return false;
  const LinkMap map = linkMap(plan);
  TaskGraph graph;
  bool changed = false;
  {
    // The unshared timeline's records freed as its flows are listed (what applyStretch reads of
    // them kept), and the shared one timed after the flows are freed: each side by side with the
    // flows was a search's peak (issue 34). Where sharing changed nothing the unshared timing is
    // taken again, the same timeline (the same input, graph and jitter seeds).
    const InTaskOps in_task = inTaskOps(plan, costs, offsets, timeline.graph.split_backward);
    const UnsharedTimeline unshared(timeline, in_task);
    const TimelineFlows flows =
        listFlows(plan, costs, in_task, input, timeline, map, [&](size_t k, int s) {
          // (Assigning {} would keep the capacity: the memory goes with a swap.)
          std::vector<TaskTiming>().swap(
              timeline.pipelines[k].stages[static_cast<size_t>(s)].tasks);
        });
    graph = std::move(timeline.graph);
    timeline = IterationTimeline{};
    const SharingResult shared = shareLinks(flows.list, map.capacities());
    changed = applyStretch(plan, costs, flows, shared, plan.deviceStages(), input, unshared, graph,
                           by_kind);
  }
  timeline = computeTimeline(input, std::move(graph));
  return changed;
}

}  // namespace evsim

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
#include "modeler/stretched_task.h"

namespace evsim {

namespace {

constexpr double kStretchedUs = 1e-3;      // less is rounding

// Whether a group over `nodes` nodes crosses `tier`'s uplinks (fabric.cpp's rule).
bool crossesTier(const NetworkTopology& topology, const FabricTier& tier, int nodes) {
  return nodes > 1 && (topology.placement == JobPlacement::kScattered || nodes > tier.nodes);
}

// The flow of one send over each link of class `k` (2 l: the activation k -> k+1, 2 l + 1: the
// gradient back), but its start: every send over a link is the same transfer (issue 28: identical
// flows computed once). Empty uses where the link has no event.
void sendFlows(const IterationPlan& plan, const PipelineCost& cost, int k, const LinkMap& map,
               std::vector<SharedFlow>& out) {
  const NetworkTopology& topology = plan.cluster.topology;
  const PipelineLayout layout = plan.pipelineLayout();
  const PipelineClass& pipeline = plan.pipelines[k];
  const size_t links = pipeline.forward_p2p.size();
  out.assign(2 * links, SharedFlow{});
  for (size_t l = 0; l < links; ++l) {
    for (const Send send : {Send::kActivation, Send::kGradient}) {
      const bool forward = send == Send::kActivation;
      const int e = forward ? pipeline.forward_p2p[l] : pipeline.backward_p2p[l];
      if (e < 0) continue;
      const int link = static_cast<int>(l);
      const Event& event = plan.events[e].event;
      const DeviceLinks& from = map.devices[k][layout.device(forward ? link : link + 1)];
      const DeviceLinks& to = map.devices[k][layout.device(linkReceiver(send, link))];
      SharedFlow& f = out[2 * l + (forward ? 0 : 1)];
      f.duration_us = forward ? cost.send_forward_us[l] : cost.send_backward_us[l];
      f.bytes = linkBytes(event);
      if (event.placement.interNode()) {
        // The NIC it leaves through: its own, or with PXN the intermediate GPU's, reached over
        // the sender's NVLink into that GPU (its NVLink rx); without PXN a cross-rail send on a
        // rail-optimised bottom tier goes up a tier (link_map.h, SendRoute).
        const SendRoute& route = map.sends[k][2 * l + (forward ? 0 : 1)];
        const NicLinks& out = map.nicsOf(route.nic_node, route.nic_rail);
        int nodes = event.placement.nodes;
        if (route.up_rail_tier) nodes = std::max(nodes, topology.tiers.front().nodes + 1);
        f.uses = {{out.nic_tx, from.nic_copies}, {to.nic_rx, from.nic_copies}};
        if (route.pxn()) {
          f.uses.push_back({from.nvlink_tx, 1});
          f.uses.push_back({route.via_nvlink_rx, 1});
        }
        addUplinks(topology, out.uplink_tx, nodes, from.nic_copies, f.uses);
        addUplinks(topology, to.uplink_rx, nodes, from.nic_copies, f.uses);
      } else {
        f.uses = {{from.nvlink_tx, 1}, {to.nvlink_rx, 1}};
      }
    }
  }
}

// Whether two time-sorted lists of non-overlapping intervals overlap each other (a merge).
template <typename Span>
bool runsOverlap(const Span* a, const Span* a_end, const Span* b, const Span* b_end) {
  while (a != a_end && b != b_end) {
    if (a->start_us < b->end_us && b->start_us < a->end_us) return true;
    if (a->end_us <= b->end_us) {
      ++a;
    } else {
      ++b;
    }
  }
  return false;
}

// Whether two sends into one device overlap in time (on its NVLink or on its NICs). The arrivals
// from one sender are in time order and never overlap each other (a send holds its device), so
// an overlap is between two senders' runs, found by merging them (no sort: this runs on every
// timing that may share).
bool arrivalsOverlap(const IterationPlan& plan, const IterationTimeline& timeline) {
  const PipelineLayout layout = plan.pipelineLayout();
  const int P = plan.deviceStages();
  struct Arrival {
    double start_us, end_us;
  };
  struct Run {
    int sender;
    size_t first;  // index of its first arrival
  };
  // Per (receiver, inter-node): the arrivals, and where each sender's run starts.
  std::vector<std::vector<Arrival>> into(2 * static_cast<size_t>(P));
  std::vector<std::vector<Run>> runs(into.size());
  const size_t links = plan.virtualStages() - 1;
  std::vector<size_t> key_of(2 * links);  // per link: activation, gradient
  for (size_t k = 0; k < timeline.pipelines.size(); ++k) {
    const PipelineClass& pipeline = plan.pipelines[k];
    for (auto& list : into) list.clear();
    for (auto& list : runs) list.clear();
    // Each link's (receiver, inter-node) key once per class, not once per send; none: no event.
    constexpr size_t kNoKey = SIZE_MAX;
    for (size_t l = 0; l < links; ++l) {
      for (const Send send : {Send::kActivation, Send::kGradient}) {
        const bool forward = send == Send::kActivation;
        const int e = forward ? pipeline.forward_p2p[l] : pipeline.backward_p2p[l];
        const int to = layout.device(linkReceiver(send, static_cast<int>(l)));
        key_of[2 * l + !forward] =
            e < 0 ? kNoKey
                  : 2 * static_cast<size_t>(to) + plan.events[e].event.placement.interNode();
      }
    }
    for (int s = 0; s < P; ++s) {
      for (const TaskTiming& t : timeline.pipelines[k].stages[s].tasks) {
        if (t.send.end_us <= t.send.start_us || t.node < 0) continue;
        const TaskNode& node = timeline.graph.nodes[t.node];
        const size_t key =
            key_of[2 * static_cast<size_t>(node.link) + (node.send == Send::kGradient ? 1 : 0)];
        if (key == kNoKey) continue;
        // Senders come in device order: a new one starts a run.
        if (runs[key].empty() || runs[key].back().sender != s) {
          runs[key].push_back({s, into[key].size()});
        }
        into[key].push_back({t.send.start_us, t.send.end_us});
      }
    }
    for (size_t key = 0; key < into.size(); ++key) {
      const std::vector<Run>& r = runs[key];
      const Arrival* data = into[key].data();
      auto end = [&](size_t i) {
        return data + (i + 1 < r.size() ? r[i + 1].first : into[key].size());
      };
      for (size_t i = 0; i < r.size(); ++i) {
        for (size_t j = i + 1; j < r.size(); ++j) {
          if (runsOverlap(data + r[i].first, end(i), data + r[j].first, end(j))) return true;
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
bool mayShare(const IterationPlan& plan, const TimingInput& input, const LinkMap& map,
              const IterationTimeline& timeline) {
  if (input.dp_overlap) {
    for (const StageCost& s : input.stages) {
      if (!s.buckets.empty()) return true;
    }
  }
  std::vector<int> nodes;
  for (const auto& pipeline : map.devices) {
    for (const DeviceLinks& d : pipeline) nodes.push_back(d.node);
  }
  std::sort(nodes.begin(), nodes.end());
  if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) return true;
  return plan.virtualStages() > 2 && arrivalsOverlap(plan, timeline);
}

size_t kindSlot(FlowKind kind) {  // TaskLinkStretch's order: tp, cp, ep, zero3
  return kind == FlowKind::kTp ? 0 : kind == FlowKind::kCp ? 1 : kind == FlowKind::kEp ? 2 : 3;
}

// Sets the stretch fields of `input` from shared ends, and `by_kind` (per class and device stage)
// from the in-task ones; returns whether any is above rounding.
bool applyStretch(const IterationPlan& plan, const std::vector<EventCost>& costs,
                  const TimelineFlows& flows, const SharingResult& shared, int stages,
                  TimingInput& input, const IterationTimeline& timeline,
                  std::vector<std::vector<TaskLinkStretch>>* by_kind) {
  const FlowList& list = flows.list;
  // What sharing added to flow `i` (may be below 0 by rounding).
  auto extraOf = [&](size_t i) {
    return shared.end_us[i] - list.startUs(i) - list.shape(list.shapeOf(i)).duration_us;
  };
  bool changed = false;
  for (size_t i = 0; i < list.size() && !changed; ++i) changed = extraOf(i) > kStretchedUs;
  if (!changed) return false;
  // Fresh vectors, each entry what this pass measured.
  const size_t classes = input.pipelines.size();
  std::vector<std::vector<std::vector<double>>> send(classes), task(classes);
  for (size_t k = 0; k < classes; ++k) {
    send[k].resize(stages);
    for (int s = 0; s < stages; ++s) {
      send[k][s].assign(timeline.pipelines[k].stages[s].tasks.size(), 0.0);
    }
  }
  std::vector<std::vector<double>> sync(stages);
  for (int s = 0; s < stages; ++s) {
    sync[s].assign(timeline.pipelines[0].stages[s].grad_sync.size(), 0.0);
  }
  std::vector<double> gather(stages, 0.0);
  if (by_kind != nullptr) by_kind->assign(classes, std::vector<TaskLinkStretch>(stages));
  struct LoneStretch {
    size_t flow = 0;
    double own_us = 0;  // what sharing added to this collective alone
  };
  std::vector<LoneStretch> lone;
  auto zerosLikeSends = [&](size_t k) {
    if (!task[k].empty()) return;
    task[k].resize(stages);
    for (int s = 0; s < stages; ++s) task[k][s].assign(send[k][s].size(), 0.0);
  };
  for (size_t i = 0; i < list.size(); ++i) {
    const TimelineFlows::Origin o = flows.origin(i);
    const int after = list.after(i);
    const double extra = std::max(0.0, extraOf(i));
    switch (o.kind) {
      case FlowKind::kPp:
        send[o.pipeline][o.stage][o.index] = extra;
        break;
      case FlowKind::kDp:  // the collective waits for its slowest class
        sync[o.stage][o.index] = std::max(sync[o.stage][o.index], extra);
        break;
      case FlowKind::kZero:
        gather[o.stage] = std::max(gather[o.stage], extra);
        break;
      default: {  // in a task: each collective's extra holds those before it (they follow)
        if (extra == 0) break;
        if (o.op >= 0) {  // a lone task: timed again below with each collective's own part
          const double inherited =
              after < 0 ? 0 : std::max(0.0, extraOf(static_cast<size_t>(after)));
          lone.push_back({i, std::max(0.0, extra - inherited)});
          break;
        }
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
        const double inherited = after < 0 ? 0 : std::max(0.0, extraOf(static_cast<size_t>(after)));
        sum.*field += std::max(
            0.0, std::max(0.0, extra - o.slack_us) - std::max(0.0, inherited - o.slack_us));
      }
    }
  }
  // Lone tasks (stretched_task.h): the flows of one task are consecutive; per task, its ops'
  // own stretches, in the task's time (the run is the standalone task scaled by a straggler's
  // factor or jitter: `input` has no stretch yet).
  TaskRetimer retimer(plan, costs, timeline.graph.split_backward);
  std::vector<OpStretch> ops;
  for (size_t a = 0; a < lone.size();) {
    const TimelineFlows::Origin o = flows.origin(lone[a].flow);
    const TaskTiming& t = timeline.pipelines[o.pipeline].stages[o.stage].tasks[o.index];
    const TaskNode& node = timeline.graph.nodes[t.node];
    const StageCost& cost = input.stages[node.virtual_stage];
    const double alone_us = t.task.phase == Phase::kForward    ? cost.forward_us
                            : t.task.phase == Phase::kBackward ? cost.backward_us
                                                               : cost.weight_grad_us;
    const double scale = alone_us > 0 ? t.run.duration() / alone_us : 1;
    ops.clear();
    double own_sum = 0;
    std::array<double, 4> own_by_kind{};  // tp, cp, ep, zero3
    size_t b = a;
    for (; b < lone.size(); ++b) {
      const TimelineFlows::Origin ob = flows.origin(lone[b].flow);
      if (ob.pipeline != o.pipeline || ob.stage != o.stage || ob.index != o.index) break;
      ops.push_back({ob.op, lone[b].own_us / scale});
      own_sum += lone[b].own_us;
      own_by_kind[kindSlot(ob.kind)] += lone[b].own_us;
    }
    a = b;
    const StretchedTask st = retimer.of(node.virtual_stage, t.task.phase, ops);
    const double delay = std::max(0.0, st.delay_us * scale);
    if (delay <= 0 && own_sum <= 0) continue;
    zerosLikeSends(o.pipeline);
    task[o.pipeline][o.stage][o.index] = delay;
    if (by_kind == nullptr) continue;
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
  }
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

void addUplinks(const NetworkTopology& topology, const std::vector<int>& uplinks, int nodes,
                float copies, LinkUses& uses) {
  for (size_t t = 0; t < topology.tiers.size(); ++t) {
    if (!crossesTier(topology, topology.tiers[t], nodes)) break;
    if (uplinks[t] >= 0) uses.push_back({uplinks[t], copies});
  }
}

SharedFlow collectiveFlow(const NetworkTopology& topology, const DeviceLinks& d,
                          const Placement& placement, double bytes, double start_us,
                          double duration_us) {
  SharedFlow f{start_us, duration_us, bytes, {}};
  if (placement.ranks_per_node > 1) {
    f.uses.push_back({d.nvlink_tx, 1});
    f.uses.push_back({d.nvlink_rx, 1});
  }
  if (placement.nodes > 1) {
    // Each of the node's copies of this device is in its own group unless the group has several
    // ranks on the node (a ring then crosses the node's NICs once per group). Per GPU the group's
    // rings leave through its ranks' rails, one rail per channel: each of its rails carries
    // 1 / ranks_per_node of the group's traffic, same-rail on every node (NCCL's ring search keeps
    // a channel on one NIC index), so a rail-optimised tier keeps it on the rail switch.
    const float rpn = static_cast<float>(placement.ranks_per_node);
    const float copies =
        topology.perGpuNics() ? d.nic_copies / rpn : std::max(1.0f, d.copies / rpn);
    f.uses.push_back({d.nic_tx, copies});
    f.uses.push_back({d.nic_rx, copies});
    addUplinks(topology, d.uplink_tx, placement.nodes, copies, f.uses);
    addUplinks(topology, d.uplink_rx, placement.nodes, copies, f.uses);
  }
  return f;
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

// Every flow of `timeline` in timelineFlows' order, each handed to
// `push(flow, start_us, after, origin, send, slot)` (which returns its index in the list, for the
// chains of in-task collectives); `send` is a pipeline send's link and direction (2 l, 2 l + 1 for
// the gradient: within a class, every send with that value is the same flow but its start), else
// -1. `slot`, where not null, is the same int for every flow of the device that is `flow` but its
// start, after and origin's index (a send over one link, an in-task collective of one virtual
// stage, phase and position): the flow list keeps their shape there (FlowList).
// The in-task collectives (`in_task` not empty) need the list itself (`list`: a fused task's flows
// are appended to it).
template <typename Push>
void walkTimelineFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                       const InTaskOps& in_task, const TimingInput& input,
                       const IterationTimeline& timeline, const LinkMap& map, TimelineFlows* list,
                       Push push) {
  EVSIM_CHECK(in_task.empty() || list != nullptr, "in-task flows without a flow list");
  const NetworkTopology& topology = plan.cluster.topology;
  const PipelineLayout layout = plan.pipelineLayout();
  const int P = plan.deviceStages();
  const int v = plan.chunksPerDevice();
  std::vector<SharedFlow> sends;  // per link and direction: the flow of one send, but its start
  std::vector<int> send_slots;    // per link and direction, for the device walked
  for (size_t k = 0; k < timeline.pipelines.size(); ++k) {
    sendFlows(plan, input.pipelines[k], static_cast<int>(k), map, sends);
    for (int s = 0; s < P; ++s) {
      const DeviceLinks& d = map.devices[k][s];
      const StageTimeline& stage = timeline.pipelines[k].stages[s];
      send_slots.assign(sends.size(), -1);
      std::optional<DeviceInTaskFlows> chains;
      if (!in_task.empty()) chains.emplace(plan, costs, in_task, d);
      for (size_t i = 0; i < stage.tasks.size(); ++i) {
        const TaskTiming& t = stage.tasks[i];
        const TaskNode& node = timeline.graph.nodes[t.node];
        if (!in_task.empty() && node.fused_size > 1) {
          const double stretch = input.task_stretch_us.empty() ? 0 : input.task_stretch_us[k][s][i];
          fusedTaskFlows(plan, costs, in_task, input, timeline.graph, stage, i, d, stretch,
                         {FlowKind::kEp, static_cast<int>(k), s, static_cast<int>(i)}, *list);
        } else if (!in_task.empty() && node.fused_size == 1) {
          // Its collectives across nodes where the run has them: the standalone offsets scaled to
          // the run (a straggler's factor, jitter), the stretch sharing gave it taken off.
          const std::vector<InTaskOp>& ops = in_task[node.virtual_stage][phaseIndex(t.task.phase)];
          const StageCost& cost = input.stages[node.virtual_stage];
          const double alone_us = t.task.phase == Phase::kForward    ? cost.forward_us
                                  : t.task.phase == Phase::kBackward ? cost.backward_us
                                                                     : cost.weight_grad_us;
          const double stretch = input.task_stretch_us.empty() ? 0 : input.task_stretch_us[k][s][i];
          const double scale = alone_us > 0 ? (t.run.duration() - stretch) / alone_us : 1;
          // One after another: each follows the one before (link_sharing.h: SharedFlow::after).
          const std::vector<SharedFlow>& flows = chains->of(node.virtual_stage, t.task.phase);
          std::vector<int>& slots = chains->shapeSlots(node.virtual_stage, t.task.phase);
          int before = -1;
          for (size_t j = 0; j < ops.size(); ++j) {
            before =
                push(flows[j], t.run.start_us + ops[j].offset_us * scale, before,
                     {ops[j].kind, static_cast<int>(k), s, static_cast<int>(i), 0.0, ops[j].op}, -1,
                     &slots[j]);
          }
        }
        if (node.send == Send::kNone) continue;
        const int which = 2 * node.link + (node.send == Send::kGradient ? 1 : 0);
        const SharedFlow& send = sends[which];
        if (send.uses.empty()) continue;  // no event (a link inside one device)
        push(send, t.send.start_us, send.after,
             {FlowKind::kPp, static_cast<int>(k), s, static_cast<int>(i)}, which,
             &send_slots[which]);
      }
      // The DP collectives, in the order computeTimeline placed them (chunk v-1 first; per chunk
      // its buckets or its one collective, the routed experts' after the dense).
      size_t interval = 0;
      double gather_bytes = 0;
      const Event* gather_event = nullptr;
      for (int c = v - 1; c >= 0; --c) {
        const int vs = layout.virtualStage(s, c);
        const StagePlan& sp = plan.stages[vs];
        const StageCost& cost = input.stages[vs];
        auto sync = [&](const Event& event, double bytes) {
          const Interval& when = stage.grad_sync[interval];
          const double stretch =
              input.grad_sync_stretch_us.empty() ? 0 : input.grad_sync_stretch_us[s][interval];
          const SharedFlow f = collectiveFlow(topology, d, event.placement, bytes, when.start_us,
                                              when.duration() - stretch);
          push(f, f.start_us, f.after,
               {FlowKind::kDp, static_cast<int>(k), s, static_cast<int>(interval)}, -1, nullptr);
          ++interval;
        };
        if (input.dp_overlap && !cost.buckets.empty()) {
          for (const GradBucket& b : sp.dp_buckets) {
            const Event& event = plan.events[b.event].event;
            sync(event, linkBytes(event));
          }
        } else if (cost.grad_allreduce_us > 0) {
          const int dense = sp.gradSyncEvent();
          const int expert = sp.expert_grad_sync;
          double bytes = 0;
          for (int e : {dense, expert}) bytes += e >= 0 ? linkBytes(plan.events[e].event) : 0;
          const Event& event = plan.events[dense >= 0 ? dense : expert].event;
          sync(event, bytes);
        }
        for (int g : {sp.dp_allgather, sp.expert_allgather}) {
          if (g < 0) continue;
          gather_bytes += linkBytes(plan.events[g].event);
          if (gather_event == nullptr) gather_event = &plan.events[g].event;
        }
      }
      if (gather_event != nullptr && stage.param_allgather.duration() > 0) {
        const double stretch =
            input.param_allgather_stretch_us.empty() ? 0 : input.param_allgather_stretch_us[s];
        const SharedFlow f = collectiveFlow(topology, d, gather_event->placement, gather_bytes,
                                            stage.param_allgather.start_us,
                                            stage.param_allgather.duration() - stretch);
        push(f, f.start_us, f.after, {FlowKind::kZero, static_cast<int>(k), s, 0}, -1, nullptr);
      }
    }
  }
}

}  // namespace

TimelineFlows timelineFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                            const std::vector<StageOpOffsets>& offsets, const TimingInput& input,
                            const IterationTimeline& timeline, const LinkMap& map) {
  const InTaskOps in_task = inTaskOps(plan, costs, offsets, timeline.graph.split_backward);
  TimelineFlows out;
  size_t transfers = 0;
  for (const PipelineTimeline& p : timeline.pipelines) {
    for (const StageTimeline& stage : p.stages) {
      transfers += stage.tasks.size() + stage.grad_sync.size() + 1;
      if (in_task.empty()) continue;
      for (const TaskTiming& t : stage.tasks) {
        transfers +=
            in_task[timeline.graph.nodes[t.node].virtual_stage][phaseIndex(t.task.phase)].size();
      }
    }
  }
  out.list.reserve(transfers);
  out.index.reserve(transfers);
  walkTimelineFlows(plan, costs, in_task, input, timeline, map, &out,
                    [&](const SharedFlow& f, double start_us, int after,
                        const TimelineFlows::Origin& o, int, int* slot) {
                      if (slot != nullptr && *slot >= 0) {
                        return out.add(start_us, *slot, after, o.index);
                      }
                      SharedFlow g = f;
                      g.start_us = start_us;
                      g.after = after;
                      const int i = out.add(g, o);
                      if (slot != nullptr) *slot = out.list.shapeOf(static_cast<size_t>(i));
                      return i;
                    });
  return out;
}

int TimelineFlows::add(const SharedFlow& f, const Origin& origin) {
  shape_origins.push_back(origin);
  return add(f.start_us, list.addShape(f.duration_us, f.bytes, f.uses), f.after, origin.index);
}

int TimelineFlows::add(double start_us, int shape, int after, int at) {
  index.push_back(at);
  return list.add(start_us, shape, after);
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
    std::array<std::pair<size_t, double>, LinkUses::kMax> at;
  };
  auto loadsOf = [&](const SharedFlow& f, Loads& out) {
    out.count = 0;
    if (f.uses.empty() || f.bytes <= 0 || f.duration_us <= 0) return;
    const double demand = f.bytes / f.duration_us;
    for (const LinkUse& u : f.uses) {
      const size_t r = static_cast<size_t>(u.resource);
      EVSIM_CHECK(u.resource >= 0 && r < capacity.size() && u.copies > 0,
                  "a flow uses resource {} x{} of {}", u.resource, u.copies, capacity.size());
      capacity[r] = std::max(capacity[r], demand * u.copies);
      out.at[static_cast<size_t>(out.count++)] = {r, demand * u.copies};
    }
  };
  std::vector<Loads> send_loads;  // per link and direction (walkTimelineFlows' `send`)
  Loads other;
  walkTimelineFlows(
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
  const LinkMap map = linkMap(plan);
  if (!hasInTaskOps(plan, costs, offsets) && !mayShare(plan, input, map, timeline)) return false;
  const TimelineFlows flows = timelineFlows(plan, costs, offsets, input, timeline, map);
  const SharingResult shared = shareLinks(flows.list, map.capacities());
  if (!applyStretch(plan, costs, flows, shared, plan.deviceStages(), input, timeline, by_kind)) {
    return false;
  }
  timeline = computeTimeline(input, std::move(timeline.graph));
  return true;
}

}  // namespace evsim

// Transfers as flows over the cluster's links, and the sharing pass that runs them
// (shareLinksOverTime); link_flows.h states the model. Whether a timeline may share:
// link_overlap.cpp; what sharing added, as the timing's stretch fields: link_stretch.cpp.
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
#include "modeler/link_overlap.h"
#include "modeler/link_stretch.h"
#include "modeler/network/nccl_tuner.h"
#include "modeler/network/ring_channels.h"
#include "modeler/timeline_flow_walk.h"

namespace evsim {

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
  // raised where that is more; none for a flow with no use, bytes or time (sharing_flows.h's
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
    // Each task's overlap slowdown (a double a task) is read by the summary alone, of the timeline
    // timed again below: freed before the flow list is sized, of which it was the peak's last
    // megabyte (Llama 3.1 405B on 1,024 GPUs, 131,072 tasks: 1.05 MB; bench/RESULTS.md, session 31).
    for (PipelineTimeline& p : timeline.pipelines) {
      for (StageTimeline& stage : p.stages) std::vector<double>().swap(stage.overlap_slowdown_us);
    }
    const InTaskOps in_task = inTaskOps(plan, costs, offsets, timeline.graph.split_backward);
    const UnsharedTimeline unshared(timeline, in_task);
    const TimelineFlows flows =
        listFlows(plan, costs, in_task, input, timeline, map, [&](size_t k, int s) {
          // (Assigning {} would keep the capacity: the memory goes with a swap.)
          std::vector<TaskTiming>().swap(
              timeline.pipelines[k].stages[static_cast<size_t>(s)].tasks);
        });
    // The task graph goes too while the links are shared, and is built again for what reads it
    // after: link sharing's per-flow state beside the flows and a graph of 131,072 tasks (3.4 MB)
    // was the search's largest simulation's peak (issue 34, bench/RESULTS.md session 27). The
    // same graph again: a handle on the cached one up to kKeptShapeTasks tasks (nothing was
    // freed then), else built once more from the same shape.
    timeline = IterationTimeline{};
    const SharingResult shared = shareLinks(flows.list, map.capacities());
    graph = taskGraphOf(input);
    changed = applyStretch(plan, costs, flows, shared, plan.deviceStages(), input, unshared, graph,
                           by_kind);
  }
  timeline = computeTimeline(input, std::move(graph));
  return changed;
}

}  // namespace evsim

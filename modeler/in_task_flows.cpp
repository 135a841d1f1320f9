// In-task collectives across nodes as flows; in_task_flows.h and link_flows.h state the model.
#include "modeler/in_task_flows.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "events/collective.h"

namespace evsim {

int phaseIndex(Phase phase) {
  return phase == Phase::kForward ? 0 : phase == Phase::kBackward ? 1 : 2;
}

namespace {

bool hasInTaskTransfers(const InTaskOps& ops) {
  for (const auto& phases : ops) {
    for (const auto& list : phases) {
      if (!list.empty()) return true;
    }
  }
  return false;
}

}  // namespace

std::optional<FlowKind> inTaskFlowKind(const IterationPlan& plan,
                                       const std::vector<EventCost>& costs, const OpInstance& op) {
  FlowKind kind;
  switch (op.stream) {
    case Stream::kTpComm:
      kind = FlowKind::kTp;
      break;
    case Stream::kCpComm:
      kind = FlowKind::kCp;
      break;
    case Stream::kEpComm:
      kind = FlowKind::kEp;
      break;
    case Stream::kDpComm:
      kind = FlowKind::kZero3;
      break;
    default:
      return std::nullopt;
  }
  const Event& event = plan.events[op.event].event;
  if (!isCommunication(event.kind) || !event.placement.interNode()) return std::nullopt;
  if (costs[op.event].time_us <= 0) return std::nullopt;
  return kind;
}

InTaskOps inTaskOps(const IterationPlan& plan, const std::vector<EventCost>& costs,
                    const std::vector<StageOpOffsets>& offsets, bool split) {
  InTaskOps out;
  if (costs.empty() || offsets.empty()) return out;
  out.resize(plan.stages.size());
  for (size_t vs = 0; vs < plan.stages.size(); ++vs) {
    const StagePlan& stage = plan.stages[vs];
    std::array<double, 3> ep_stream_us{};  // per phase: the expert all-to-alls so far
    std::array<double, 3> pipelined_us{};  // a DeepEP RDMA hop running beside the next op
    auto add = [&](const OpInstance& op, int index, double offset_us, Phase phase) {
      const int at = phaseIndex(phase);
      const double stream_offset_us = ep_stream_us[at];
      if (op.stream == Stream::kEpComm) {
        const double t = costs[op.event].time_us;
        if (op.pipelined_with_next) {
          pipelined_us[at] = t;  // the pair costs the longer hop (op_offsets.h)
        } else {
          ep_stream_us[at] += std::max(t, pipelined_us[at]);
          pipelined_us[at] = 0;
        }
      }
      const std::optional<FlowKind> kind = inTaskFlowKind(plan, costs, op);
      if (!kind) return;
      out[vs][phaseIndex(phase)].push_back({offset_us, op.event, *kind, stream_offset_us, index});
    };
    for (size_t i = 0; i < stage.forward.size(); ++i) {
      add(stage.forward[i], static_cast<int>(i), offsets[vs].forward_start_us[i], Phase::kForward);
    }
    for (size_t i = 0; i < stage.backward.size(); ++i) {
      const OpInstance& op = stage.backward[i];
      const Phase phase =
          split && runsIn(op, Phase::kWeightGrad, true) ? Phase::kWeightGrad : Phase::kBackward;
      add(op, static_cast<int>(i), offsets[vs].backward_start_us[i], phase);
    }
  }
  if (!hasInTaskTransfers(out)) out.clear();  // none: timelineFlows skips the per-task look-up
  return out;
}

bool hasInTaskOps(const IterationPlan& plan, const std::vector<EventCost>& costs,
                  const std::vector<StageOpOffsets>& offsets) {
  if (costs.empty() || offsets.empty()) return false;
  // inTaskOps' rule per event first (a few dozen), then the ops on a collective's stream.
  std::vector<char> crosses(static_cast<size_t>(plan.events.size()), 0);
  bool any = false;
  for (int e = 0; e < plan.events.size(); ++e) {
    const Event& event = plan.events[e].event;
    crosses[static_cast<size_t>(e)] =
        isCommunication(event.kind) && event.placement.interNode() && costs[e].time_us > 0;
    any = any || crosses[static_cast<size_t>(e)];
  }
  if (!any) return false;
  // Whether the op's event crosses first: most ops' do not (compute, collectives inside a node),
  // so most ops cost one lookup (this runs on every timing that may share; issue 34).
  auto counts = [&](const OpInstance& op) {
    if (!crosses[static_cast<size_t>(op.event)]) return false;
    return op.stream == Stream::kTpComm || op.stream == Stream::kCpComm ||
           op.stream == Stream::kEpComm || op.stream == Stream::kDpComm;
  };
  for (const StagePlan& stage : plan.stages) {
    if (std::any_of(stage.forward.begin(), stage.forward.end(), counts) ||
        std::any_of(stage.backward.begin(), stage.backward.end(), counts)) {
      return true;
    }
  }
  return false;
}

void fusedTaskFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                    const InTaskOps& in_task, const TimingInput& input, const TaskGraph& graph,
                    const StageTimeline& stage, size_t head, const DeviceLinks& d,
                    double stretch_us, TimelineFlows::Origin origin, TimelineFlows& out) {
  const TaskTiming& t = stage.tasks[head];
  const size_t members = static_cast<size_t>(graph.nodes[stage.node(head)].fused_size);
  // Each member's task time and all-to-all part (timing_engine.cpp: the fused rule).
  auto partsOf = [&](size_t at) {
    const TaskNode& node = graph.nodes[stage.node(at)];
    const StageCost& cost = input.stages[node.virtual_stage];
    const Phase phase = node.task.phase;
    const double task_us = phase == Phase::kForward    ? cost.forward_us
                           : phase == Phase::kBackward ? cost.backward_us
                                                       : cost.weight_grad_us;
    const double a2a_us = phase == Phase::kForward    ? cost.forward_overlap_us
                          : phase == Phase::kBackward ? cost.backward_overlap_us
                                                      : 0.0;
    return std::pair{task_us, std::min(a2a_us, task_us)};
  };
  double compute_us = 0, comm_us = 0, factor = 1;
  for (size_t at = head; at < head + members; ++at) {
    const auto [task_us, a2a_us] = partsOf(at);
    compute_us += task_us - a2a_us;
    comm_us += a2a_us;
    if (a2a_us > 0) {
      factor = std::max(
          factor, input.stages[graph.nodes[stage.node(at)].virtual_stage].a2a_compute_slowdown);
    }
  }
  const double run_us = t.run.duration() - stretch_us;
  const double longer_us = fusedTaskUs(compute_us, comm_us, factor);
  const double scale = longer_us > 0 ? run_us / longer_us : 1;
  TimelineFlows::Origin comm = origin, compute = origin;
  comm.slack_us = std::max(0.0, run_us - comm_us * scale);
  compute.slack_us = std::max(0.0, run_us - compute_us * scale);
  int comm_before = -1, compute_before = -1;     // the last flow of each chain
  double comm_done_us = 0, compute_done_us = 0;  // the members' stream time before this one
  for (size_t at = head; at < head + members; ++at) {
    const auto [task_us, a2a_us] = partsOf(at);
    const double own_compute_us = task_us - a2a_us;
    const TaskNode& node = graph.nodes[stage.node(at)];
    for (const InTaskOp& op : in_task[node.virtual_stage][phaseIndex(node.task.phase)]) {
      const bool on_comm = op.kind == FlowKind::kEp;
      const double at_us =
          on_comm ? comm_done_us + op.stream_offset_us
                  : compute_done_us + (task_us > 0 ? op.offset_us * own_compute_us / task_us : 0);
      const Event& event = plan.events[op.event].event;
      SharedFlow f = inTaskFlow(plan.cluster.topology, d, event, t.run.start_us + at_us * scale,
                                costs[op.event].time_us, &plan.cluster);
      int& before = on_comm ? comm_before : compute_before;
      f.after = before;
      TimelineFlows::Origin o = on_comm ? comm : compute;
      o.kind = op.kind;
      before = out.add(f, o);
    }
    comm_done_us += a2a_us;
    compute_done_us += own_compute_us;
  }
}

SharedFlow inTaskFlow(const NetworkTopology& topology, const DeviceLinks& d, const Event& event,
                      double start_us, double duration_us, const ClusterConfig* cluster) {
  if (event.kind != EventKind::kAllToAll) {
    const bool tree = cluster != nullptr && treeKeepsRail(*cluster, d, event);
    return collectiveFlow(topology, d, event.placement, linkBytes(event), start_us, duration_us,
                          tree);
  }
  const Placement& p = event.placement;
  const double peers = std::max(1, p.group_size - 1);
  SharedFlow f{start_us, duration_us, linkBytes(event), {}};  // (n - 1) / n of the buffer
  // Its own node's peers over NVLink, and with PXN the detour of cross-node bytes to another
  // rail's GPU; without, those bytes leave through its own rail (link_map.h: alltoallShares).
  const AlltoallShares shares = alltoallShares(topology, d, p);
  if (p.ranks_per_node > 1) {
    const float share = static_cast<float>(shares.nvlink);
    f.uses.push_back({d.nvlink_tx, share});
    f.uses.push_back({d.nvlink_rx, share});
  }
  // nic_copies: the node's copies (pooled NICs) or those on the device's rail (per GPU; by
  // symmetry the other rails carry as much: rail j carries every local GPU's bytes to peers on
  // rail j, as much as one GPU's own cross-node bytes).
  const float copies =
      d.nic_copies * static_cast<float>((p.group_size - p.ranks_per_node) / peers);
  f.uses.push_back({d.nic_tx, copies});
  f.uses.push_back({d.nic_rx, copies});
  addUplinks(topology, d.uplink_tx, p.nodes, copies, f.uses);
  addUplinks(topology, d.uplink_rx, p.nodes, copies, f.uses);
  // Through its own rail to another: a rail-optimised bottom tier's uplinks, where the group does
  // not cross them anyway (every node's copies sending at once, as the NIC loads above).
  if (shares.up_rail_tier > 0 && topology.railOptimized() &&
      !crossesTier(topology, topology.tiers.front(), p.nodes) && d.uplink_tx.front() >= 0) {
    const float up = d.nic_copies * static_cast<float>(shares.up_rail_tier);
    f.uses.push_back({d.uplink_tx.front(), up});
    f.uses.push_back({d.uplink_rx.front(), up});
  }
  return f;
}

DeviceInTaskFlows::DeviceInTaskFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                                     const InTaskOps& ops, const DeviceLinks& device)
    : plan_(plan),
      costs_(costs),
      ops_(ops),
      device_(device),
      flows_(ops.size()),
      built_(ops.size(), std::array<bool, 3>{}),
      shape_slots_(ops.size()) {}

const std::vector<SharedFlow>& DeviceInTaskFlows::of(int vs, Phase phase) {
  const int p = phaseIndex(phase);
  std::vector<SharedFlow>& flows = flows_[vs][p];
  if (!built_[vs][p]) {
    built_[vs][p] = true;
    for (const InTaskOp& op : ops_[vs][p]) {
      flows.push_back(inTaskFlow(plan_.cluster.topology, device_, plan_.events[op.event].event,
                                 op.offset_us, costs_[op.event].time_us, &plan_.cluster));
    }
    shape_slots_[vs][p].assign(flows.size(), -1);
  }
  return flows;
}

}  // namespace evsim

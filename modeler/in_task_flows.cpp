// In-task collectives across nodes as flows; in_task_flows.h and link_flows.h state the model.
#include "modeler/in_task_flows.h"

#include <algorithm>

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

InTaskOps inTaskOps(const IterationPlan& plan, const std::vector<EventCost>& costs,
                    const std::vector<StageOpOffsets>& offsets, bool split) {
  InTaskOps out;
  if (costs.empty() || offsets.empty()) return out;
  out.resize(plan.stages.size());
  for (size_t vs = 0; vs < plan.stages.size(); ++vs) {
    const StagePlan& stage = plan.stages[vs];
    auto add = [&](const OpInstance& op, double offset_us, Phase phase) {
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
          return;
      }
      const Event& event = plan.events[op.event].event;
      if (!isCommunication(event.kind) || !event.placement.interNode()) return;
      if (costs[op.event].time_us <= 0) return;
      out[vs][phaseIndex(phase)].push_back({offset_us, op.event, kind});
    };
    for (size_t i = 0; i < stage.forward.size(); ++i) {
      add(stage.forward[i], offsets[vs].forward_start_us[i], Phase::kForward);
    }
    for (size_t i = 0; i < stage.backward.size(); ++i) {
      const OpInstance& op = stage.backward[i];
      const Phase phase =
          split && runsIn(op, Phase::kWeightGrad, true) ? Phase::kWeightGrad : Phase::kBackward;
      add(op, offsets[vs].backward_start_us[i], phase);
    }
  }
  if (!hasInTaskTransfers(out)) out.clear();  // none: timelineFlows skips the per-task look-up
  return out;
}

SharedFlow inTaskFlow(const NetworkTopology& topology, const DeviceLinks& d, const Event& event,
                      double start_us, double duration_us) {
  if (event.kind != EventKind::kAllToAll) {
    return collectiveFlow(topology, d, event.placement, linkBytes(event), start_us, duration_us);
  }
  const Placement& p = event.placement;
  const double peers = std::max(1, p.group_size - 1);
  SharedFlow f{start_us, duration_us, linkBytes(event), {}};  // (n - 1) / n of the buffer
  if (p.ranks_per_node > 1) {
    const float share = static_cast<float>((p.ranks_per_node - 1) / peers);
    f.uses.push_back({d.nvlink_tx, share});
    f.uses.push_back({d.nvlink_rx, share});
  }
  const float copies = d.copies * static_cast<float>((p.group_size - p.ranks_per_node) / peers);
  f.uses.push_back({d.nic_tx, copies});
  f.uses.push_back({d.nic_rx, copies});
  addUplinks(topology, d.uplink_tx, p.nodes, copies, f.uses);
  addUplinks(topology, d.uplink_rx, p.nodes, copies, f.uses);
  return f;
}

DeviceInTaskFlows::DeviceInTaskFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                                     const InTaskOps& ops, const DeviceLinks& device)
    : plan_(plan),
      costs_(costs),
      ops_(ops),
      device_(device),
      flows_(ops.size()),
      built_(ops.size(), std::array<bool, 3>{}) {}

const std::vector<SharedFlow>& DeviceInTaskFlows::of(int vs, Phase phase) {
  const int p = phaseIndex(phase);
  std::vector<SharedFlow>& flows = flows_[vs][p];
  if (!built_[vs][p]) {
    built_[vs][p] = true;
    for (const InTaskOp& op : ops_[vs][p]) {
      flows.push_back(inTaskFlow(plan_.cluster.topology, device_, plan_.events[op.event].event,
                                 op.offset_us, costs_[op.event].time_us));
    }
  }
  return flows;
}

}  // namespace evsim

#pragma once
// The walk over a timed iteration's transfers in timelineFlows' order (link_flows.h states the
// flows), shared by the flow list (timelineFlows), the link report's loads (transferLoads) and its
// totals (link_totals.h), each handing every flow to its own `push`. Included by those .cpp files
// only.

#include <optional>
#include <vector>

#include "common/error.h"
#include "modeler/in_task_flows.h"
#include "modeler/link_flows.h"

namespace evsim {
namespace flow_walk {

// The link and direction (sendFlows' slot below: 2 l, 2 l + 1 for the gradient) of device
// `device`'s sends of code `code` (TaskGraph::send_codes, above 0: a chunk and a direction), or -1
// where that chunk sends nothing that way (an activation of the last virtual stage, a gradient of
// the first). Link sharing's arrivals check and the link report's totals both read a device's
// sends by code.
inline int sendSlot(const PipelineLayout& layout, int device, int code) {
  const bool gradient = sendCodeGradient(code);
  const int stage = layout.virtualStage(device, sendCodeChunk(code));
  const int link = gradient ? stage - 1 : stage;
  if (link < 0 || link + 1 >= layout.stages()) return -1;
  return 2 * link + (gradient ? 1 : 0);
}

// The flow of one send over each link of class `k` (2 l: the activation k -> k+1, 2 l + 1: the
// gradient back), but its start: every send over a link is the same transfer (issue 28: identical
// flows computed once). Empty uses where the link has no event.
inline void sendFlows(const IterationPlan& plan, const PipelineCost& cost, int k,
                      const LinkMap& map, std::vector<SharedFlow>& out) {
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

// Every flow of `timeline` in timelineFlows' order, each handed to
// `push(flow, start_us, after, origin, send, slot)` (which returns its index in the list, for the
// chains of in-task collectives); `send` is a pipeline send's link and direction (2 l, 2 l + 1 for
// the gradient: within a class, every send with that value is the same flow but its start), else
// -1. `slot`, where not null, is the same int for every flow of the device that is `flow` but its
// start, after and origin's index (a send over one link, an in-task collective of one virtual
// stage, phase and position): the flow list keeps their shape there (FlowList).
// The in-task collectives (`in_task` not empty) need the list itself (`list`: a fused task's flows
// are appended to it). `with_tasks` false: only the DP collectives and the ZeRO gather (the link
// report's totals read the sends from the timeline themselves; no in-task collectives then).
// `stage_done(k, s)` is called once the walk is done with device stage s of class k: it reads
// nothing of that stage's timeline again (the graph it reads throughout).
struct NoStageDone {
  void operator()(size_t, int) const {}
};
template <typename Push, typename StageDone = NoStageDone>
void walkTimelineFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                       const InTaskOps& in_task, const TimingInput& input,
                       const IterationTimeline& timeline, const LinkMap& map, TimelineFlows* list,
                       Push push, bool with_tasks = true, StageDone stage_done = {}) {
  EVSIM_CHECK(with_tasks || in_task.empty(), "in-task flows without their tasks");
  EVSIM_CHECK(in_task.empty() || list != nullptr, "in-task flows without a flow list");
  const NetworkTopology& topology = plan.cluster.topology;
  const PipelineLayout layout = plan.pipelineLayout();
  const int P = plan.deviceStages();
  const int v = plan.chunksPerDevice();
  std::vector<SharedFlow> sends;  // per link and direction: the flow of one send, but its start
  std::vector<int> send_slots;    // per link and direction, for the device walked
  // --grad-reduce-sync step, for the device walked: per chunk and bucket, the flow of one queued
  // reduction but its start (empty until its first) and its shape's slot.
  std::vector<std::vector<std::optional<SharedFlow>>> queued_flows;
  std::vector<std::vector<int>> queued_slots;
  TreeRailRule tree_rule(plan.cluster);
  for (size_t k = 0; k < timeline.pipelines.size(); ++k) {
    sendFlows(plan, input.pipelines[k], static_cast<int>(k), map, sends);
    for (int s = 0; s < P; ++s) {
      const DeviceLinks& d = map.devices[k][s];
      const StageTimeline& stage = timeline.pipelines[k].stages[s];
      send_slots.assign(sends.size(), -1);
      std::optional<DeviceInTaskFlows> chains;
      if (!in_task.empty()) chains.emplace(plan, costs, in_task, d);
      for (size_t i = 0; with_tasks && i < stage.tasks.size(); ++i) {
        const TaskTiming& t = stage.tasks[i];
        const TaskNode& node = timeline.graph.nodes[stage.node(i)];
        if (!in_task.empty() && node.fused_size > 1) {
          const double stretch = input.task_stretch_us.empty() ? 0 : input.task_stretch_us[k][s][i];
          fusedTaskFlows(plan, costs, in_task, input, timeline.graph, stage, i, d, stretch,
                         {FlowKind::kEp, static_cast<int>(k), s, static_cast<int>(i)}, *list);
        } else if (!in_task.empty() && node.fused_size == 1) {
          // Its collectives across nodes where the run has them: the standalone offsets scaled to
          // the run (a straggler's factor, jitter), the stretch sharing gave it taken off.
          const Phase phase = node.task.phase;
          const std::vector<InTaskOp>& ops = in_task[node.virtual_stage][phaseIndex(phase)];
          const StageCost& cost = input.stages[node.virtual_stage];
          const double alone_us = phase == Phase::kForward    ? cost.forward_us
                                  : phase == Phase::kBackward ? cost.backward_us
                                                              : cost.weight_grad_us;
          const double stretch = input.task_stretch_us.empty() ? 0 : input.task_stretch_us[k][s][i];
          const double scale = alone_us > 0 ? (t.run.duration() - stretch) / alone_us : 1;
          // One after another: each follows the one before (link_sharing.h: SharedFlow::after).
          const std::vector<SharedFlow>& flows = chains->of(node.virtual_stage, phase);
          std::vector<int>& slots = chains->shapeSlots(node.virtual_stage, phase);
          int before = -1;
          for (size_t j = 0; j < ops.size(); ++j) {
            before =
                push(flows[j], t.run.start_us + ops[j].offset_us * scale, before,
                     {ops[j].kind, static_cast<int>(k), s, static_cast<int>(i), 0.0, ops[j].op}, -1,
                     &slots[j]);
          }
        }
        if (node.send == Send::kNone) continue;
        const int which = 2 * linkOf(node) + (node.send == Send::kGradient ? 1 : 0);
        const SharedFlow& send = sends[which];
        if (send.uses.empty()) continue;  // no event (a link inside one device)
        push(send, t.run.end_us, send.after,
             {FlowKind::kPp, static_cast<int>(k), s, static_cast<int>(i)}, which,
             &send_slots[which]);
      }
      // The DP collectives, in the order computeTimeline placed them (chunk v-1 first; per chunk
      // its buckets or its one collective, the routed experts' after the dense).
      size_t interval = 0;
      double gather_bytes = 0;
      const Event* gather_event = nullptr;
      auto sync = [&](const Event& event, double bytes) {
        const Interval& when = stage.grad_sync[interval];
        const double stretch =
            input.grad_sync_stretch_us.empty() ? 0 : input.grad_sync_stretch_us[s][interval];
        const SharedFlow f =
            collectiveFlow(topology, d, event.placement, bytes, when.start_us,
                           when.duration() - stretch, tree_rule.keepsRail(d, event));
        push(f, f.start_us, f.after,
             {FlowKind::kDp, static_cast<int>(k), s, static_cast<int>(interval)}, -1, nullptr);
        ++interval;
      };
      // --grad-reduce-sync step: ZeRO-2's reductions, queued in issue order (the only DP
      // collectives before the step under ZeRO-2), each following the one before on the DP stream
      // (SharedFlow::after, queued): sharing that delays one delays the queue behind it where it
      // was waiting for that one, and the queue never runs two at once. Every micro-batch's
      // reduction of one chunk's bucket is the same flow but its start (the bucket's event, its
      // cost's time alone): worked out once and one shape (`queued_slots`).
      queued_flows.resize(static_cast<size_t>(v));
      queued_slots.resize(static_cast<size_t>(v));
      for (int c = 0; c < v && !stage.grad_sync_bucket.empty(); ++c) {
        const size_t buckets = plan.stages[layout.virtualStage(s, c)].micro_batch_buckets.size();
        queued_flows[c].assign(buckets, std::nullopt);
        queued_slots[c].assign(buckets, -1);
      }
      int queued_before = -1;
      for (size_t i = 0; i < stage.grad_sync_bucket.size(); ++i) {
        const int c = stage.grad_sync_chunk[i];
        const int vs = layout.virtualStage(s, c);
        const size_t b = static_cast<size_t>(stage.grad_sync_bucket[i]);
        std::optional<SharedFlow>& f = queued_flows[c][b];
        if (!f) {
          const Event& event = plan.events[plan.stages[vs].micro_batch_buckets[b].event].event;
          f = collectiveFlow(topology, d, event.placement, linkBytes(event), 0,
                             input.stages[vs].micro_batch_buckets[b].allreduce_us,
                             tree_rule.keepsRail(d, event));
          f->queued = true;
        }
        queued_before = push(*f, stage.grad_sync[interval].start_us, queued_before,
                             {FlowKind::kDp, static_cast<int>(k), s, static_cast<int>(interval)},
                             -1, &queued_slots[c][b]);
        ++interval;
      }
      for (int c = v - 1; c >= 0; --c) {
        const int vs = layout.virtualStage(s, c);
        const StagePlan& sp = plan.stages[vs];
        const StageCost& cost = input.stages[vs];
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
                                            stage.param_allgather.duration() - stretch,
                                            /*tree=*/false);  // NCCL's tree is all-reduce's only
        push(f, f.start_us, f.after, {FlowKind::kZero, static_cast<int>(k), s, 0}, -1, nullptr);
      }
      stage_done(k, s);
    }
  }
}

}  // namespace flow_walk
}  // namespace evsim

#pragma once
// The collectives inside tasks whose group spans nodes (TP, CP, EP; ZeRO-3/FSDP gathers and
// reduce-scatters) as flows: link_flows.h states the model (an all-to-all by its own rule), and
// link_flows.cpp places them on the timeline, one chain per task.

#include <array>
#include <optional>
#include <vector>

#include "modeler/cost_source.h"
#include "modeler/link_flows.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"

namespace evsim {

// A collective inside a task whose group spans nodes: where it starts in one task of its virtual
// stage and phase (forward, B, W), its event and kind.
struct InTaskOp {
  double offset_us = 0;
  int event = -1;
  FlowKind kind = FlowKind::kTp;
  double stream_offset_us = 0;  // an all-to-all: its task's expert all-to-alls before it
  int op = -1;                  // its position in the task's op list (forward or backward)
};
using InTaskOps = std::vector<std::array<std::vector<InTaskOp>, 3>>;  // per virtual stage, phase

int phaseIndex(Phase phase);  // forward 0, B 1, W 2

// The kind of `op`'s flow when it is a collective across nodes with a positive time on a
// collective's stream (what inTaskOps lists), else nullopt.
std::optional<FlowKind> inTaskFlowKind(const IterationPlan& plan,
                                       const std::vector<EventCost>& costs, const OpInstance& op);

// Per virtual stage and phase, its collectives across nodes with a positive time, at their
// standalone offsets in the task (`split`: the schedule splits B and W). Empty when there are
// none, or without `costs` or `offsets`.
InTaskOps inTaskOps(const IterationPlan& plan, const std::vector<EventCost>& costs,
                    const std::vector<StageOpOffsets>& offsets, bool split);
// Whether inTaskOps(plan, costs, offsets, any split) is not empty, without listing them: a check
// each simulation makes (most plans have no collective across nodes inside a task).
bool hasInTaskOps(const IterationPlan& plan, const std::vector<EventCost>& costs,
                  const std::vector<StageOpOffsets>& offsets);

// The flow of an in-task collective of device `d`; with `cluster` (the plan's), an all-reduce NCCL
// runs as its tree keeps its rail (link_flows.h, treeKeepsRail); null only where no all-reduce
// can be asked (an all-to-all), else the ring's rule is taken.
SharedFlow inTaskFlow(const NetworkTopology& topology, const DeviceLinks& d, const Event& event,
                      double start_us, double duration_us, const ClusterConfig* cluster);

// Appends to `out` the flows of fused task `head` (a position in `stage`'s tasks; DualPipeV's F&B)
// on device `d`, by link_flows.h's rule: its expert all-to-alls back to back on the communication
// stream from the run's start, its other collectives across nodes on the compute stream (each at
// its offset in its member's compute), each stream one chain whose origins carry the stream's
// slack, every stream's time scaled to the run (a straggler's factor, jitter) as lone tasks'
// offsets are. `stretch_us`: what sharing gave the run before (taken off); `origin`: the task's.
void fusedTaskFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                    const InTaskOps& in_task, const TimingInput& input, const TaskGraph& graph,
                    const StageTimeline& stage, size_t head, const DeviceLinks& d,
                    double stretch_us, TimelineFlows::Origin origin, TimelineFlows& out);

// One device's in-task flows: every task of a virtual stage and phase carries the same
// collectives, so each (virtual stage, phase)'s flows are built once, with start_us = the op's
// standalone offset, and only stamped per task (issue 28: identical flows computed once).
class DeviceInTaskFlows {
 public:
  DeviceInTaskFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                    const InTaskOps& ops, const DeviceLinks& device);
  // The flows of a task of virtual stage `vs` in `phase`, in op order (InTaskOps' order).
  const std::vector<SharedFlow>& of(int vs, Phase phase);
  // Per flow of of(vs, phase), a slot the caller may keep the flow's shape in (FlowList; -1 until
  // it does).
  std::vector<int>& shapeSlots(int vs, Phase phase) {
    of(vs, phase);
    return shape_slots_[vs][phaseIndex(phase)];
  }

 private:
  const IterationPlan& plan_;
  const std::vector<EventCost>& costs_;
  const InTaskOps& ops_;
  const DeviceLinks& device_;
  std::vector<std::array<std::vector<SharedFlow>, 3>> flows_;  // per virtual stage, phase
  std::vector<std::array<bool, 3>> built_;
  std::vector<std::array<std::vector<int>, 3>> shape_slots_;
};

}  // namespace evsim

#pragma once
// What one sharing pass added to each transfer, as the timing's stretch fields (link_flows.h's
// sharing pass: the standalone timeline's flows shared, then timed once more with these).

#include <vector>

#include "modeler/cost_source.h"
#include "modeler/in_task_flows.h"
#include "modeler/link_flows.h"
#include "modeler/network/link_sharing.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"

namespace evsim {

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

  UnsharedTimeline(const IterationTimeline& timeline, const InTaskOps& in_task);
};

// Sets the stretch fields of `input` from shared ends, and `by_kind` (per class and device stage)
// from the in-task ones; returns whether any is above rounding. `graph`: the unshared timing's.
bool applyStretch(const IterationPlan& plan, const std::vector<EventCost>& costs,
                  const TimelineFlows& flows, const SharingResult& shared, int stages,
                  TimingInput& input, const UnsharedTimeline& timeline, const TaskGraph& graph,
                  std::vector<std::vector<TaskLinkStretch>>* by_kind);

}  // namespace evsim

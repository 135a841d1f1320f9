#pragma once
// Whether the transfers of a timed iteration may share a link at once (link_flows.h's sharing
// pass skips a plan where none can): the cheap checks before any flow is listed.

#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"

namespace evsim {

// Whether two of the timeline's transfers share a resource at once, or may: DP buckets in flight
// beside the pipeline, or two representative devices on one node (both: the flows decide); else
// only sends arriving at one device from two neighbours at once. Sends of one device never
// overlap each other (a send holds its device), and the DP collectives and the ZeRO gather
// without overlap start after every transfer of the device.
bool mayShare(const IterationPlan& plan, const TimingInput& input,
              const IterationTimeline& timeline);

}  // namespace evsim

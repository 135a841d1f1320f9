#pragma once
// Fused tasks of a task graph (task_graph.h): Megatron's combined 1F1B marks them in the orders,
// and buildTaskGraph checks and sizes them. Moved out of task_graph.cpp (one responsibility a
// file; it passed 500 lines).

#include <memory>

#include "plan/pipeline_schedule.h"
#include "plan/task_graph.h"

namespace evsim::fused_tasks {

// Sets fused_size on each fused task's nodes and checks each is one F and the B (and W) of
// another micro-batch, whose only inner edge is W's on its own B.
void checkFusedTasks(const TaskGraph& g, TaskGraph::Storage& st, Schedule schedule);

// Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm): each forward that its device
// runs right before the backward of another (micro-batch, chunk) is fused with it, the backward
// marked overlapped (a backward never needs a forward of another micro-batch or chunk).
std::shared_ptr<const DeviceOrders> fuseForwardBackward(const DeviceOrders& orders);

}  // namespace evsim::fused_tasks

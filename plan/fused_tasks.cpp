// Fused tasks of a task graph; fused_tasks.h.
#include "plan/fused_tasks.h"

#include "common/error.h"

namespace evsim::fused_tasks {

// Sets fused_size on each fused task's nodes and checks each is one F and the B (and W) of
// another micro-batch, whose only inner edge is W's on its own B.
void checkFusedTasks(const TaskGraph& g, TaskGraph::Storage& st, Schedule schedule) {
  for (int s = 0; s < g.devices; ++s) {
    const size_t tasks = static_cast<size_t>(g.tasks_per_device);
    auto order = [&](size_t position) { return g.nodeAt(s, position); };
    for (size_t head = 0; head < tasks;) {
      TaskNode& h = st.nodes[order(head)];
      EVSIM_CHECK(!h.task.overlapped, "{} schedule: device {} starts with an overlapped task",
                  scheduleName(schedule), s);
      size_t end = head + 1;
      while (end < tasks && g.nodes[order(end)].task.overlapped) ++end;
      EVSIM_CHECK(end - head <= 3,
                  "{} schedule: device {}: a fused task of {} tasks is not one F and one B",
                  scheduleName(schedule), s, end - head);
      h.fused_size = static_cast<uint8_t>(end - head);
      if (end - head > 1) {
        int forwards = 0, backwards = 0;
        for (size_t i = head; i < end; ++i) {
          const TaskNode& n = g.nodes[order(i)];
          forwards += n.task.phase == Phase::kForward;
          backwards += n.task.phase == Phase::kBackward;
          if (i > head) st.nodes[order(i)].fused_size = 0;
          for (const TaskEdge& e : g.inputs(order(i))) {
            const TaskNode& from = g.nodes[e.from];
            const bool inner = e.from >= order(head) && e.from < order(end);
            EVSIM_CHECK(!inner || (n.task.phase == Phase::kWeightGrad &&
                                   from.task.phase == Phase::kBackward),
                        "{} schedule: device {}: a fused task's {} of mb {} needs its own {}",
                        scheduleName(schedule), s, phaseName(n.task.phase), n.task.micro_batch,
                        phaseName(from.task.phase));
          }
        }
        EVSIM_CHECK(forwards == 1 && backwards == 1,
                    "{} schedule: device {}: a fused task of {} tasks is not one F and one B",
                    scheduleName(schedule), s, end - head);
      }
      head = end;
    }
  }
}

// Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm): each forward that its device
// runs right before the backward of another (micro-batch, chunk) is fused with it, the backward
// marked overlapped (a backward never needs a forward of another micro-batch or chunk).
std::shared_ptr<const DeviceOrders> fuseForwardBackward(const DeviceOrders& orders) {
  auto fused = std::make_shared<DeviceOrders>(orders);
  for (std::vector<StageTask>& order : *fused) {
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      const StageTask& f = order[i];
      StageTask& b = order[i + 1];
      if (f.phase != Phase::kForward || b.phase != Phase::kBackward || f.overlapped) continue;
      if (f.micro_batch == b.micro_batch && f.chunk == b.chunk) continue;
      b.overlapped = true;
      ++i;
    }
  }
  return fused;
}

}  // namespace evsim::fused_tasks

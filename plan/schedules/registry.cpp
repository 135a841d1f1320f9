#include <list>
#include <map>
#include <mutex>
#include <tuple>

#include "common/error.h"
#include "plan/schedules/schedules.h"
#include "plan/shape_cache.h"
#include "plan/task_graph.h"

namespace evsim {

std::vector<std::vector<StageTask>> PipelineSchedule::orders(const PipelineShape& shape) const {
  std::vector<std::vector<StageTask>> out;
  out.reserve(static_cast<size_t>(shape.stages));
  for (int s = 0; s < shape.stages; ++s) out.push_back(deviceOrder(s, shape));
  return out;
}

const PipelineSchedule& pipelineSchedule(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGpipe:
      return gpipeSchedule();
    case Schedule::kDapple:
      return oneFOneBSchedule();
    case Schedule::kInterleaved:
      return interleavedSchedule();
    case Schedule::kZbh1:
      return zbH1Schedule();
    case Schedule::kZbh2:
      return zbH2Schedule();
    case Schedule::kZbv:
      return zbVSchedule();
    case Schedule::kDualPipeV:
      return dualPipeVSchedule();
    case Schedule::kFile:
      return fileSchedule();
  }
  EVSIM_THROW(Error, "schedule {} has no order", static_cast<int>(schedule));
}

PipelineLayout pipelineLayout(Schedule schedule, int devices, int chunks) {
  return PipelineLayout(pipelineSchedule(schedule).layout(), devices, chunks);
}

PipelineLayout pipelineLayout(const Strategy& strategy) {
  const PipelineSchedule& schedule = pipelineSchedule(strategy.schedule);
  // ZB-V and a schedule file fix their chunks; Strategy::virtual_stages counts the interleaved
  // schedule's.
  const int chunks = schedule.fixedChunks() > 0 ? schedule.fixedChunks()
                     : schedule.allowsChunks()    ? strategy.virtual_stages
                                                  : 1;
  return pipelineLayout(strategy.schedule, strategy.pp, chunks);
}

namespace {

ShapeKey shapeKey(Schedule schedule, const PipelineShape& shape) {
  return {static_cast<int>(schedule), shape.stages, shape.chunks, shape.micro_batches,
          schedule == Schedule::kInterleaved && shape.group > 0 ? shape.group : 0};
}

}  // namespace

std::shared_ptr<const DeviceOrders> scheduleOrders(Schedule schedule, const PipelineShape& shape) {
  // A schedule file can be replaced in a process (tests): its orders are not cached by shape.
  if (schedule == Schedule::kFile) {
    return std::make_shared<const DeviceOrders>(fileSchedule().orders(shape));
  }
  // Up to kKeptShapeTasks (65,536) kept: larger orders are only read while their graph is built
  // (its activation states with it, task_graph.cpp), and kept they sat through the simulation
  // beside link sharing's flows, 2.1 MB for 131,072 tasks (issue 34, session 27).
  static ShapeCache<DeviceOrders> cache(4 * kKeptShapeTasks);  // tasks
  return cache.get(
      shapeKey(schedule, shape), [&] { return pipelineSchedule(schedule).orders(shape); },
      [](const DeviceOrders& orders) {
        size_t tasks = 0;
        for (const std::vector<StageTask>& order : orders) tasks += order.size();
        return tasks;
      });
}

std::shared_ptr<const std::vector<ActivationStates>> scheduleActivationStates(
    Schedule schedule, const PipelineShape& shape) {
  return scheduleActivationStates(schedule, shape, nullptr);
}

std::shared_ptr<const std::vector<ActivationStates>> scheduleActivationStates(
    Schedule schedule, const PipelineShape& shape, const DeviceOrders* given,
    const std::vector<int>* peaks) {
  auto compute = [&] {
    if (peaks != nullptr) {
      std::vector<ActivationStates> out;
      out.reserve(peaks->size());
      for (int peak : *peaks) out.push_back(oneChunkStates(peak));
      return out;
    }
    std::shared_ptr<const DeviceOrders> computed;
    if (given == nullptr) computed = scheduleOrders(schedule, shape);
    const DeviceOrders& orders = given != nullptr ? *given : *computed;
    std::vector<ActivationStates> out;
    for (const std::vector<StageTask>& order : orders) {
      out.push_back(activationStates(order, shape.chunks));
    }
    return out;
  };
  if (schedule == Schedule::kFile) {
    return std::make_shared<const std::vector<ActivationStates>>(compute());
  }
  static ShapeCache<std::vector<ActivationStates>> cache(size_t{1} << 20);  // counts
  return cache.get(shapeKey(schedule, shape), compute,
                   [](const std::vector<ActivationStates>& states) {
                     size_t counts = 0;
                     for (const ActivationStates& s : states) counts += s.counts.size();
                     return counts;
                   });
}

std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages,
                                      int64_t micro_batches, int virtual_stages) {
  EVSIM_CHECK(stage >= 0 && stage < stages && micro_batches > 0, "stage {} of {}, m={}", stage,
              stages, micro_batches);
  const PipelineSchedule& s = pipelineSchedule(schedule);
  EVSIM_CHECK(virtual_stages == 1 || (virtual_stages > 1 && s.allowsChunks()),
              "{} schedule with v={}", scheduleName(schedule), virtual_stages);
  return s.deviceOrder(stage, PipelineShape{stages, virtual_stages, micro_batches});
}

}  // namespace evsim

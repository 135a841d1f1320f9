#include <list>
#include <map>
#include <mutex>
#include <tuple>

#include "common/error.h"
#include "modeler/schedules/schedules.h"

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
  }
  EVSIM_THROW(Error, "schedule {} has no order", static_cast<int>(schedule));
}

std::shared_ptr<const DeviceOrders> scheduleOrders(Schedule schedule, const PipelineShape& shape) {
  using Key = std::tuple<int, int, int, int64_t>;  // (schedule, P, v, m)
  constexpr size_t kMaxCachedTasks = size_t{1} << 21;
  struct Entry {
    std::shared_ptr<const DeviceOrders> orders;
    size_t tasks = 0;
    std::list<Key>::iterator age;
  };
  static std::mutex mutex;
  static std::map<Key, Entry> cache;
  static std::list<Key> ages;  // least recently used first
  static size_t cached_tasks = 0;
  const Key key{static_cast<int>(schedule), shape.stages, shape.chunks, shape.micro_batches};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      ages.splice(ages.end(), ages, it->second.age);
      return it->second.orders;
    }
  }
  // Computed outside the lock; two threads racing on a miss compute the same orders.
  auto orders = std::make_shared<const DeviceOrders>(pipelineSchedule(schedule).orders(shape));
  size_t tasks = 0;
  for (const std::vector<StageTask>& order : *orders) tasks += order.size();
  if (tasks > kMaxCachedTasks / 4) return orders;  // too large to keep
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key, Entry{orders, tasks, ages.end()});
  if (!inserted) return it->second.orders;
  it->second.age = ages.insert(ages.end(), key);
  cached_tasks += tasks;
  while (cached_tasks > kMaxCachedTasks) {
    auto oldest = cache.find(ages.front());
    cached_tasks -= oldest->second.tasks;
    cache.erase(oldest);
    ages.pop_front();
  }
  return orders;
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

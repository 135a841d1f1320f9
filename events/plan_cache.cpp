#include "events/plan_cache.h"

namespace evsim {

std::vector<int> PlanCache::partition(const PartitionKey& key,
                                      const std::function<std::vector<int>()>& compute) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = partitions_.find(key);
    if (it != partitions_.end()) return it->second;
  }
  std::vector<int> value = compute();  // outside the lock: other keys proceed meanwhile
  std::lock_guard<std::mutex> lock(mutex_);
  return partitions_.try_emplace(key, std::move(value)).first->second;
}

const PlanCache::Placements& PlanCache::placements(const PlacementKey& key,
                                                   const std::function<Placements()>& compute) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = placements_.find(key);
    if (it != placements_.end()) return it->second;
  }
  Placements value = compute();
  std::lock_guard<std::mutex> lock(mutex_);
  return placements_.try_emplace(key, std::move(value)).first->second;
}

}  // namespace evsim

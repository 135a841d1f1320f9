#include "plan/plan_cache.h"

#include <algorithm>

namespace evsim {

namespace {

// The value under `key`, or compute()'s result stored there. compute() runs outside the lock so
// that other keys proceed meanwhile; map nodes never move, so the reference stays valid.
template <typename Map, typename Compute>
const typename Map::mapped_type& lookup(std::mutex& mutex, Map& map,
                                        const typename Map::key_type& key, Compute&& compute) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = map.find(key);
    if (it != map.end()) return it->second;
  }
  typename Map::mapped_type value = compute();
  std::lock_guard<std::mutex> lock(mutex);
  return map.try_emplace(key, std::move(value)).first->second;
}

}  // namespace

std::vector<int> PlanCache::partition(const PartitionKey& key,
                                      const std::function<std::vector<int>()>& compute) {
  return lookup(mutex_, partitions_, key, compute);
}

std::vector<int> PlanCache::partitionOfCosts(const CostKey& key,
                                             const std::function<std::vector<int>()>& compute) {
  return lookup(mutex_, partitions_of_costs_, key, compute);
}

const PlanCache::Placements& PlanCache::placements(const PlacementKey& key,
                                                   const std::function<Placements()>& compute) {
  return lookup(mutex_, placements_, key, compute);
}

const PlanCache::PipelineClasses& PlanCache::pipelineClasses(
    const PlacementKey& key, const std::function<PipelineClasses()>& compute) {
  return lookup(mutex_, pipeline_classes_, key, compute);
}

const ModelFootprint& PlanCache::footprint(const FootprintKey& key,
                                           const std::function<ModelFootprint()>& compute) {
  return lookup(mutex_, footprints_, key, compute);
}

std::shared_ptr<const PlanCore> PlanCache::core(
    const CoreKey& key, const std::function<std::shared_ptr<const PlanCore>()>& compute) {
  auto find = [&] {
    return std::find_if(cores_.begin(), cores_.end(),
                        [&](const auto& entry) { return entry.first == key; });
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = find();
    if (it != cores_.end()) {
      ++core_hits_;
      cores_.splice(cores_.end(), cores_, it);  // now the most recently used
      return it->second;
    }
    ++core_misses_;
  }
  std::shared_ptr<const PlanCore> value = compute();  // outside the lock, as lookup() does
  std::lock_guard<std::mutex> lock(mutex_);
  if (core_capacity_ == 0) return value;
  auto it = find();
  if (it != cores_.end()) return it->second;  // another thread stored it meanwhile: the same value
  cores_.emplace_back(key, value);
  if (cores_.size() > core_capacity_) cores_.pop_front();
  return value;
}

int64_t PlanCache::coreHits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return core_hits_;
}

int64_t PlanCache::coreMisses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return core_misses_;
}

}  // namespace evsim

#include "events/plan_cache.h"

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

const PlanCache::Placements& PlanCache::placements(const PlacementKey& key,
                                                   const std::function<Placements()>& compute) {
  return lookup(mutex_, placements_, key, compute);
}

const ModelFootprint& PlanCache::footprint(const FootprintKey& key,
                                           const std::function<ModelFootprint()>& compute) {
  return lookup(mutex_, footprints_, key, compute);
}

}  // namespace evsim

#include "plan/plan_cache.h"

#include <algorithm>
#include <exception>
#include <optional>

namespace evsim {

const std::vector<int>& PlanCache::partition(const PartitionKey& key,
                                             const std::function<std::vector<int>()>& compute) {
  return partitions_.get(key, compute);
}

const std::vector<int>& PlanCache::partitionOfCosts(
    const CostKey& key, const std::function<std::vector<int>()>& compute) {
  return partitions_of_costs_.get(key, compute);
}

// A two-thread search of Llama 3.1 405B on 1,024 GPUs peaked at 49.7 MB with the placements,
// pipeline classes and footprints let go too, not 55 (bench/RESULTS.md, session 28, mem28).
void PlanCache::releaseLookups() {
  partitions_.clear();
  partitions_of_costs_.clear();
  placements_.clear();
  pipeline_classes_.clear();
  footprints_.clear();
}

const PlanCache::Placements& PlanCache::placements(const PlacementKey& key,
                                                   const std::function<Placements()>& compute) {
  return placements_.get(key, compute);
}

const PlanCache::PipelineClasses& PlanCache::pipelineClasses(
    const PlacementKey& key, const std::function<PipelineClasses()>& compute) {
  return pipeline_classes_.get(key, compute);
}

const ModelFootprint& PlanCache::footprint(const FootprintKey& key,
                                           const std::function<ModelFootprint()>& compute) {
  return footprints_.get(key, compute);
}

std::shared_ptr<const PlanCore> PlanCache::core(
    const CoreKey& key, const std::function<std::shared_ptr<const PlanCore>()>& compute) {
  auto find = [&](auto& list) {
    return std::find_if(list.begin(), list.end(),
                        [&](const auto& entry) { return entry.first == key; });
  };
  std::optional<std::promise<CorePtr>> promise;
  std::shared_future<CorePtr> built_elsewhere;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = find(cores_);
    if (it != cores_.end()) {
      ++core_hits_;
      cores_.splice(cores_.end(), cores_, it);  // now the most recently used
      return it->second;
    }
    if (auto building = find(building_); building != building_.end()) {
      ++core_hits_;  // another thread builds it: its result, once built
      built_elsewhere = building->second;
    } else {
      ++core_misses_;
      building_.emplace_back(key, promise.emplace().get_future().share());
    }
  }
  if (built_elsewhere.valid()) return built_elsewhere.get();
  // Built outside the lock (other threads' look-ups and cores proceed meanwhile).
  CorePtr value;
  try {
    value = compute();
  } catch (...) {
    promise->set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    building_.erase(find(building_));
    throw;
  }
  promise->set_value(value);
  // The core pushed out, freed once the lock is released (declared first, destroyed last): a
  // core is thousands of blocks (op lists, events), and freeing them under the lock held the
  // other workers' look-ups (partitions, placements, cores) for as long (issue 34 item 2).
  CorePtr evicted;
  std::lock_guard<std::mutex> lock(mutex_);
  building_.erase(find(building_));
  if (core_capacity_ == 0) return value;
  cores_.emplace_back(key, value);
  if (cores_.size() > core_capacity_) {
    evicted = std::move(cores_.front().second);
    cores_.pop_front();
  }
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

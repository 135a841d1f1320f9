#pragma once
// What plans of one (model, cluster) share across the candidates of a search, computed once:
// the layer footprints per layer shape, the FLOP-balanced stage partition per layer shape and
// chunk count, and the worst TP and DP group placements of each device stage per (M, P, D).
// Thread-safe: values are pure functions of their keys, so two threads racing on a miss compute the
// same value and either may be kept.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "events/event.h"
#include "events/layer_footprint.h"

namespace evsim {

class PlanCache {
 public:
  // (b, M, sequence parallel, recompute, C, E, chunks K)
  using PartitionKey = std::tuple<int64_t, int, bool, int, int, int, int>;
  // Worst groups of each device stage: TP, DP (x CP), the CP ring pair, EP and expert DP.
  struct Placements {
    std::vector<Placement> tp;
    std::vector<Placement> dp;
    std::vector<Placement> cp_ring;
    std::vector<Placement> ep;
    std::vector<Placement> expert_dp;
  };
  using PlacementKey = std::tuple<int, int, int, int, int>;  // (M, P, D, C, E)
  // (b, M, sequence parallel, recompute, C, E)
  using FootprintKey = std::tuple<int64_t, int, bool, int, int, int>;

  // The cached value, or compute()'s result stored under `key`.
  std::vector<int> partition(const PartitionKey& key,
                             const std::function<std::vector<int>()>& compute);
  const Placements& placements(const PlacementKey& key, const std::function<Placements()>& compute);
  const ModelFootprint& footprint(const FootprintKey& key,
                                  const std::function<ModelFootprint()>& compute);

 private:
  std::mutex mutex_;
  std::map<PartitionKey, std::vector<int>> partitions_;
  std::map<PlacementKey, Placements> placements_;  // node-based: references stay valid
  std::map<FootprintKey, ModelFootprint> footprints_;
};

}  // namespace evsim

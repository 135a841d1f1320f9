#pragma once
// What plans of one (model, cluster) share across the candidates of a search, computed once:
// the layer footprints per layer shape, the FLOP-balanced stage partition per layer shape and
// chunk count, the worst TP and DP group placements of each device stage per (M, P, D), and the
// plan cores (plan_core.h) of the candidates last simulated: candidates that differ only in ZeRO
// stage 0/1/2, DP overlap or the non-interleaved schedule share one.
// Thread-safe: values are pure functions of their keys. A value is computed once: a thread asking
// for a key another thread is computing waits for that result instead of computing it too (the
// two workers of a search claim neighbouring groups, which differ in micro-batch size only and so
// ask for the same placements at the same moment: computing them twice was 3% of a two-thread
// search's instructions, issue 34). Which thread computed a value never changes it. The look-ups
// (all but the cores) take no lock: a value already there is found by reads alone
// (computed_once_map.h).

#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "events/event.h"
#include "ops/layer_footprint.h"
#include "plan/computed_once_map.h"
#include "plan/strategy.h"

namespace evsim {

struct PlanCore;

class PlanCache {
 public:
  // (b, M, sequence parallel, recompute, C, E, ETP, chunks K)
  using PartitionKey = std::tuple<int64_t, int, bool, int, int, int, int, int>;
  // The partition's inputs (block costs, first and last stage extras, chunks K), scaled by a power
  // of two so that the largest is in [1, 2): exact, so the partition is the same. Shapes whose
  // costs differ only by such a factor (micro-batch sizes, TP degrees) share one partition.
  using CostKey = std::tuple<std::vector<double>, double, double, int>;
  // Worst groups of each device stage: TP, DP (x CP), the CP ring pair, EP and expert DP.
  struct Placements {
    std::vector<Placement> tp;
    std::vector<Placement> dp;
    std::vector<Placement> cp_ring;   // a neighbour pair of the CP ring (p2p, a2a+p2p)
    std::vector<Placement> cp_group;  // the CP collectives' group (a2a, allgather, a2a+p2p's a2a)
    std::vector<Placement> ep;
    std::vector<Placement> etp;  // the expert-TP group (the TP group when ETP = M)
    std::vector<Placement> expert_dp;
  };
  // (M, P, D, C, E, ETP, CP a2a size, CP ring size)
  using PlacementKey = std::tuple<int, int, int, int, int, int, int, int>;
  // The DP replicas grouped by the worst placements of their stage-to-stage pairs (pipeline
  // classes, in order of their first replica): `pairs[c][p]` is class c's pair from device stage p
  // to (p + 1) % P. `line` compares the P - 1 pairs p -> p + 1 (v = 1); `ring` also the wrap
  // P - 1 -> 0 that interleaved chunks cross (v > 1; P pairs).
  struct PipelineGroups {
    std::vector<std::vector<Placement>> pairs;
    std::vector<std::vector<int>> replicas;
  };
  struct PipelineClasses {
    PipelineGroups line, ring;
  };
  // (b, M, sequence parallel, recompute, C, E, ETP)
  using FootprintKey = std::tuple<int64_t, int, bool, int, int, int, int>;

  // The strategy with the fields a core does not depend on reset (planCoreKey, plan_core.h): a
  // field added to Strategy is part of the key unless planCoreKey resets it.
  using CoreKey = Strategy;
  // Plan cores kept: a core holds every chunk's op lists (0.3 MB for Llama 3.1 405B's 126 layers,
  // 0.7 MB with full recomputation, ZeRO-3, CP and offload: bench/RESULTS.md, session 29, fix29),
  // so only the most recently used are kept. A search visits candidates by their lower bound, which
  // puts the ZeRO / overlap / schedule variants of one core close together. In the 16,384-GPU
  // search (4,354 plans) 16 cores give 334 reuses on one thread, 64 give 430, an unbounded cache
  // 456: a core costs about 0.1-0.2 ms to build, and 16 keep the peak RSS at 50 MB (64: 113 MB).
  static constexpr size_t kDefaultCoreCapacity = 16;

  // How many keys the look-ups will be asked for, which sizes their bucket arrays (each allocated
  // at its first insertion, computed_once_map.h). kFew: one plan's (buildIterationPlan without a
  // cache, tests), 16 buckets each, 640 bytes in all; kSearch: a search's thousands (the sizes
  // below), ~152 KiB, which a cache made per plan (simulate, fit advice, a space's event
  // inventory: one plan per unique candidate) would allocate, and zero, for a handful of keys.
  enum class Lookups { kFew, kSearch };

  explicit PlanCache(size_t core_capacity = kDefaultCoreCapacity, Lookups lookups = Lookups::kFew)
      : partitions_(lookups == Lookups::kSearch ? 14 : 4),
        partitions_of_costs_(lookups == Lookups::kSearch ? 10 : 4),
        placements_(lookups == Lookups::kSearch ? 9 : 4),
        pipeline_classes_(lookups == Lookups::kSearch ? 9 : 4),
        footprints_(lookups == Lookups::kSearch ? 10 : 4),
        core_capacity_(core_capacity) {}

  // The cached value, or compute()'s result stored under `key`: valid until releaseLookups.
  const std::vector<int>& partition(const PartitionKey& key,
                                    const std::function<std::vector<int>()>& compute);
  const std::vector<int>& partitionOfCosts(const CostKey& key,
                                           const std::function<std::vector<int>()>& compute);
  const Placements& placements(const PlacementKey& key, const std::function<Placements()>& compute);
  const PipelineClasses& pipelineClasses(const PlacementKey& key,
                                         const std::function<PipelineClasses()>& compute);
  const ModelFootprint& footprint(const FootprintKey& key,
                                  const std::function<ModelFootprint()>& compute);
  // The core under `key` (now the most recently used), or compute()'s, stored there (evicting the
  // least recently used beyond the capacity; a caller's pointer keeps an evicted core alive).
  std::shared_ptr<const PlanCore> core(
      const CoreKey& key, const std::function<std::shared_ptr<const PlanCore>()>& compute);
  // Forgets the look-ups a search's pass over the enumeration leaves behind: the partitions
  // (partition: 13,047 keys in the first pass of Llama 3.1 405B's every-dimension search on 1,024
  // GPUs, each a ~110-byte node and a vector of 42 stage boundaries on average, ~3.8 MB;
  // partitionOfCosts: 448 keys), the placements, pipeline classes and footprints (130, 110 and
  // 420 keys; ~3,500 small pieces spread over the heap, which kept its freed space from taking
  // the simulations' arrays of megabytes). The cores stay. A simulation asks again for the few it
  // needs (issue 34 item 2). Not while another thread is inside a look-up or still holds a
  // reference one returned.
  void releaseLookups();
  // Core look-ups answered from the cache (or from another thread's build of the same core), and
  // those that computed the core.
  int64_t coreHits() const;
  int64_t coreMisses() const;

 private:
  // Nodes are freed only by releaseLookups (which the caller orders after every holder of a
  // reference let go), so the references handed out stay valid until then. A search's buckets
  // (log2, Lookups::kSearch) follow the keys that search asks for in a pass (releaseLookups):
  // 2^14 for 13,047 partition keys, 2^10 for 448 cost keys and 420 footprints, 2^9 for 130
  // placements and 110 pipeline classes.
  ComputedOnceMap<PartitionKey, std::vector<int>> partitions_;
  ComputedOnceMap<CostKey, std::vector<int>> partitions_of_costs_;
  ComputedOnceMap<PlacementKey, Placements> placements_;
  ComputedOnceMap<PlacementKey, PipelineClasses> pipeline_classes_;
  ComputedOnceMap<FootprintKey, ModelFootprint> footprints_;

  using CorePtr = std::shared_ptr<const PlanCore>;
  mutable std::mutex mutex_;  // the cores' (below)
  // Least recently used first; few, so found by comparing keys.
  size_t core_capacity_;
  std::list<std::pair<CoreKey, CorePtr>> cores_;
  // The cores some thread is building now (a round's ZeRO variants of one core are simulated
  // side by side); removed once built.
  std::list<std::pair<CoreKey, std::shared_future<CorePtr>>> building_;
  int64_t core_hits_ = 0, core_misses_ = 0;
};

}  // namespace evsim

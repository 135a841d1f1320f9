#pragma once
// The pruned search's test cases shared by its test files (tests/modeler/pruned_search_test.cpp,
// closed_form_bound_test.cpp): the bundled searches, a cost model without
// some events, and the comparison of two candidates' rows (header-only; for tests that link the
// modeler).

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "modeler/cost_source.h"
#include "modeler/search.h"
#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim::test_support {

// `all`'s costs without the events `missing` picks (no cost for them: as a profile that lacks
// them), as a cost model of its own.
inline CostModel costsWithout(const ClusterConfig& cluster, const CostModel& all,
                       std::function<bool(const Event&)> missing) {
  class Without : public CostSource {
   public:
    Without(const CostModel& all, std::function<bool(const Event&)> missing)
        : all_(all), missing_(std::move(missing)) {}
    std::optional<EventCost> cost(const Event& e) const override {
      if (missing_(e)) return std::nullopt;
      return all_.cost(e);
    }

   private:
    const CostModel& all_;
    std::function<bool(const Event&)> missing_;
  };
  std::vector<std::unique_ptr<CostSource>> sources;
  sources.push_back(std::make_unique<Without>(all, std::move(missing)));
  return CostModel(cluster, std::move(sources));
}

struct BundledSearch {
  std::string model, cluster;
  SearchOptions options;
  double overlap_slowdown = 0;  // > 0: both of the device's factors set to it

  ModelConfig loadModel() const { return loadModelConfig(test::configPath("models", model)); }
  // The cluster with the overlap slowdown applied.
  ClusterConfig loadSlowedCluster() const {
    ClusterConfig c = loadClusterConfig(test::configPath("clusters", cluster));
    if (overlap_slowdown > 0) {
      c.device.overlap_slowdown.nvlink.value = overlap_slowdown;
      c.device.overlap_slowdown.network.value = overlap_slowdown;
    }
    return c;
  }
};

inline SearchOptions space(int64_t gpus, int64_t global_batch, std::vector<int64_t> micro_batches,
                    std::vector<Schedule> schedules) {
  SearchOptions o = searchOptions(gpus, global_batch, std::move(micro_batches),
                                                std::move(schedules));
  o.top_k = 10;
  return o;
}

// The searches the docs run (docs/SEARCH.md, README.md), and a tiny one over every dimension.
inline std::vector<BundledSearch> bundledSearches() {
  std::vector<BundledSearch> out;
  out.push_back({"bert-exlarge", "a40-4x4",
                 space(16, 16, {1, 2, 4, 8}, {Schedule::kGpipe, Schedule::kDapple})});
  SearchOptions gpt3 = space(1024, 1536, {1, 2}, {Schedule::kDapple, Schedule::kInterleaved});
  gpt3.space.virtual_stages = {2, 3};
  gpt3.space.recomputes = {Recompute::kNone, Recompute::kSelective};
  gpt3.space.sequence_parallel = {false, true};
  out.push_back({"gpt3-175b", "dgx-a100", gpt3});
  SearchOptions tiny =
      space(4, 16, {1, 2, 4},
            {Schedule::kGpipe, Schedule::kDapple, Schedule::kInterleaved, Schedule::kZbv});
  tiny.space.virtual_stages = {2, 3, 4};
  tiny.space.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  tiny.space.sequence_parallel = {false, true};
  tiny.space.zero_stages = {0, 1, 2, 3};
  tiny.space.dp_overlaps = {false, true};
  tiny.space.offloads = {Offload::kNone, Offload::kOptimizer, Offload::kActivations,
                         Offload::kBoth};
  out.push_back({"tiny-gpt", "cpu-local", tiny});
  // The overlap slowdown on (issue 28): DP buckets beside the backward and CP exchanges beside
  // attention slow compute; the closed form's bound ignores it and must stay a lower bound.
  SearchOptions slowed = space(4, 16, {1, 2}, {Schedule::kDapple, Schedule::kInterleaved});
  slowed.space.virtual_stages = {2};
  slowed.space.zero_stages = {0, 1};
  slowed.space.dp_overlaps = {false, true};
  slowed.space.context_parallel = {1, 2};
  out.push_back({"tiny-llama", "cpu-local", slowed, 1.5});
  return out;
}

inline void expectSameCandidate(const CandidateResult& a, const CandidateResult& b,
                         const std::string& at) {
  EXPECT_EQ(a.strategy.name(), b.strategy.name()) << at;
  EXPECT_EQ(a.strategy.micro_batch, b.strategy.micro_batch) << at;
  EXPECT_EQ(a.strategy.schedule, b.strategy.schedule) << at;
  EXPECT_EQ(a.strategy.virtual_stages, b.strategy.virtual_stages) << at;
  EXPECT_EQ(a.strategy.recompute, b.strategy.recompute) << at;
  EXPECT_EQ(a.strategy.sequence_parallel, b.strategy.sequence_parallel) << at;
  EXPECT_EQ(a.strategy.zero_stage, b.strategy.zero_stage) << at;
  EXPECT_EQ(a.strategy.dp_overlap, b.strategy.dp_overlap) << at;
  EXPECT_EQ(a.strategy.offload, b.strategy.offload) << at;
  EXPECT_EQ(a.rank, b.rank) << at;
  EXPECT_EQ(a.iteration_us, b.iteration_us) << at;  // the same simulation, bit for bit
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << at;
  EXPECT_EQ(a.peak_memory_stage, b.peak_memory_stage) << at;
  EXPECT_EQ(a.bubble_fraction, b.bubble_fraction) << at;
}

}  // namespace evsim::test_support

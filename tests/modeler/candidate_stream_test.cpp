// The enumeration shared among workers (modeler/candidate_stream.h): on one worker or several,
// every candidate of forEachCandidate exactly once, with its violation, indices that sort them in
// enumeration order and rise on each worker; an error in one worker stops all and comes back.
#include "modeler/candidate_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim {
namespace {

struct Seen {
  size_t index = 0;
  unsigned worker = 0;
  std::string name;  // the strategy's name and micro-batch, then its violation
};

std::string describe(const Candidate& c) {
  const Strategy& s = c.strategy;
  std::string out = s.name() + " b=" + std::to_string(s.micro_batch) + " sched=" +
                    std::to_string(static_cast<int>(s.schedule)) + " v=" +
                    std::to_string(s.virtual_stages) + " rc=" +
                    std::to_string(static_cast<int>(s.recompute)) +
                    " sp=" + std::to_string(s.sequence_parallel) + " zero=" +
                    std::to_string(s.zero_stage) + " overlap=" + std::to_string(s.dp_overlap) +
                    " offload=" + std::to_string(static_cast<int>(s.offload)) + " split=";
  for (int n : s.stage_layers) out += std::to_string(n) + ",";
  return out + " " +
         (c.violation ? std::to_string(static_cast<int>(c.violation->rule)) + ":" +
                            std::to_string(c.violation->key)
                      : std::string("valid"));
}

std::vector<Seen> share(const ModelConfig& model, const ClusterConfig& cluster,
                        const SearchOptions& options, unsigned workers) {
  std::mutex mutex;
  std::vector<Seen> out;
  shareCandidates(model, cluster, options.base, options.space, workers,
                  [&](unsigned w, size_t index, const Candidate& c) {
                    std::lock_guard<std::mutex> lock(mutex);
                    out.push_back(Seen{index, w, describe(c)});
                  });
  return out;
}

SearchOptions techniqueSpace() {
  SearchOptions o = test_support::searchOptions(1024, 1536, {1, 2, 4},
                                                {Schedule::kDapple, Schedule::kInterleaved});
  o.space.virtual_stages = {2, 3};
  o.space.recomputes = {Recompute::kNone, Recompute::kFull};
  o.space.sequence_parallel = {false, true};
  o.space.zero_stages = {0, 1, 3};
  return o;
}

TEST(CandidateStreamTest, EveryCandidateOnceInEnumerationOrderOnAnyNumberOfWorkers) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  // Independently: every candidate of the enumeration in order, and how many are invalid.
  std::vector<std::string> all;
  int64_t invalid = 0;
  forEachCandidate(model, cluster, options.base, options.space, [&](Candidate&& c) {
    if (c.violation) ++invalid;
    all.push_back(describe(c));
  });
  ASSERT_GT(all.size(), 1000u);
  ASSERT_GT(invalid, 0);
  for (unsigned workers : {1u, 2u, 3u}) {
    std::vector<Seen> seen = share(model, cluster, options, workers);
    // Each worker's candidates come in rising index order.
    std::vector<size_t> last(workers, 0);
    std::vector<bool> any(workers, false);
    for (const Seen& s : seen) {
      ASSERT_LT(s.worker, workers);
      if (any[s.worker]) {
        EXPECT_GT(s.index, last[s.worker]);
      }
      any[s.worker] = true;
      last[s.worker] = s.index;
    }
    std::sort(seen.begin(), seen.end(),
              [](const Seen& a, const Seen& b) { return a.index < b.index; });
    ASSERT_EQ(seen.size(), all.size()) << workers;
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(seen[i].name, all[i]) << workers << " workers, candidate " << i;
      if (i > 0) {
        EXPECT_LT(seen[i - 1].index, seen[i].index);  // each index once
      }
    }
  }
}

TEST(CandidateStreamTest, AWorkersErrorStopsEveryWorkerAndComesBack) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  size_t total = 0;
  forEachCandidate(model, cluster, options.base, options.space, [&](Candidate&&) { ++total; });
  std::atomic<size_t> visited{0};
  EXPECT_THROW(shareCandidates(model, cluster, options.base, options.space, 2,
                               [&](unsigned, size_t, const Candidate&) {
                                 if (++visited == 5) throw std::runtime_error("stop");
                               }),
               std::runtime_error);
  // The other worker stops at its next group: far fewer than all were visited.
  EXPECT_LT(visited.load(), total / 2);
}

}  // namespace
}  // namespace evsim

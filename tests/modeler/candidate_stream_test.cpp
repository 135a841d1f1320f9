// The enumeration as a stream of batches (modeler/candidate_stream.h): on the caller's thread or
// on its own, the same valid candidates in the same batches and order as forEachCandidate, the
// invalid ones counted the same, and an error in the consumer stops the enumeration's thread.
#include "modeler/candidate_stream.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim {
namespace {

struct Streamed {
  std::vector<size_t> batch_sizes;
  std::vector<IndexedStrategy> candidates;
  SearchReport invalid;
};

Streamed stream(const ModelConfig& model, const ClusterConfig& cluster,
                const SearchOptions& options, size_t batch_size, bool background) {
  Streamed out;
  streamCandidates(model, cluster, options.base, options.space, batch_size, background, out.invalid,
                   [&](std::vector<IndexedStrategy>&& batch) {
                     out.batch_sizes.push_back(batch.size());
                     for (IndexedStrategy& c : batch) out.candidates.push_back(std::move(c));
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

TEST(CandidateStreamTest, TheSameBatchesOnTheCallersThreadAndOnItsOwn) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  // Independently: every candidate of the enumeration, its index and whether it is valid.
  std::vector<size_t> valid;
  int64_t invalid = 0;
  size_t index = 0;
  forEachCandidate(model, cluster, options.base, options.space, [&](Candidate&& c) {
    if (c.violation) {
      ++invalid;
    } else {
      valid.push_back(index);
    }
    ++index;
  });
  ASSERT_GT(valid.size(), 100u);
  ASSERT_GT(invalid, 0);
  constexpr size_t kBatch = 64;
  for (bool background : {false, true}) {
    const Streamed s = stream(model, cluster, options, kBatch, background);
    ASSERT_EQ(s.candidates.size(), valid.size()) << background;
    for (size_t i = 0; i < valid.size(); ++i) EXPECT_EQ(s.candidates[i].index, valid[i]);
    // Full batches, then the rest.
    ASSERT_EQ(s.batch_sizes.size(), (valid.size() + kBatch - 1) / kBatch);
    for (size_t b = 0; b + 1 < s.batch_sizes.size(); ++b) EXPECT_EQ(s.batch_sizes[b], kBatch);
    EXPECT_EQ(s.batch_sizes.back(), valid.size() - kBatch * (s.batch_sizes.size() - 1));
    EXPECT_EQ(s.invalid.invalid, invalid);
    int64_t by_rule = 0;
    for (const auto& [rule, count] : s.invalid.invalid_by_rule) by_rule += count;
    EXPECT_EQ(by_rule, invalid);
  }
}

TEST(CandidateStreamTest, AConsumersErrorStopsTheEnumerationAndComesBack) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  int batches = 0;
  SearchReport invalid;
  EXPECT_THROW(streamCandidates(model, cluster, options.base, options.space, 8,
                                /*background=*/true, invalid,
                                [&](std::vector<IndexedStrategy>&&) {
                                  if (++batches == 2) throw std::runtime_error("stop");
                                }),
               std::runtime_error);
  EXPECT_EQ(batches, 2);  // no batch after the error
}

}  // namespace
}  // namespace evsim

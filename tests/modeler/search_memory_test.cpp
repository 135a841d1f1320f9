// Issue 34, "memory flat in the space": the exhaustive search (no --top) streams its enumeration
// in batches and its rows through RankedRows, and both searches count invalid candidates by rule
// (InvalidTally), so the most memory they hold at once does not grow with the number of
// candidates nor with the values their rules meet. Measured with operator new and delete counted in
// this binary (its own executable: the counting replaces the global allocation functions).
#include <gtest/gtest.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/cost_model.h"
#include "modeler/pruned_search.h"
#include "modeler/search.h"
#include "support/search_options.h"
#include "support/test_support.h"
#include "support/tiny_fp16_model.h"

namespace {

std::atomic<size_t> g_live{0}, g_peak{0};

}  // namespace

#if defined(__GLIBC__)
// Every allocation's usable size (glibc's malloc_usable_size), counted in and out; the peak since
// the last reset. The aligned forms (operator new with align_val_t) are not replaced: the few
// aligned objects the search makes (its workers' cache-line-aligned state) go uncounted.
void* operator new(size_t bytes) {
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (!p) throw std::bad_alloc();
  const size_t live = g_live.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  size_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  g_live.fetch_sub(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }
#endif

namespace evsim {
namespace {

using Search = SearchReport (*)(const ModelConfig&, const ClusterConfig&, const CostModel&,
                                const SearchOptions&);

// The peak of live allocations (bytes) while one search runs, above what was live before it.
size_t searchPeakBytes(const SearchOptions& o, Search search = runSearch) {
  const ModelConfig model =
      parseModelConfig(test::tinyFp16ModelYaml("tiny-search", 4), "tiny-search.yaml");
  const ClusterConfig cluster = test::cluster(2);
  const CostModel analytic{cluster, nullptr, /*analytic_fallback=*/true};
  const size_t before = g_live.load();
  g_peak.store(before);
  const SearchReport report = search(model, cluster, analytic, o);
  EXPECT_GT(report.ok, 0);
  return g_peak.load() - before;
}

// 4 GPUs, B = 4, one schedule, micro-batch sizes 1..`largest`, one thread.
SearchOptions microBatchSpace(int64_t largest) {
  std::vector<int64_t> micro_batches(static_cast<size_t>(largest));
  std::iota(micro_batches.begin(), micro_batches.end(), 1);
  SearchOptions o = test_support::searchOptions(4, 4, micro_batches, {Schedule::kDapple});
  o.threads = 1;
  o.rows_in_memory = 64;
  return o;
}

// 4 GPUs, B = 4, micro-batch sizes 1..1,000: 6 (M, P, D) each, 6,000 candidates a schedule, all
// but a few invalid (b D does not divide B from b = 5 on): cheap to rank, and each still a row.
// The search takes 4,096 candidates a batch and keeps 64 rows in memory: with one schedule (6,000
// candidates, two batches) and with four (24,000, six batches) it holds the same. Holding the
// enumeration, or the rows, instead would hold 18,000 more candidates or rows of >= 312 bytes
// (sizeof CandidateResult, before its rule's text): >= 5.6 MB more. What does grow: RankedRows'
// record of each spilled run, 16 bytes per 64 rows (375 runs: 8 KB, 16 KB with the vector's
// doubling). 256 KiB is ample for that and allocator slack.
TEST(SearchMemory, ThePeakIsFlatInTheSpace) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "counts allocations with glibc's malloc_usable_size";
#endif
  auto space = [](std::vector<Schedule> schedules) {
    std::vector<int64_t> micro_batches(1000);
    std::iota(micro_batches.begin(), micro_batches.end(), 1);
    SearchOptions o = test_support::searchOptions(4, 4, micro_batches, std::move(schedules));
    o.threads = 1;
    o.rows_in_memory = 64;
    return o;
  };
  const size_t small = searchPeakBytes(space({Schedule::kDapple}));
  const size_t large = searchPeakBytes(
      space({Schedule::kGpipe, Schedule::kDapple, Schedule::kZbh1, Schedule::kZbh2}));
  EXPECT_LT(static_cast<double>(large), static_cast<double>(small) + 256.0 * 1024)
      << "peak bytes: " << small << " for 6,000 candidates, " << large << " for 24,000";
  RecordProperty("small_peak_bytes", std::to_string(small));
  RecordProperty("large_peak_bytes", std::to_string(large));
}

// The space grown by micro-batch sizes, whose invalid candidates break one rule with new values
// ("--global-batch 4: not divisible by micro-batch x D = 4000 x 2 = 8000"): the search counts
// them by rule text (modeler/invalid_tally.h), so its peak does not grow with the values. The 6
// (M, P, D) of 4 GPUs have D in {1, 2, 4}: every b >= 5 breaks that rule with 3 new (b, D)
// pairs. Counted by violation, each pair held an entry of >= 32 bytes (its 16-byte violation, a
// count and an index) besides a copy of its first strategy (InvalidTally before session 26).
//
// The pruned search (--top 10), 1..100 against 1..4,000: the valid candidates (b in {1, 2, 4})
// are the same, so only the invalid ones differ: 3 x 3,900 = 11,700 more pairs, >= 374 KB more
// counted by violation. What may grow: the search's options hold the micro-batch list, 3,900 x 8
// bytes = 31 KB more if a part copies it. 64 KiB is ample for that.
TEST(SearchMemory, ThePrunedPeakIsFlatInTheMicroBatches) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "counts allocations with glibc's malloc_usable_size";
#endif
  auto space = [](int64_t largest) {
    SearchOptions o = microBatchSpace(largest);
    o.top_k = 10;
    return o;
  };
  // The process's shared caches (the schedules' orders and activation states, kept across
  // searches) hold what the test before left there until a search evicts it: a first run of the
  // same search gives both measured ones the same start (the first pruned search after the
  // exhaustive ones peaked 50 KB lower than every later one, whatever its space).
  searchPeakBytes(space(100), runPrunedSearch);
  const size_t small = searchPeakBytes(space(100), runPrunedSearch);
  const size_t large = searchPeakBytes(space(4000), runPrunedSearch);
  EXPECT_LT(static_cast<double>(large), static_cast<double>(small) + 64.0 * 1024)
      << "peak bytes: " << small << " for micro-batches 1..100, " << large << " for 1..4,000";
  RecordProperty("small_peak_bytes", std::to_string(small));
  RecordProperty("large_peak_bytes", std::to_string(large));
}

// The exhaustive search, 1..1,000 (6,000 candidates, two batches) against 1..4,000 (24,000, six
// batches: the batches are full in both, unlike 1..100's 600 candidates): 3 x 3,000 = 9,000 more
// (b, D) pairs, >= 288 KB more counted by violation (session 25 measured 1.9 MB more). What may
// grow: the micro-batch list if copied (24 KB more) and RankedRows' record of each spilled run,
// 16 bytes per 64 rows (375 runs against 94: 8 KB against 2 KB with the vector's doubling).
// 64 KiB is ample for those.
TEST(SearchMemory, TheExhaustivePeakIsFlatInTheMicroBatches) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "counts allocations with glibc's malloc_usable_size";
#endif
  searchPeakBytes(microBatchSpace(1000));  // the same start for both (as above)
  const size_t small = searchPeakBytes(microBatchSpace(1000));
  const size_t large = searchPeakBytes(microBatchSpace(4000));
  EXPECT_LT(static_cast<double>(large), static_cast<double>(small) + 64.0 * 1024)
      << "peak bytes: " << small << " for micro-batches 1..1,000, " << large << " for 1..4,000";
  RecordProperty("small_peak_bytes", std::to_string(small));
  RecordProperty("large_peak_bytes", std::to_string(large));
}

}  // namespace
}  // namespace evsim

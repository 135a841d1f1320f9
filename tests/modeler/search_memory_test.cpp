// Issue 34, "memory flat in the space": the exhaustive search (no --top) streams its enumeration
// in batches and its rows through RankedRows, so the most memory it holds at once does not grow
// with the number of candidates. Measured with operator new and delete counted in this binary
// (its own executable: the counting replaces the global allocation functions).
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

// The peak of live allocations (bytes) while one search runs, above what was live before it.
size_t searchPeakBytes(const SearchOptions& o) {
  const ModelConfig model =
      parseModelConfig(test::tinyFp16ModelYaml("tiny-search", 4), "tiny-search.yaml");
  const ClusterConfig cluster = test::cluster(2);
  const CostModel analytic{cluster, nullptr, /*analytic_fallback=*/true};
  const size_t before = g_live.load();
  g_peak.store(before);
  const SearchReport report = runSearch(model, cluster, analytic, o);
  EXPECT_GT(report.ok, 0);
  return g_peak.load() - before;
}

// 4 GPUs, B = 4, micro-batch sizes 1..1,000: 6 (M, P, D) each, 6,000 candidates a schedule, all
// but a few invalid (b D does not divide B from b = 5 on): cheap to rank, and each still a row.
// The search takes 4,096 candidates a batch and keeps 64 rows in memory: with one schedule (6,000
// candidates, two batches) and with four (24,000, six batches) it holds the same. Holding the
// enumeration, or the rows, instead would hold 18,000 more candidates or rows of >= 312 bytes
// (sizeof CandidateResult, before its rule's text): >= 5.6 MB more. What does grow: RankedRows'
// record of each spilled run, 16 bytes per 64 rows (375 runs: 8 KB, 16 KB with the vector's
// doubling). 256 KiB is ample for that and allocator slack.
// The space grows by schedules, not by more micro-batch sizes: InvalidTally keeps one entry per
// distinct violation (its rule and values: "b x D = 4,004 does not divide B"), so new values in a
// rule's key add entries (~200 bytes each) that more candidates with the same values do not.
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
}

}  // namespace
}  // namespace evsim

// The pruned search's pools held in arrays (modeler/pending_pool.h): a worker's pool keeps the
// best keys and hands out its worst, and the merged pool is every pool's candidates in key order,
// the best `capacity` of them kept, with what was left out counted.
#include "modeler/pending_pool.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <utility>
#include <vector>

namespace evsim::pruned {
namespace {

Pending pendingAt(double bound_us, size_t index) {
  Pending p;
  p.bound_us = bound_us;
  p.index = index;
  p.strategy.tp = static_cast<int>(index);  // travels with its key
  return p;
}

TEST(PendingPool, AWorkerPoolHandsOutItsWorstKeyFirst) {
  WorkerPool pool(3);
  // Keys (bound, index): the worst is the largest bound, ties by the later index.
  for (auto [bound, index] : std::vector<std::pair<double, size_t>>{
           {5, 0}, {2, 1}, {9, 2}, {5, 3}, {1, 4}}) {
    pool.push(pendingAt(bound, index));
  }
  ASSERT_EQ(pool.size(), 5u);
  std::vector<size_t> worst_first;
  while (!pool.empty()) {
    worst_first.push_back(pool.worst().index);
    EXPECT_EQ(pool.worst().strategy.tp, static_cast<int>(pool.worst().index));
    pool.popWorst();
  }
  EXPECT_EQ(worst_first, (std::vector<size_t>{2, 3, 0, 1, 4}));
}

TEST(PendingPool, TheMergedPoolIsEveryPoolsBestKeysInOrder) {
  std::vector<WorkerPool> pools(2, WorkerPool(4));
  pools[0].push(pendingAt(3, 10));
  pools[0].push(pendingAt(1, 11));
  pools[0].push(pendingAt(7, 12));
  pools[1].push(pendingAt(2, 20));
  pools[1].push(pendingAt(3, 5));  // ties bound 3 with index 10: the earlier index first
  pools[1].push(pendingAt(8, 21));
  PendingQueue queue;
  // Six candidates, four kept: (7, 12) and (8, 21) left out, the least of them (7, 12).
  const auto [left_out, least] = queue.merge(pools, 4);
  EXPECT_EQ(left_out, 2u);
  EXPECT_EQ(least.bound_us, 7);
  EXPECT_EQ(least.index, 12u);
  EXPECT_TRUE(pools[0].empty());
  EXPECT_TRUE(pools[1].empty());
  ASSERT_EQ(queue.size(), 4u);
  EXPECT_EQ(queue.worst().index, 10u);
  std::vector<size_t> best_first;
  while (!queue.empty()) {
    const Pending p = queue.takeBest();
    EXPECT_EQ(p.strategy.tp, static_cast<int>(p.index));
    best_first.push_back(p.index);
  }
  EXPECT_EQ(best_first, (std::vector<size_t>{11, 20, 5, 10}));
}

TEST(PendingPool, AMergeKeepsWhatTheQueueHeldAndDropsTheWorstFromTheBack) {
  std::vector<WorkerPool> first(1, WorkerPool(8));
  first[0].push(pendingAt(4, 1));
  first[0].push(pendingAt(6, 2));
  first[0].push(pendingAt(5, 3));
  PendingQueue queue;
  EXPECT_EQ(queue.merge(first, 8).first, 0u);
  EXPECT_EQ(queue.takeBest().index, 1u);  // (4, 1) taken; (5, 3), (6, 2) left
  std::vector<WorkerPool> second(1, WorkerPool(8));
  second[0].push(pendingAt(5.5, 4));
  const auto [left_out, least] = queue.merge(second, 8);
  EXPECT_EQ(left_out, 0u);
  EXPECT_EQ(least.index, PoolKey{}.index);  // none left out
  ASSERT_EQ(queue.size(), 3u);
  queue.dropWorst();  // (6, 2)
  EXPECT_EQ(queue.worst().index, 4u);
  EXPECT_EQ(queue.takeBest().index, 3u);
  EXPECT_EQ(queue.takeBest().index, 4u);
  EXPECT_TRUE(queue.empty());
}

// Against a reference built independently: each worker keeps the `capacity` best keys it was
// given (a std::set trimmed from its end), the merge keeps the best `capacity` of what the queue
// still holds and the pools kept. Bounds drawn from a few values, so ties are common.
TEST(PendingPool, RandomPassesMatchATrimmedSetReference) {
  std::mt19937 random(28);
  using Key = std::pair<double, size_t>;
  size_t next_index = 0;
  PendingQueue queue;
  std::set<Key> queue_reference;
  for (int pass = 0; pass < 40; ++pass) {
    const size_t capacity = 1 + random() % 12;
    const size_t workers = 1 + random() % 3;
    std::vector<WorkerPool> pools(workers, WorkerPool(capacity));
    std::set<Key> kept_by_pools;
    for (size_t w = 0; w < workers; ++w) {
      std::set<Key> pool_reference;
      const size_t pushes = random() % 20;
      for (size_t i = 0; i < pushes; ++i) {
        const Key key{static_cast<double>(random() % 6), next_index++};
        pools[w].push(pendingAt(key.first, key.second));
        if (pools[w].size() > capacity) pools[w].popWorst();
        pool_reference.insert(key);
        if (pool_reference.size() > capacity) pool_reference.erase(std::prev(pool_reference.end()));
      }
      kept_by_pools.insert(pool_reference.begin(), pool_reference.end());
    }
    std::set<Key> all = queue_reference;
    all.insert(kept_by_pools.begin(), kept_by_pools.end());
    const size_t expected_kept = std::min(capacity, all.size());
    const Key expected_least =
        expected_kept < all.size() ? *std::next(all.begin(), static_cast<long>(expected_kept))
                                   : Key{PoolKey{}.bound_us, PoolKey{}.index};
    const auto [left_out, least] = queue.merge(pools, capacity);
    EXPECT_EQ(left_out, all.size() - expected_kept) << "pass " << pass;
    EXPECT_EQ(least.bound_us, expected_least.first) << "pass " << pass;
    EXPECT_EQ(least.index, expected_least.second) << "pass " << pass;
    queue_reference = std::set<Key>(all.begin(), std::next(all.begin(),
                                                            static_cast<long>(expected_kept)));
    // Drain a little from both ends, as the rounds do, and check each against the reference.
    for (int take = random() % 3; take > 0 && !queue.empty(); --take) {
      EXPECT_EQ(queue.best().index, queue_reference.begin()->second);
      const Pending best = queue.takeBest();
      EXPECT_EQ(best.strategy.tp, static_cast<int>(best.index));
      queue_reference.erase(queue_reference.begin());
    }
    if (!queue.empty() && random() % 2 == 0) {
      EXPECT_EQ(queue.worst().index, std::prev(queue_reference.end())->second);
      queue.dropWorst();
      queue_reference.erase(std::prev(queue_reference.end()));
    }
    ASSERT_EQ(queue.size(), queue_reference.size()) << "pass " << pass;
  }
}

}  // namespace
}  // namespace evsim::pruned

// The pruned search's pools held in arrays (modeler/pending_pool.h): a worker's pool keeps the
// best keys and hands out its worst, and the merged pool is every pool's candidates in key order,
// the best `capacity` of them kept, with what was left out counted.
#include "modeler/pending_pool.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace evsim::pruned

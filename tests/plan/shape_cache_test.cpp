// What a search frees between its phases (issue 34 item 2): releaseShapeCaches() empties every
// ShapeCache of the process (the schedules' orders and states, the task graphs); values in use stay
// valid, and a value asked for again is computed again, equal to the first.

#include "plan/shape_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "plan/pipeline_schedule.h"
#include "plan/task_graph.h"

namespace evsim {
namespace {

const ShapeKey kKey{1, 4, 1, 8, 0};

TEST(ShapeCache, KeepsAValueUntilReleased) {
  ShapeCache<std::vector<int>> cache(100);
  int computed = 0;
  auto compute = [&] {
    ++computed;
    return std::vector<int>{7, 8, 9};
  };
  auto size = [](const std::vector<int>& v) { return v.size(); };
  std::shared_ptr<const std::vector<int>> first = cache.get(kKey, compute, size);
  EXPECT_EQ(cache.get(kKey, compute, size), first);  // kept: the same value, not computed again
  EXPECT_EQ(computed, 1);
  const std::weak_ptr<const std::vector<int>> was_first = first;
  first.reset();
  releaseShapeCaches();
  EXPECT_TRUE(was_first.expired());  // no longer kept: freed with its last user
  std::shared_ptr<const std::vector<int>> second = cache.get(kKey, compute, size);
  EXPECT_EQ(computed, 2);  // forgotten: computed again
  EXPECT_EQ(*second, (std::vector<int>{7, 8, 9}));
}

// A value its caller still holds is handed out again after a release, not computed a second time
// beside it (issue 34: two threads' simulations of one shape); so is one too large to keep
// (above a quarter of the capacity), while held, and neither once its last user dropped it.
TEST(ShapeCache, HandsOutAValueStillHeldInsteadOfASecondCopy) {
  ShapeCache<std::vector<int>> cache(100);
  int computed = 0;
  auto compute_of = [&](size_t n) {
    return [&computed, n] {
      ++computed;
      return std::vector<int>(n, 5);
    };
  };
  auto size = [](const std::vector<int>& v) { return v.size(); };
  const ShapeKey large{1, 4, 1, 64, 0};
  std::shared_ptr<const std::vector<int>> held = cache.get(kKey, compute_of(3), size);
  std::shared_ptr<const std::vector<int>> big = cache.get(large, compute_of(26), size);  // > 25
  EXPECT_EQ(computed, 2);
  releaseShapeCaches();
  EXPECT_EQ(cache.get(kKey, compute_of(3), size), held);
  EXPECT_EQ(cache.get(large, compute_of(26), size), big);
  EXPECT_EQ(computed, 2);
  big.reset();  // not kept (too large): gone with its user, computed again when asked
  EXPECT_EQ(cache.get(large, compute_of(26), size)->size(), 26u);
  EXPECT_EQ(computed, 3);
}

// Two threads asking for one key at once compute it once and share the value: the first asker
// computes (held inside its computation until the second has asked), the second waits for it.
TEST(ShapeCache, ComputesAKeyAskedForByTwoThreadsOnce) {
  ShapeCache<std::vector<int>> cache(100);
  std::atomic<int> computed{0};
  std::atomic<bool> second_asked{false};
  auto size = [](const std::vector<int>& v) { return v.size(); };
  std::shared_ptr<const std::vector<int>> a, b;
  std::thread first([&] {
    a = cache.get(
        kKey,
        [&] {
          ++computed;
          while (!second_asked) std::this_thread::yield();
          // The second asker is inside get() (or about to be): give it time to find the key
          // being computed rather than computing it itself.
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          return std::vector<int>(30, 1);  // too large to keep: shared only as computed once
        },
        size);
  });
  while (computed == 0) std::this_thread::yield();
  std::thread second([&] {
    second_asked = true;
    b = cache.get(
        kKey,
        [&] {
          ++computed;
          return std::vector<int>(30, 2);
        },
        size);
  });
  first.join();
  second.join();
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->front(), 1);
}

TEST(ShapeCache, ReleaseSkipsCachesThatNoLongerExist) {
  {
    ShapeCache<int> gone(10);
    gone.get(
        kKey, [] { return 1; }, [](int) { return size_t{1}; });
  }
  ShapeCache<int> alive(10);
  int computed = 0;
  auto compute = [&] { return ++computed; };
  auto size = [](int) { return size_t{1}; };
  EXPECT_EQ(*alive.get(kKey, compute, size), 1);
  releaseShapeCaches();  // must not reach the destroyed cache
  EXPECT_EQ(*alive.get(kKey, compute, size), 2);
}

// A search's threads share the caches: one thread's release while others read and hold values
// must leave every held value intact and every value handed out equal to its computation.
TEST(ShapeCache, ReleaseWhileOtherThreadsReadAndHoldValues) {
  ShapeCache<std::vector<int64_t>> cache(64);
  auto compute_for = [](int64_t m) {  // m copies of m: checkable without the cache
    return [m] { return std::vector<int64_t>(static_cast<size_t>(m), m); };
  };
  auto size = [](const std::vector<int64_t>& v) { return v.size(); };
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  auto reader = [&](int64_t first) {
    std::vector<std::shared_ptr<const std::vector<int64_t>>> held;
    for (int round = 0; round < 2000; ++round) {
      const int64_t m = first + round % 8;
      held.push_back(cache.get(ShapeKey{1, 4, 1, m, 0}, compute_for(m), size));
      if (held.size() > 16) held.erase(held.begin());
      for (const auto& v : held) {
        if (v->empty() || v->size() != static_cast<size_t>(v->front()) ||
            v->back() != v->front()) {
          ++wrong;
        }
      }
    }
  };
  std::thread releaser([&] {
    while (!stop) releaseShapeCaches();
  });
  std::thread a(reader, 1), b(reader, 5);
  a.join();
  b.join();
  stop = true;
  releaser.join();
  EXPECT_EQ(wrong, 0);
}

TEST(ShapeCache, ReleaseForgetsTheSchedulesOrdersAndGraphs) {
  const PipelineShape shape{4, 1, 8, 0};
  std::shared_ptr<const DeviceOrders> orders = scheduleOrders(Schedule::kDapple, shape);
  EXPECT_EQ(scheduleOrders(Schedule::kDapple, shape), orders);
  TaskGraph graph = buildTaskGraph(Schedule::kDapple, 4, 1, 8);
  EXPECT_EQ(buildTaskGraph(Schedule::kDapple, 4, 1, 8).storage, graph.storage);
  const DeviceOrders first_orders = *orders;
  const std::vector<TaskNode> first_nodes(graph.nodes.begin(), graph.nodes.end());
  const std::weak_ptr<const DeviceOrders> was_orders = orders;
  const std::weak_ptr<const TaskGraph::Storage> was_graph = graph.storage;
  orders.reset();
  graph = TaskGraph{};
  releaseShapeCaches();
  EXPECT_TRUE(was_orders.expired());
  EXPECT_TRUE(was_graph.expired());
  std::shared_ptr<const DeviceOrders> again = scheduleOrders(Schedule::kDapple, shape);
  EXPECT_EQ(*again, first_orders);
  const TaskGraph rebuilt = buildTaskGraph(Schedule::kDapple, 4, 1, 8);
  // 1F1B (DAPPLE), 4 stages, 8 micro-batches: F and B of each micro-batch on each stage.
  ASSERT_EQ(rebuilt.nodes.size(), size_t{2 * 4 * 8});
  ASSERT_EQ(first_nodes.size(), rebuilt.nodes.size());
  for (size_t i = 0; i < first_nodes.size(); ++i) {
    EXPECT_EQ(rebuilt.nodes[i].task, first_nodes[i].task) << i;
    EXPECT_EQ(rebuilt.nodes[i].virtual_stage, first_nodes[i].virtual_stage) << i;
  }
}

// The schedules' orders are kept up to 65,536 tasks (a quarter of the registry's 2^18): larger
// ones are read only while their graph is built, and kept they sat through a simulation beside
// link sharing's flows (issue 34, session 27). Once released, the last user's copy is the last.
TEST(ShapeCache, KeepsTheOrdersOfAShapeUpTo65536TasksOnly) {
  releaseShapeCaches();
  // DAPPLE, P = 8, v = 1: each device runs 2 m tasks (F and B), 16 m in all.
  const PipelineShape kept{8, 1, 4096, 0};    // 65,536 tasks
  const PipelineShape large{8, 1, 4097, 0};   // 65,552 tasks
  std::shared_ptr<const DeviceOrders> small_orders = scheduleOrders(Schedule::kDapple, kept);
  std::shared_ptr<const DeviceOrders> large_orders = scheduleOrders(Schedule::kDapple, large);
  size_t small_tasks = 0, large_tasks = 0;
  for (const auto& order : *small_orders) small_tasks += order.size();
  for (const auto& order : *large_orders) large_tasks += order.size();
  ASSERT_EQ(small_tasks, size_t{65536});
  ASSERT_EQ(large_tasks, size_t{65552});
  const std::weak_ptr<const DeviceOrders> was_small = small_orders, was_large = large_orders;
  small_orders.reset();
  large_orders.reset();
  EXPECT_FALSE(was_small.expired());  // kept by the cache
  EXPECT_TRUE(was_large.expired());   // gone with its last user
  releaseShapeCaches();
  EXPECT_TRUE(was_small.expired());
}

}  // namespace
}  // namespace evsim

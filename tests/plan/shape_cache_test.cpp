// What a search frees between its phases (issue 34 item 2): releaseShapeCaches() empties every
// ShapeCache of the process (the schedules' orders and states, the task graphs); values in use stay
// valid, and a value asked for again is computed again, equal to the first.

#include "plan/shape_cache.h"

#include <gtest/gtest.h>

#include <atomic>
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
  releaseShapeCaches();
  std::shared_ptr<const std::vector<int>> second = cache.get(kKey, compute, size);
  EXPECT_EQ(computed, 2);  // forgotten: computed again
  EXPECT_NE(second, first);
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(*first, (std::vector<int>{7, 8, 9}));  // the caller's value outlived the release
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
  const TaskGraph graph = buildTaskGraph(Schedule::kDapple, 4, 1, 8);
  EXPECT_EQ(buildTaskGraph(Schedule::kDapple, 4, 1, 8).storage, graph.storage);
  releaseShapeCaches();
  std::shared_ptr<const DeviceOrders> again = scheduleOrders(Schedule::kDapple, shape);
  EXPECT_NE(again, orders);
  EXPECT_EQ(*again, *orders);
  const TaskGraph rebuilt = buildTaskGraph(Schedule::kDapple, 4, 1, 8);
  EXPECT_NE(rebuilt.storage, graph.storage);
  // 1F1B (DAPPLE), 4 stages, 8 micro-batches: F and B of each micro-batch on each stage.
  ASSERT_EQ(rebuilt.nodes.size(), size_t{2 * 4 * 8});
  ASSERT_EQ(graph.nodes.size(), rebuilt.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    EXPECT_EQ(rebuilt.nodes[i].task, graph.nodes[i].task) << i;
    EXPECT_EQ(rebuilt.nodes[i].device, graph.nodes[i].device) << i;
  }
}

}  // namespace
}  // namespace evsim

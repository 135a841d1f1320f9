// parallelForWithinBudget (modeler/parallel_within_budget.h): the pruned search's simulations run
// side by side only while their memory estimates fit the budget. Fake items stand in for the
// simulations: each records, under a lock, the weight running beside it; the assertions hold for
// any interleaving the threads take (no timing is measured).
#include "modeler/parallel_within_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace evsim {
namespace {

// What ran: each item's start in order, the most weight running at once, and whether a heavy item
// (weight >= `heavy`) ever ran beside another.
struct Log {
  std::mutex mutex;
  std::vector<size_t> starts;
  std::vector<int> runs;  // per item, how many times it ran
  size_t running_weight = 0, most_weight = 0;
  int running_heavy = 0, running = 0;
  bool heavy_beside_other = false;

  explicit Log(size_t n) : runs(n, 0) {}
  void start(size_t i, size_t weight, bool heavy) {
    std::lock_guard<std::mutex> lock(mutex);
    starts.push_back(i);
    ++runs[i];
    running_weight += weight;
    most_weight = std::max(most_weight, running_weight);
    ++running;
    running_heavy += heavy;
    if (running_heavy > 0 && running > 1) heavy_beside_other = true;
  }
  void end(size_t weight, bool heavy) {
    std::lock_guard<std::mutex> lock(mutex);
    running_weight -= weight;
    --running;
    running_heavy -= heavy;
  }
};

// Two sharing passes of Llama 3.1 405B's size (30 units each) and light work (10 each), budget 40
// on two threads: the two heavy ones never run at once, the weight running never passes 40, and
// every item runs once. The first heavy item waits until a light one has ended beside it: were
// nothing run beside it (a budget that left the second thread idle), it would wait out its 20 s
// and the test fail.
TEST(ParallelWithinBudget, TwoHeavyItemsNeverRunAtOnceAndLightOnesRunBeside) {
  const std::vector<size_t> weights{30, 30, 10, 10, 10, 10, 10, 10};
  Log log(weights.size());
  std::atomic<int> light_done{0};
  std::atomic<bool> waited_out{false};
  // Light items log their start only after item 0 has logged its own: the taker of item 0 can be
  // descheduled between taking and logging it, long enough for the other thread to run (and log)
  // several light ones, which says nothing about the order items were taken in.
  std::atomic<bool> zero_logged{false};
  auto waitFor = [](const std::atomic<bool>& flag) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!flag && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  int heavy_at_once = 0, most_heavy_at_once = 0;
  std::mutex heavy_mutex;
  parallelForWithinBudget(weights, 40, 2, [&](size_t i) {
    const bool heavy = weights[i] == 30;
    if (!heavy) waitFor(zero_logged);
    log.start(i, weights[i], /*heavy=*/false);
    if (i == 0) zero_logged = true;
    if (heavy) {
      std::lock_guard<std::mutex> lock(heavy_mutex);
      most_heavy_at_once = std::max(most_heavy_at_once, ++heavy_at_once);
    }
    if (i == 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (light_done == 0 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      waited_out = light_done == 0;
    }
    if (heavy) {
      std::lock_guard<std::mutex> lock(heavy_mutex);
      --heavy_at_once;
    } else {
      ++light_done;
    }
    log.end(weights[i], /*heavy=*/false);
  });
  EXPECT_FALSE(waited_out);
  EXPECT_EQ(most_heavy_at_once, 1);
  EXPECT_LE(log.most_weight, 40u);
  EXPECT_GE(log.most_weight, 40u);  // a heavy and a light one did run together
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(log.runs[i], 1) << i;
  // The order of preference: the first item (heavy) taken first and, beside it, the first light
  // one (item 1 does not fit beside it).
  ASSERT_GE(log.starts.size(), 2u);
  EXPECT_EQ(log.starts[0], 0u);
  EXPECT_EQ(log.starts[1], 2u);
}

// An item heavier than the whole budget runs, alone: nothing starts beside it, on three threads.
TEST(ParallelWithinBudget, AnItemOverTheBudgetRunsAlone) {
  const std::vector<size_t> weights{1, 100, 1, 1, 1, 1};
  Log log(weights.size());
  parallelForWithinBudget(weights, 10, 3, [&](size_t i) {
    const bool heavy = weights[i] == 100;
    log.start(i, weights[i], heavy);
    std::this_thread::sleep_for(std::chrono::milliseconds(heavy ? 30 : 2));
    log.end(weights[i], heavy);
  });
  EXPECT_FALSE(log.heavy_beside_other);
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(log.runs[i], 1) << i;
}

// The first item left waiting is not passed over by items that would not fit beside it: with
// budget 60, A (30) runs; B (40) must wait for it; the C items (25) fit beside A (55) but not
// beside B (65), so none starts before B, however long A runs. Without that rule the second
// thread would start the Cs while A runs and B would be left to run alone at the end.
TEST(ParallelWithinBudget, TheFirstItemWaitingStartsBeforeItemsThatWouldNotFitBesideIt) {
  const std::vector<size_t> weights{30, 40, 25, 25, 25};
  Log log(weights.size());
  parallelForWithinBudget(weights, 60, 2, [&](size_t i) {
    log.start(i, weights[i], false);
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 50 : 2));
    log.end(weights[i], false);
  });
  ASSERT_EQ(log.starts.size(), weights.size());
  EXPECT_EQ(log.starts[0], 0u);
  EXPECT_EQ(log.starts[1], 1u);
  EXPECT_LE(log.most_weight, 60u);
}

// Weights of zero all run at once; one worker runs every item in order.
TEST(ParallelWithinBudget, OneWorkerRunsTheItemsInOrder) {
  const std::vector<size_t> weights{5, 50, 0, 7};
  std::vector<size_t> order;
  parallelForWithinBudget(weights, 10, 1, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
}

// An item's exception reaches the caller; the items not started by then never start.
TEST(ParallelWithinBudget, AnExceptionStopsTheItemsNotStarted) {
  const std::vector<size_t> weights(6, 1);
  std::atomic<int> ran{0};
  EXPECT_THROW(parallelForWithinBudget(weights, 1, 2,
                                       [&](size_t i) {
                                         ++ran;
                                         if (i == 1) throw std::runtime_error("item 1");
                                       }),
               std::runtime_error);
  // Budget 1: one item at a time, so nothing starts after item 1 throws.
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace evsim

// modeler/shared_memo.h: a key computed once across threads; a failed computation drops only its
// own entry. The threads' order is forced with promises and latches (no sleeps), so every case is
// deterministic.
#include "modeler/shared_memo.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <latch>
#include <stdexcept>
#include <thread>

namespace evsim {
namespace {

TEST(SharedMemo, ComputesAKeyOnceAndKeepsIt) {
  SharedMemo<int, int> memo(8);
  int calls = 0;
  EXPECT_EQ(memo.get(1, [&] { return ++calls * 10; }), 10);
  EXPECT_EQ(memo.get(1, [&] { return ++calls * 10; }), 10);  // kept: not computed again
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(memo.get(2, [&] { return ++calls * 10; }), 20);
  EXPECT_EQ(memo.size(), 2u);
}

TEST(SharedMemo, AThrowingComputationIsNotKept) {
  SharedMemo<int, int> memo(8);
  EXPECT_THROW(memo.get(1, []() -> int { throw std::runtime_error("transient"); }),
               std::runtime_error);
  EXPECT_EQ(memo.size(), 0u);
  EXPECT_EQ(memo.get(1, [] { return 7; }), 7);  // a later look computes it again
}

TEST(SharedMemo, EmptiedAtCapacity) {
  SharedMemo<int, int> memo(2);
  int calls = 0;
  memo.get(1, [&] { return ++calls; });
  memo.get(2, [&] { return ++calls; });
  memo.get(3, [&] { return ++calls; });  // 2 entries: emptied, then 3 kept alone
  EXPECT_EQ(memo.size(), 1u);
  EXPECT_EQ(memo.get(1, [&] { return ++calls; }), 4);  // computed again
}

// A waiter on a key under computation gets that computation's value and does not compute it. The
// waiter must arrive while the computation runs: the computation waits (a latch) until the
// waiter's look-up has compared its key with the entry in the memo (a key type that reports its
// comparisons), so the waiter finds the entry still being computed, never a finished one.
struct ProbedKey {
  int id = 0;
  std::function<void()>* on_compare = nullptr;  // the waiter's key reports its comparisons
  bool operator<(const ProbedKey& o) const {
    for (auto* probe : {on_compare, o.on_compare}) {
      if (probe != nullptr) (*probe)();
    }
    return id < o.id;
  }
};

TEST(SharedMemo, AWaiterTakesTheRunningComputationsValue) {
  SharedMemo<ProbedKey, int> memo(8);
  std::latch waiter_looked(1);
  std::atomic<bool> reported{false};
  std::function<void()> report = [&] {
    if (!reported.exchange(true)) waiter_looked.count_down();
  };
  std::atomic<bool> computation_done{false}, waiter_found_it_running{false};
  std::promise<void> started;
  std::thread first([&] {
    memo.get(ProbedKey{1}, [&] {
      started.set_value();
      waiter_looked.wait();  // the waiter has looked key 1 up: it is in the memo, running
      computation_done = true;
      return 42;
    });
  });
  started.get_future().wait();  // key 1 is in the memo, its computation running
  int waiter_computed = 0;
  std::function<void()> probe = [&] {
    waiter_found_it_running = waiter_found_it_running || !computation_done;
    report();
  };
  std::promise<int> waited;
  std::thread second([&] {
    waited.set_value(memo.get(ProbedKey{1, &probe}, [&] { return ++waiter_computed, -1; }));
  });
  EXPECT_EQ(waited.get_future().get(), 42);
  first.join();
  second.join();
  EXPECT_TRUE(waiter_found_it_running);
  EXPECT_EQ(waiter_computed, 0);
  EXPECT_EQ(memo.size(), 1u);
}

// The case the ticket exists for. Thread A inserts key 1 and computes it; meanwhile the memo is
// emptied at capacity (capacity 1: inserting key 2 clears it) and B inserts key 1 again and
// computes 7. Then A's computation throws. A must not erase B's entry: a third look at key 1 takes
// B's 7 without computing. (Erasing by key, as the layer-time memo did, drops B's entry and the
// third look computes 99.)
TEST(SharedMemo, AFailedComputationErasesOnlyItsOwnEntry) {
  SharedMemo<int, int> memo(1);
  std::promise<void> started, go;
  std::promise<bool> a_threw;
  std::thread a([&] {
    try {
      memo.get(1, [&]() -> int {
        started.set_value();
        go.get_future().wait();
        throw std::runtime_error("A fails after the memo was emptied");
      });
      a_threw.set_value(false);
    } catch (const std::runtime_error&) {
      a_threw.set_value(true);
    }
  });
  started.get_future().wait();
  EXPECT_EQ(memo.get(2, [] { return 2; }), 2);  // at capacity: A's entry cleared, 2 inserted
  EXPECT_EQ(memo.get(1, [] { return 7; }), 7);  // at capacity: 2 cleared, B's 1 inserted
  go.set_value();
  EXPECT_TRUE(a_threw.get_future().get());
  a.join();
  int calls = 0;
  EXPECT_EQ(memo.get(1, [&] { return ++calls, 99; }), 7);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(memo.size(), 1u);
}

}  // namespace
}  // namespace evsim

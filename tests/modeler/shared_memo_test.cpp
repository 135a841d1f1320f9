// modeler/shared_memo.h: a key computed once across threads; a failed computation drops only its
// own entry. The threads' order is forced with promises (no sleeps), so every case is
// deterministic.
#include "modeler/shared_memo.h"

#include <gtest/gtest.h>

#include <future>
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

// A waiter on a key under computation gets that computation's value and does not compute it.
TEST(SharedMemo, AWaiterTakesTheRunningComputationsValue) {
  SharedMemo<int, int> memo(8);
  std::promise<void> started, go;
  std::thread first([&] {
    memo.get(1, [&] {
      started.set_value();
      go.get_future().wait();
      return 42;
    });
  });
  started.get_future().wait();  // key 1 is in the memo, its computation running
  std::promise<int> waited;
  std::thread second([&] { waited.set_value(memo.get(1, [] { return -1; })); });
  go.set_value();
  EXPECT_EQ(waited.get_future().get(), 42);
  first.join();
  second.join();
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

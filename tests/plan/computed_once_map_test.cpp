// ComputedOnceMap (plan/computed_once_map.h), the lock-free look-up behind PlanCache: under many
// threads each key is computed exactly once and every asker gets the one stored value at one
// address, which stays put while other keys are added (lists of colliding keys included); a
// throwing computation is not kept; clear() forgets everything; scalar keys work like tuples; a
// bucket count outside 1..24 bits is an error.

#include "plan/computed_once_map.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace evsim {
namespace {

using Key = std::tuple<int, int>;

// A value no other key has: tells a wrong key's value from the right one.
int64_t valueOf(const Key& key) { return 1000 * std::get<0>(key) + std::get<1>(key); }

// `threads` threads released at once by a latch, each running body(thread index).
template <typename Body>
void runTogether(int threads, Body body) {
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  }
  for (std::thread& th : pool) th.join();
}

TEST(ComputedOnceMap, ManyThreadsComputeEachKeyOnceAndShareOneValue) {
  // 8 threads each ask all 300 keys, two by two in the same order (threads 2j and 2j + 1 start
  // at key 37 j), so that threads miss the same key at the same moment and meet on keys being
  // computed. Two bucket bits: 300 keys make lists of ~75
  // colliding nodes, which the walks (and the lost publication races) must get right.
  constexpr int kThreads = 8, kKeys = 300;
  ComputedOnceMap<Key, int64_t> map(2);
  std::vector<std::atomic<int>> computed(kKeys);
  std::vector<std::vector<const int64_t*>> seen(kThreads, std::vector<const int64_t*>(kKeys));
  runTogether(kThreads, [&](int t) {
    for (int i = 0; i < kKeys; ++i) {
      const int k = (i + 37 * (t / 2)) % kKeys;
      const Key key{k % 7, k};
      seen[t][k] = &map.get(key, [&] {
        ++computed[k];
        if (k % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        return valueOf(key);
      });
    }
  });
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(computed[k].load(), 1) << "key " << k;
    EXPECT_EQ(*seen[0][k], valueOf({k % 7, k})) << "key " << k;
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t][k], seen[0][k]) << "key " << k;
  }
  // 5,000 more keys later, the first ones are where they were, with their values, and asked
  // again they are found without computing.
  for (int k = kKeys; k < kKeys + 5000; ++k) {
    map.get({k % 7, k}, [&] { return valueOf({k % 7, k}); });
  }
  for (int k = 0; k < kKeys; ++k) {
    const int64_t& again = map.get({k % 7, k}, []() -> int64_t { throw std::logic_error("cached"); });
    EXPECT_EQ(&again, seen[0][k]);
    EXPECT_EQ(again, valueOf({k % 7, k}));
  }
}

TEST(ComputedOnceMap, ThreadsMissingAKeyTogetherComputeItOnce) {
  // The race between threads that all missed a key and all try to publish it: a miss copies the
  // key into its node before publishing, and a key of 20,000 doubles makes that copy long enough
  // (microseconds) for the others to miss it too. 20 fresh maps, each asked by 4 threads
  // released at once for the same 8 keys in the same order (one bucket): 8 computations per map,
  // never more, and every thread gets the published node's value.
  using BigKey = std::tuple<std::vector<double>, int>;
  constexpr int kThreads = 4, kKeys = 8, kRounds = 20;
  const std::vector<double> payload(20000, 0.25);
  for (int round = 0; round < kRounds; ++round) {
    ComputedOnceMap<BigKey, int64_t> map(1);
    std::atomic<int> computed{0};
    std::vector<std::vector<const int64_t*>> seen(kThreads, std::vector<const int64_t*>(kKeys));
    runTogether(kThreads, [&](int t) {
      for (int k = 0; k < kKeys; ++k) {
        seen[t][k] = &map.get({payload, k}, [&] { ++computed; return valueOf({round, k}); });
      }
    });
    ASSERT_EQ(computed.load(), kKeys) << "round " << round;
    for (int k = 0; k < kKeys; ++k) {
      EXPECT_EQ(*seen[0][k], valueOf({round, k}));
      for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t][k], seen[0][k]);
    }
  }
}

TEST(ComputedOnceMap, AThrowingComputationIsNotKept) {
  // 8 threads ask one key; its first computation throws once every thread is in get() (or has
  // left it). A thread that waited for that computation rethrows its exception; one arriving
  // after the failure finds no value and publishes a computation of its own (only one such
  // publication wins: the others wait for it). So of 8 askers, each either threw or got 42, and
  // after a last ask there were exactly 2 computations: the failed one and one that is kept.
  constexpr int kThreads = 8;
  for (int round = 0; round < 20; ++round) {
    ComputedOnceMap<Key, int64_t> map(4);
    std::atomic<int> computations{0}, threw{0}, got{0}, asking{0};
    runTogether(kThreads, [&](int) {
      ++asking;
      try {
        const int64_t v = map.get({1, 2}, [&]() -> int64_t {
          if (computations++ == 0) {
            while (asking.load() < kThreads) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            throw std::runtime_error("transient");
          }
          return 42;
        });
        EXPECT_EQ(v, 42);
        ++got;
      } catch (const std::runtime_error&) {
        ++threw;
      }
    });
    EXPECT_EQ(threw.load() + got.load(), kThreads);
    EXPECT_GE(threw.load(), 1);  // the first computer at least
    EXPECT_LE(computations.load(), 2);
    EXPECT_EQ(map.get({1, 2}, [&] { ++computations; return int64_t{42}; }), 42);
    EXPECT_EQ(computations.load(), 2);
  }
}

TEST(ComputedOnceMap, ClearForgetsEveryKey) {
  ComputedOnceMap<std::tuple<std::vector<double>, int>, int> map(3);
  int computed = 0;
  auto ask = [&](double first, int n) {
    return map.get({{first, 0.5}, n}, [&] { return ++computed; });
  };
  EXPECT_EQ(ask(1.0, 2), 1);
  EXPECT_EQ(ask(1.5, 2), 2);
  EXPECT_EQ(ask(1.0, 2), 1);
  EXPECT_EQ(ask(-0.0, 2), 3);
  EXPECT_EQ(ask(0.0, 2), 3);  // 0.0 == -0.0: the same key (hashed alike)
  map.clear();
  EXPECT_EQ(ask(1.5, 2), 4);
  EXPECT_EQ(ask(1.0, 2), 5);
  EXPECT_EQ(computed, 5);
}

// Integer keys (hashed as the number itself, then mixed): 0..4,095 into 2^4 buckets, asked by 4
// threads at once, twice each, are computed 4,096 times in all, once per key, and each key's value
// is its own (3 k + 1) at one address that stays put while the other keys are added.
TEST(ComputedOnceMap, IntegerKeysAreEachComputedOnceAndStayPut) {
  constexpr int kKeys = 4096, kThreads = 4;
  ComputedOnceMap<int64_t, int64_t> map(4);
  std::atomic<int> computations{0};
  std::vector<std::vector<const int64_t*>> seen(kThreads, std::vector<const int64_t*>(kKeys));
  runTogether(kThreads, [&](int t) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < kKeys; ++i) {
        const int64_t k = (i + t * 1024) % kKeys;  // the threads start at different keys
        const int64_t& v = map.get(k, [&] {
          ++computations;
          return 3 * k + 1;
        });
        ASSERT_EQ(v, 3 * k + 1) << "key " << k;
        if (pass == 0) seen[t][k] = &v;
        ASSERT_EQ(seen[t][k], &v) << "key " << k;
      }
    }
  });
  EXPECT_EQ(computations.load(), kKeys);
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t], seen[0]) << "thread " << t;
}

TEST(ComputedOnceMap, ABucketCountOutsideOneTo24BitsIsAnError) {
  using Map = ComputedOnceMap<int, int>;
  EXPECT_THROW(Map(0), Error);
  EXPECT_THROW(Map(25), Error);
  EXPECT_THROW(Map(-1), Error);
  Map one(1), most(24);
  EXPECT_EQ(one.get(7, [] { return 8; }), 8);
}

}  // namespace
}  // namespace evsim

#include "common/kept_objects.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace evsim {
namespace {

TEST(KeptObjects, TakesBackTheLastPutUpToItsCapacity) {
  KeptObjects<int> kept(2);
  EXPECT_EQ(kept.take(), nullptr);  // none kept yet
  auto a = std::make_unique<int>(1), b = std::make_unique<int>(2), c = std::make_unique<int>(3);
  int* const b_at = b.get();
  kept.put(std::move(a));
  kept.put(std::move(b));
  kept.put(std::move(c));  // a third over a capacity of two: freed
  EXPECT_EQ(kept.size(), 2u);
  std::unique_ptr<int> first = kept.take();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), b_at);  // the same object back, last put first
  EXPECT_EQ(*first, 2);
  EXPECT_EQ(*kept.take(), 1);
  EXPECT_EQ(kept.take(), nullptr);
}

TEST(KeptObjects, CapacityZeroKeepsNoneAndClearFreesAll) {
  KeptObjects<int> none(0);
  none.put(std::make_unique<int>(7));
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.take(), nullptr);
  KeptObjects<int> many;
  for (int i = 0; i < 5; ++i) many.put(std::make_unique<int>(i));
  EXPECT_EQ(many.size(), 5u);
  many.clear();
  EXPECT_EQ(many.size(), 0u);
  EXPECT_EQ(many.take(), nullptr);
}

// 4 threads each take-or-make and put back 1,000 times: every object ever made is kept at the
// end (at most 4 exist at once, so at most 4 were made), none lost or duplicated.
TEST(KeptObjects, ThreadsTakeAndPutWithoutLosingOne) {
  KeptObjects<int> kept;
  std::vector<std::thread> threads;
  std::vector<int> made(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        std::unique_ptr<int> object = kept.take();
        if (!object) {
          object = std::make_unique<int>(0);
          ++made[t];
        }
        ++*object;
        kept.put(std::move(object));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const int total_made = made[0] + made[1] + made[2] + made[3];
  EXPECT_GE(total_made, 1);
  EXPECT_LE(total_made, 4);
  EXPECT_EQ(kept.size(), static_cast<size_t>(total_made));
  int uses = 0;
  while (std::unique_ptr<int> object = kept.take()) uses += *object;
  EXPECT_EQ(uses, 4 * 1000);  // every take-or-make was one use of one kept object
}

}  // namespace
}  // namespace evsim

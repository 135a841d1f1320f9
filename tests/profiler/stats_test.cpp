// Statistics and the combination of per-rank samples, with numbers worked out by hand.
#include "profiler/stats.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace evsim {
namespace {

TEST(Stats, OddCountMedianAndSampleStddev) {
  // sorted 1 2 3 4 10: median 3; mean 4; squared deviations 9+4+1+0+36 = 50; 50/(5-1) = 12.5.
  TimingStats s = computeStats({4, 1, 3, 2, 10});
  EXPECT_DOUBLE_EQ(s.median_us, 3);
  EXPECT_DOUBLE_EQ(s.min_us, 1);
  EXPECT_DOUBLE_EQ(s.max_us, 10);
  EXPECT_NEAR(s.stddev_us, 3.5355339, 1e-6);  // sqrt(12.5)
  EXPECT_EQ(s.count, 5);
}

TEST(Stats, EvenCountMedianIsMeanOfMiddleTwo) {
  // 1 2 3 4: median 2.5; mean 2.5; deviations 2.25+0.25+0.25+2.25 = 5; 5/3 -> sqrt = 1.2910.
  TimingStats s = computeStats({4, 2, 1, 3});
  EXPECT_DOUBLE_EQ(s.median_us, 2.5);
  EXPECT_NEAR(s.stddev_us, 1.2909944, 1e-6);
}

TEST(Stats, SingleSampleHasZeroStddev) {
  TimingStats s = computeStats({7.5});
  EXPECT_DOUBLE_EQ(s.median_us, 7.5);
  EXPECT_DOUBLE_EQ(s.stddev_us, 0);
  EXPECT_EQ(s.count, 1);
}

TEST(Stats, RejectsEmptyAndNegative) {
  EXPECT_THROW(computeStats({}), Error);
  EXPECT_THROW(computeStats({1, -2}), Error);
}

TEST(CombineP2P, KeepsTheShorterSideOfEachRepetition) {
  // The later caller's time is the transfer alone; the earlier one also waited for it.
  std::vector<double> send = {10, 20, 30};
  std::vector<double> recv = {12, 5, 40};
  EXPECT_EQ(combineP2P(send, recv), (std::vector<double>{10, 5, 30}));
  TimingStats s = computeStats(combineP2P(send, recv));
  EXPECT_DOUBLE_EQ(s.median_us, 10);
  EXPECT_DOUBLE_EQ(s.min_us, 5);
  EXPECT_DOUBLE_EQ(s.max_us, 30);
}

TEST(CombineP2P, RejectsMismatchedRepetitions) { EXPECT_THROW(combineP2P({1, 2}, {1}), Error); }

TEST(CombineCollective, SlowestRankPerRepetition) {
  std::vector<std::vector<double>> per_rank = {{1, 10, 4}, {2, 3, 4}, {4, 1, 1}};
  EXPECT_EQ(combineCollective(per_rank), (std::vector<double>{4, 10, 4}));
  EXPECT_THROW(combineCollective({{1, 2}, {1}}), Error);
}

}  // namespace
}  // namespace evsim

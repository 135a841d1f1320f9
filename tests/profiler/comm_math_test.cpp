// nccl-tests bandwidth factors and ring scaling, by hand.
#include "profiler/comm_math.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "events/collective.h"

namespace evsim {
namespace {

TEST(RingScale, FourToSixteen) {
  // ((16-1)/16) / ((4-1)/4) = 0.9375 / 0.75 = 1.25
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kAllReduce, 4, 16), 1.25);
  // The same factor for reduce-scatter and all-gather (all-reduce's 2 cancels).
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kReduceScatter, 4, 16), 1.25);
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kAllGather, 4, 16), 1.25);
}

TEST(RingScale, OtherSizes) {
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kAllReduce, 2, 8), 1.75);    // (7/8)/(1/2)
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kAllReduce, 8, 64), 1.125);  // (63/64)/(7/8)
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kAllReduce, 8, 8), 1.0);
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kP2P, 2, 2), 1.0);
}

TEST(RingScale, RejectsScalingDown) {
  EXPECT_THROW(ringScaleFactor(EventKind::kAllReduce, 8, 4), Error);
  EXPECT_THROW(ringScaleFactor(EventKind::kAllReduce, 1, 4), Error);
}

TEST(BusBandwidth, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllReduce, 4), 1.5);       // 2 * 3/4
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllReduce, 2), 1.0);       // 2 * 1/2
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kReduceScatter, 4), 0.75);  // 3/4
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllGather, 8), 0.875);     // 7/8
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kP2P, 2), 1.0);
}

TEST(BusBandwidth, AllToAllAndBroadcast) {
  // nccl-tests: alltoall (n-1)/n (each rank keeps its own n-th), broadcast 1 (the whole buffer
  // crosses each link once).
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllToAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kBroadcast, 8), 1.0);
  // Neither follows the ring volume factor: same group only.
  EXPECT_DOUBLE_EQ(ringScaleFactor(EventKind::kAllToAll, 8, 8), 1.0);
  EXPECT_THROW(ringScaleFactor(EventKind::kAllToAll, 4, 16), Error);
  EXPECT_THROW(ringScaleFactor(EventKind::kBroadcast, 4, 16), Error);
}

TEST(CollectiveTable, BuffersPerRank) {
  // 1000 elements over 8 ranks: a shard is 125. All-reduce: whole buffer in and out; reduce-
  // scatter: 1000 in, 125 out; all-gather: 125 in, 1000 out; all-to-all: 125 to each of 8 peers.
  auto shape = [](EventKind kind) { return collectiveOf(kind).buffers(1000, 8); };
  EXPECT_EQ(shape(EventKind::kAllReduce).send_elements, 1000);
  EXPECT_EQ(shape(EventKind::kAllReduce).recv_elements, 1000);
  EXPECT_EQ(shape(EventKind::kReduceScatter).send_elements, 1000);
  EXPECT_EQ(shape(EventKind::kReduceScatter).recv_elements, 125);
  EXPECT_EQ(shape(EventKind::kAllGather).send_elements, 125);
  EXPECT_EQ(shape(EventKind::kAllGather).recv_elements, 1000);
  EXPECT_EQ(shape(EventKind::kAllToAll).send_elements, 1000);
  EXPECT_EQ(shape(EventKind::kAllToAll).recv_elements, 1000);
  // 1003 elements over 8: the remainder of 3 is dropped from sharded buffers (8 x 125 = 1000).
  EXPECT_EQ(collectiveOf(EventKind::kReduceScatter).buffers(1003, 8).send_elements, 1000);
  // Every collective is found by its signature name and its kind.
  for (const Collective* c : allCollectives()) {
    EXPECT_EQ(findCollective(c->name), c);
    EXPECT_EQ(&collectiveOf(c->kind), c);
    EXPECT_EQ(eventKindName(c->kind), c->name);
  }
  EXPECT_EQ(allCollectives().size(), 6u);
}

TEST(BusBandwidth, ReduceScatterPlusAllGatherMoveOneAllReduce) {
  // Sequence parallelism replaces an all-reduce by a reduce-scatter and an all-gather of the same
  // full buffer: (n-1)/n + (n-1)/n = 2(n-1)/n, e.g. 3/4 + 3/4 = 1.5 at n = 4.
  for (int n : {2, 4, 8, 16}) {
    EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kReduceScatter, n) +
                         busBandwidthFactor(EventKind::kAllGather, n),
                     busBandwidthFactor(EventKind::kAllReduce, n))
        << n;
  }
  // Measured on 4, scaled to 16, their times still sum to the all-reduce's scaled time.
  const double rs4 = 30, ag4 = 30, ar4 = 60;
  EXPECT_DOUBLE_EQ(rs4 * ringScaleFactor(EventKind::kReduceScatter, 4, 16) +
                       ag4 * ringScaleFactor(EventKind::kAllGather, 4, 16),
                   ar4 * ringScaleFactor(EventKind::kAllReduce, 4, 16));  // 37.5 + 37.5 = 75
  EXPECT_DOUBLE_EQ(ar4 * ringScaleFactor(EventKind::kAllReduce, 4, 16), 75);
}

TEST(BusBandwidth, AlgorithmBandwidthInGBs) {
  // 1e6 bytes in 100 us = 1e10 B/s = 10 GB/s.
  EXPECT_DOUBLE_EQ(algorithmBandwidthGBs(1'000'000, 100), 10.0);
  EXPECT_THROW(algorithmBandwidthGBs(1, 0), Error);
}

TEST(BusBandwidth, ScalingKeepsBusBandwidth) {
  // Measured at 4 in t us, scaled to 16 -> 1.25 t; busbw must not change with the group size.
  const int64_t bytes = 1 << 20;
  const double t = 200;
  double bus4 = algorithmBandwidthGBs(bytes, t) * busBandwidthFactor(EventKind::kAllReduce, 4);
  double t16 = t * ringScaleFactor(EventKind::kAllReduce, 4, 16);
  double bus16 = algorithmBandwidthGBs(bytes, t16) * busBandwidthFactor(EventKind::kAllReduce, 16);
  EXPECT_NEAR(bus16, bus4, 1e-12);
}

}  // namespace
}  // namespace evsim

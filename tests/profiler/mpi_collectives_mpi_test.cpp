// The CPU device's collectives (mpi/mpi_collectives.h) for real under 4 MPI ranks: the data
// each collective delivers, worked out from what each rank sent, and the CPU device's
// timing every collective kind. Run with 4 ranks (ctest does).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>

#include "kernels/cpu/cpu_host.h"
#include "mpi/mpi_collectives.h"
#include "platform/cpu/cpu_device.h"

namespace evsim {
namespace {

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

float* asFloats(std::vector<char>& bytes) { return reinterpret_cast<float*>(bytes.data()); }

Event fp32Event(EventKind kind, int64_t floats) {
  return makeCommunication(kind, floats * 4, Placement{4, 1, 4}, DType::kFp32);
}

TEST(MpiCollectives, AllToAllSendsEachPeerItsOwnQuarter) {
  // 16 floats over 4 ranks: rank r sends 100 r + p in the 4 floats for peer p; so rank r receives
  // from peer p the values 100 p + r.
  const int me = worldRank();
  Event event = fp32Event(EventKind::kAllToAll, 16);
  MpiCollectiveBuffers b = makeMpiBuffers(event, 4);
  ASSERT_EQ(b.send.size(), 64u);
  ASSERT_EQ(b.recv.size(), 64u);
  for (int p = 0; p < 4; ++p) {
    for (int i = 0; i < 4; ++i) asFloats(b.send)[4 * p + i] = float(100 * me + p);
  }
  runMpiCollective(event, b, MPI_COMM_WORLD);
  for (int p = 0; p < 4; ++p) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(asFloats(b.recv)[4 * p + i], float(100 * p + me));
  }
}

TEST(MpiCollectives, ReductionsAndGathersDeliverTheirShapes) {
  // Buffers start at 1.0 everywhere. All-reduce of 8 floats: 8 sums of 4 ranks = 4. Reduce-scatter
  // of 8: each rank keeps 2 sums = 4. All-gather of 8: rank r sends two values r + 1, everyone
  // receives 1 1 2 2 3 3 4 4. Broadcast from rank 0 of a buffer rank 0 set to 7: 7 everywhere.
  const int me = worldRank();
  Event all_reduce = fp32Event(EventKind::kAllReduce, 8);
  MpiCollectiveBuffers ar = makeMpiBuffers(all_reduce, 4);
  runMpiCollective(all_reduce, ar, MPI_COMM_WORLD);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(asFloats(ar.recv)[i], 4.0f);

  Event scatter = fp32Event(EventKind::kReduceScatter, 8);
  MpiCollectiveBuffers rs = makeMpiBuffers(scatter, 4);
  ASSERT_EQ(rs.recv.size(), 8u);  // 2 floats
  runMpiCollective(scatter, rs, MPI_COMM_WORLD);
  EXPECT_EQ(asFloats(rs.recv)[0], 4.0f);
  EXPECT_EQ(asFloats(rs.recv)[1], 4.0f);

  Event gather = fp32Event(EventKind::kAllGather, 8);
  MpiCollectiveBuffers ag = makeMpiBuffers(gather, 4);
  ASSERT_EQ(ag.send.size(), 8u);
  ASSERT_EQ(ag.recv.size(), 32u);
  asFloats(ag.send)[0] = asFloats(ag.send)[1] = float(me + 1);
  runMpiCollective(gather, ag, MPI_COMM_WORLD);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(asFloats(ag.recv)[i], float(i / 2 + 1)) << i;

  Event broadcast = fp32Event(EventKind::kBroadcast, 8);
  MpiCollectiveBuffers bc = makeMpiBuffers(broadcast, 4);
  if (me == 0) {
    for (int i = 0; i < 8; ++i) asFloats(bc.send)[i] = 7.0f;
  }
  runMpiCollective(broadcast, bc, MPI_COMM_WORLD);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(asFloats(bc.send)[i], 7.0f);
}

TEST(MpiCollectives, CpuDeviceTimesEveryCollective) {
  CpuDevice backend(/*seed=*/1, /*ranks_on_host=*/4, /*host_cores=*/hostCores());
  CommGroup group{MPI_COMM_WORLD, worldRank(), 4, {0, 1, 2, 3}};
  for (EventKind kind : {EventKind::kAllReduce, EventKind::kReduceScatter, EventKind::kAllGather,
                         EventKind::kAllToAll, EventKind::kBroadcast}) {
    std::vector<double> times = backend.timeCollective(fp32Event(kind, 1024), group, 1, 3);
    ASSERT_EQ(times.size(), 3u) << eventKindName(kind);
    for (double t : times) EXPECT_GT(t, 0) << eventKindName(kind);
  }
}

}  // namespace
}  // namespace evsim

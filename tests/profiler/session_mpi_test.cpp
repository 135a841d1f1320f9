// The harness under MPI with a scripted device, so every number in the profile is known:
// compute events spread round-robin, min(send, recv) for p2p, the slowest rank for collectives,
// ring scaling for a group larger than the cluster. Run with 4 ranks (ctest does).
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "mpi/mpi_env.h"
#include "profiler/profile_session.h"

namespace evsim {
namespace {

// Times are scripted per rank and event kind; the harness must combine them as documented.
class ScriptedDevice : public Device {
 public:
  explicit ScriptedDevice(int rank) : rank_(rank) {}
  std::string platform() const override { return "cpu"; }
  std::string deviceName() const override { return "scripted"; }
  std::map<std::string, std::string> versions() const override { return {}; }

  std::vector<double> timeCompute(const Event&, int, int repeats) override {
    // Rank r reports 100 * (r + 1): the profile shows which rank measured each event.
    return std::vector<double>(static_cast<size_t>(repeats), 100.0 * (rank_ + 1));
  }
  std::vector<double> timeP2P(const Event&, const CommGroup& group, int, int) override {
    EXPECT_EQ(group.size, 2);
    return group.rank == 0 ? std::vector<double>{10, 20, 30} : std::vector<double>{12, 5, 40};
  }
  std::vector<double> timeCollective(const Event&, const CommGroup& group, int, int) override {
    // Group rank g: {g + 1, 10 if g == 1 else 1, 4}: slowest per repetition = {size, 10, 4}.
    return {double(group.rank + 1), group.rank == 1 ? 10.0 : 1.0, 4.0};
  }

 private:
  int rank_;
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = queryMpiWorld();
    ASSERT_EQ(world_.size, 4) << "run with mpirun -np 4";
    topo_ = discoverTopology(world_, 2);
    path_ = broadcastString((std::filesystem::temp_directory_path() /
                             ("evsim_session_test_" + std::to_string(::getpid()) + ".yaml"))
                                .string(),
                            0, MPI_COMM_WORLD);
  }
  void TearDown() override {
    if (world_.rank == 0) std::filesystem::remove(path_);
  }
  ProfileSummary run(const std::vector<std::string>& signatures, bool resume = false) {
    std::vector<Event> events;
    for (const std::string& s : signatures) events.push_back(parseEventSignature(s, "test"));
    ScriptedDevice backend(world_.rank);
    ProfileOptions options;
    options.output_path = path_;
    options.warmup = 1;
    options.repeats = 3;
    options.resume = resume;
    options.log = nullptr;
    ProfileSession session(world_, topo_, backend, options);
    return session.run(world_.rank == 0 ? events : std::vector<Event>{});
  }

  MpiWorld world_;
  Topology topo_;
  std::string path_;
};

TEST_F(SessionTest, TopologyFromEmulatedNodes) {
  EXPECT_EQ(topo_.nodes(), 2);
  EXPECT_EQ(topo_.node_of_rank, (std::vector<int>{0, 0, 1, 1}));
}

TEST_F(SessionTest, CombinesAndScalesAsDocumented) {
  const std::vector<std::string> sigs = {"gemm m=8 n=8 k=8 layout=nn dtype=fp32",
                                         "gelu_fwd elems=64 dtype=fp32",
                                         "add elems=64 dtype=fp32",
                                         "softmax_fwd rows=4 cols=4 dtype=fp32",
                                         "adam params=64 dtype=fp32",  // round 2: rank 0 again
                                         "p2p bytes=1000 group=2 nodes=2 rpn=1 dtype=fp32",
                                         "allreduce bytes=4000 group=4 nodes=2 rpn=2 dtype=fp32",
                                         "allreduce bytes=4000 group=16 nodes=2 rpn=8 dtype=fp32"};
  ProfileSummary summary = run(sigs);
  if (world_.rank != 0) return;
  EXPECT_EQ(summary.measured_compute, 5u);
  EXPECT_EQ(summary.measured_communication, 3u);
  EXPECT_EQ(summary.scaled, 1u);
  EXPECT_GT(summary.measuring_device_s, 0);

  ProfileDb db = ProfileDb::load(path_);
  ASSERT_EQ(db.records().size(), sigs.size());
  EXPECT_EQ(db.metadata.world_size, 4);
  EXPECT_EQ(db.metadata.ranks_per_node, 2);
  EXPECT_EQ(db.metadata.devices.size(), 4u);
  // Round-robin: event i measured by rank i % 4.
  for (int i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(db.find(sigs[i])->time.median_us, 100.0 * (i % 4 + 1)) << sigs[i];
  }
  // p2p: min(send, recv) per repetition = {10, 5, 30}.
  const ProfileRecord* p2p = db.find(sigs[5]);
  EXPECT_DOUBLE_EQ(p2p->time.median_us, 10);
  EXPECT_DOUBLE_EQ(p2p->time.min_us, 5);
  EXPECT_DOUBLE_EQ(p2p->time.max_us, 30);
  EXPECT_DOUBLE_EQ(p2p->algbw_gb_s, 0.1);  // 1000 B / 10 us
  EXPECT_DOUBLE_EQ(p2p->busbw_gb_s, 0.1);
  // all-reduce over 4: slowest rank per repetition = {4, 10, 4}: median 4.
  const ProfileRecord* ar4 = db.find(sigs[6]);
  EXPECT_DOUBLE_EQ(ar4->time.median_us, 4);
  EXPECT_DOUBLE_EQ(ar4->time.max_us, 10);
  EXPECT_FALSE(ar4->scaled);
  EXPECT_EQ(ar4->measured_group_size, 4);
  EXPECT_DOUBLE_EQ(ar4->algbw_gb_s, 1.0);  // 4000 B / 4 us
  EXPECT_DOUBLE_EQ(ar4->busbw_gb_s, 1.5);  // x 2 * 3/4
  // all-reduce over 16, measured on the same 4 ranks and scaled by 1.25.
  const ProfileRecord* ar16 = db.find(sigs[7]);
  EXPECT_DOUBLE_EQ(ar16->time.median_us, 5);
  EXPECT_DOUBLE_EQ(ar16->time.max_us, 12.5);
  EXPECT_TRUE(ar16->scaled);
  EXPECT_EQ(ar16->measured_group_size, 4);
  EXPECT_DOUBLE_EQ(ar16->algbw_gb_s, 0.8);
  EXPECT_DOUBLE_EQ(ar16->busbw_gb_s, 1.5);  // 0.8 * 2 * 15/16: bus bandwidth is size-invariant
  // Where each ran (session 15), written by eventprof: the 16-rank event on rule 3's 2 nodes of
  // 2, the others as filed; in the file itself, not derived when it was loaded.
  EXPECT_EQ(ar16->measuredPlacement(), (Placement{4, 2, 2}));
  EXPECT_EQ(ar4->measuredPlacement(), (Placement{4, 2, 2}));
  EXPECT_EQ(p2p->measuredPlacement(), (Placement{2, 2, 1}));
  std::ifstream in(path_);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t entry = text.find("allreduce bytes=4000 group=16 nodes=2 rpn=8");
  ASSERT_NE(entry, std::string::npos);
  EXPECT_NE(text.find("measured_nodes: 2\n    measured_ranks_per_node: 2\n", entry),
            std::string::npos)
      << text;
}

// Sequence parallelism and ZeRO bring reduce-scatter and all-gather: measured on 4 ranks and scaled
// to 16 by the same ring factor, ((16-1)/16) / ((4-1)/4) = 1.25, on the full-buffer bytes.
TEST_F(SessionTest, ScalesReduceScatterAndAllGatherPastTheMeasuredGroup) {
  const std::vector<std::string> sigs = {
      "reduce_scatter bytes=4000 group=4 nodes=2 rpn=2 dtype=fp32",
      "reduce_scatter bytes=4000 group=16 nodes=2 rpn=8 dtype=fp32",
      "allgather bytes=4000 group=4 nodes=2 rpn=2 dtype=fp32",
      "allgather bytes=4000 group=16 nodes=2 rpn=8 dtype=fp32"};
  ProfileSummary summary = run(sigs);
  if (world_.rank != 0) return;
  EXPECT_EQ(summary.measured_communication, 4u);
  EXPECT_EQ(summary.scaled, 2u);
  ProfileDb db = ProfileDb::load(path_);
  for (int k = 0; k < 2; ++k) {
    const ProfileRecord* n4 = db.find(sigs[2 * k]);
    const ProfileRecord* n16 = db.find(sigs[2 * k + 1]);
    ASSERT_TRUE(n4 && n16) << sigs[2 * k];
    // Slowest rank per repetition = {4, 10, 4}: median 4, max 10; scaled: 5 and 12.5.
    EXPECT_DOUBLE_EQ(n4->time.median_us, 4);
    EXPECT_FALSE(n4->scaled);
    EXPECT_DOUBLE_EQ(n16->time.median_us, 5);
    EXPECT_DOUBLE_EQ(n16->time.max_us, 12.5);
    EXPECT_TRUE(n16->scaled);
    EXPECT_EQ(n16->measured_group_size, 4);
    EXPECT_DOUBLE_EQ(n4->algbw_gb_s, 1.0);    // 4000 B / 4 us
    EXPECT_DOUBLE_EQ(n4->busbw_gb_s, 0.75);   // x (4-1)/4
    EXPECT_DOUBLE_EQ(n16->algbw_gb_s, 0.8);   // 4000 B / 5 us
    EXPECT_DOUBLE_EQ(n16->busbw_gb_s, 0.75);  // x 15/16: the bus bandwidth is kept
  }
}

TEST_F(SessionTest, ResumeMeasuresOnlyWhatIsMissing) {
  run({"gemm m=8 n=8 k=8 layout=nn dtype=fp32"});
  ProfileSummary again = run({"gemm m=8 n=8 k=8 layout=nn dtype=fp32", "add elems=64 dtype=fp32"},
                             /*resume=*/true);
  if (world_.rank != 0) return;
  EXPECT_EQ(again.already_measured, 1u);
  EXPECT_EQ(again.measured_compute, 1u);
  EXPECT_EQ(ProfileDb::load(path_).records().size(), 2u);
}

// All-to-all is measured like any collective on a group that fits (the slowest rank per
// repetition: {4, 10, 4}, median 4; busbw = 4000 B / 4 us x 3/4), but never scaled from a smaller
// group: its pairwise traffic does not follow the ring factor.
TEST_F(SessionTest, AllToAllIsMeasuredDirectlyAndNeverScaled) {
  const std::string a2a4 = "alltoall bytes=4000 group=4 nodes=2 rpn=2 dtype=fp32";
  ProfileSummary summary = run({a2a4});
  if (world_.rank == 0) {
    EXPECT_EQ(summary.scaled, 0u);
    const ProfileRecord* r = ProfileDb::load(path_).find(a2a4);
    ASSERT_TRUE(r);
    EXPECT_DOUBLE_EQ(r->time.median_us, 4);
    EXPECT_DOUBLE_EQ(r->busbw_gb_s, 0.75);
  }
  EXPECT_THROW(run({"alltoall bytes=4000 group=16 nodes=2 rpn=8 dtype=fp32"}),
               CollectiveInputError);
}

TEST_F(SessionTest, UnmeasurableEventIsACollectiveInputError) {
  // Intra-node group of 4 with rpn 4 is measurable (scaled); an intra-node p2p on a cluster
  // whose nodes have one rank is not. Emulate that with --ranks-per-node 1.
  topo_ = discoverTopology(world_, 1);
  EXPECT_THROW(run({"p2p bytes=8 group=2 nodes=1 rpn=2 dtype=fp32"}), CollectiveInputError);
}

}  // namespace
}  // namespace evsim

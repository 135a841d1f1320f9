// The bundled ndv4-a100 and p5-h100 clusters against the one- and two-node nccl-tests files they
// were fitted to (tests/data/network, a copy of ../shared/calibration/network; the fit:
// scripts/fit_network.py). What this guards: the fitted terms in configs/clusters stay in step
// with the model that reads them (a change to an algorithm's formula that the fit did not see
// shows here as error).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/cluster_config.h"
#include "events/comm_factors.h"
#include "modeler/nccl_tests_log.h"
#include "modeler/network/nccl_tuner.h"

namespace evsim {
namespace {

struct Row {
  int64_t bytes = 0;
  double time_us = 0;
};

std::vector<Row> logRows(const std::string& file) {
  std::vector<Row> rows;
  NcclTestsOptions options;
  for (const ProfileRecord& r :
       loadNcclTests(std::string(EVSIM_NETWORK_DATA) + "/" + file, options).records) {
    rows.push_back({r.event.message_bytes, r.time.median_us});
  }
  return rows;
}

// The p5 CSVs: size in MiB, out-of-place algbw in GB/s (columns 3 and 6).
std::vector<Row> csvRows(const std::string& file) {
  std::ifstream in(std::string(EVSIM_NETWORK_DATA) + "/" + file);
  std::string line;
  std::getline(in, line);  // header
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    const int64_t bytes = static_cast<int64_t>(std::stod(cells[2]) * (1 << 20));
    rows.push_back({bytes, double(bytes) / (std::stod(cells[5]) * 1e3)});
  }
  return rows;
}

ClusterConfig bundled(const std::string& name) {
  return loadClusterConfig(std::string(EVSIM_CLUSTERS) + "/" + name + ".yaml");
}

// Mean |relative error| of the tuner's time over the rows.
double meanError(const NcclTuner& tuner, EventKind kind, const Placement& p,
                 const std::vector<Row>& rows) {
  double sum = 0;
  for (const Row& r : rows) sum += std::abs(tuner.timeUs(kind, p, r.bytes) / r.time_us - 1);
  return sum / rows.size();
}

TEST(NetworkFit, Ndv4OneAndTwoNodes) {
  ClusterConfig c = bundled("ndv4-a100");
  NcclTuner tuner(c);
  const auto one = logRows("azure_ndv4_a100_1node_allreduce.log");
  const auto two = logRows("azure_ndv4_a100_2nodes_allreduce.log");
  ASSERT_EQ(one.size(), 28u);  // the logs' sizes: 2 B - 256 MiB and 1 KiB - 16 GiB
  ASSERT_EQ(two.size(), 25u);
  // Fitted: 4.0% and 3.9% mean (scripts/fit_network.py --report, session 23; 4.1% and 9.1%
  // before LL's per-channel cost across nodes).
  EXPECT_LT(meanError(tuner, EventKind::kAllReduce, {8, 1, 8}, one), 0.05);
  EXPECT_LT(meanError(tuner, EventKind::kAllReduce, {16, 2, 8}, two), 0.05);
  // The small two-node rows, tree LL on 1 to 16 channels (1 - 128 KiB): each within 12% (11.1% at
  // 16 KiB; before the channel term 1 KiB was +32% and 64 KiB -32%).
  for (const Row& r : two) {
    if (r.bytes > 128 * 1024) break;
    EXPECT_LT(std::abs(tuner.timeUs(EventKind::kAllReduce, {16, 2, 8}, r.bytes) / r.time_us - 1),
              0.12)
        << r.bytes;
  }
}

// Marginal bandwidth between successive rows, bytes/us (B/us = MB/s), at the upper row's size.
std::vector<std::pair<int64_t, double>> marginal(const std::vector<Row>& rows) {
  std::vector<std::pair<int64_t, double>> out;
  for (size_t i = 1; i < rows.size(); ++i) {
    out.push_back({rows[i].bytes, double(rows[i].bytes - rows[i - 1].bytes) /
                                      (rows[i].time_us - rows[i - 1].time_us)});
  }
  return out;
}

// The algorithm switch points on the two-node files are NCCL's. NCCL's tuner (tuning.cc of 2.23 -
// 2.27; ndv4: Ampere row, AMD host, NVLink inside the node, 16 ranks on 2 nodes) worked by hand,
// its graph 8 channels x 25 GB/s (min(NVLink 300, 8 HDR NICs 200)), all-reduce, 2(16-1) = 30
// steps of which 2(2-1) = 2 cross the network, time = lat + bytes / (1000 algbw). (Releases
// before 2.18 also multiplied LL's intra-node latency by 1.8 across nodes; 2.23 - 2.27 do not.)
//   ring LL      6.6 + 28 max(0.6, 2.0 AMD overhead) + 2 x 2.7          = 68.0 us,
//                algbw min(22.5 LL cap, 200 x .5) x 16/30                = 12.0 GB/s
//   ring LL128   14 + 28 max(1.9, 2.0) + 2 x 4.0                        = 78.0 us,
//                min(200 x .92, 8 x 20) x 16/30                          = 85.33 GB/s
//   ring Simple  (8.4 + 28 max(3.4, 3 x 2.0) + 2 x 14) x 1.4 plateau    = 286.2 us, 200 x 16/30
//                                                                        = 106.67 GB/s
//   tree LL      6.8 + 2 (7 x 0.6 + 1 x 5.0)                            = 25.2 us,
//                min(min(200 x .92, 8 x 23.6) / 3.8, 22.5) x .5         = 11.25 GB/s x corr
//   tree LL128   14 + 2 (7 x 1.25 + 8.5) = 48.5 us, min(184 x 120/128, 8 x 20) x .5 = 80 x corr
//   tree Simple  8.4 + 2 (7 x 4 + 14) = 92.4 us, 184 x .5 = 92 GB/s x corr
// (corr: NCCL's tree correction by log2(bytes/64)). So:
//   128 KiB: tree LL 25.2 + 131072/5625 = 48.5 < tree LL128 48.5 + 131072/48000 = 51.2
//   256 KiB: tree LL128 48.5 + 262144/48000 = 54.0 < tree LL 25.2 + 262144/4500 = 83.5
//   8 MiB:   tree LL128 48.5 + 8388608/72000 = 165.0 < ring LL128 78 + 8388608/85333 = 176.3
//   16 MiB:  ring LL128 274.6 < tree LL128 48.5 + 16777216/72000 = 281.5
//   64 MiB:  ring LL128 864.4 < ring Simple 286.2 + 67108864/106667 = 915.3
//   128 MiB: ring Simple 1544.5 < ring LL128 1650.9 (tree Simple 1713.4, tree LL128 1726.2)
// The measured curve: its marginal bandwidth jumps 28x into the 128 KiB row: the 64 and 128 KiB
// rows take 73.1 and 74.3 us. That is where NCCL's LL runs out of channels to add, not a protocol
// switch: NCCL runs a collective on one channel per 512 threads x 8 B of threshold (4 KiB) up to
// the communicator's 16 (twice the graph's 8; enqueue.cc topoGetAlgoInfo, connect.cc), so from 4
// to 64 KiB each row adds channels (38.2 -> 73.1 us, ~2.3 us a channel: LL's network buffers sit
// in host memory and one proxy thread readies them channel after channel) and from 64 to 128 KiB
// the channels stay 16 and the bytes spread over them (+1.2 us). So the run's LL -> LL128 switch
// is not visible in the file and NCCL 2.23's 256 KiB is not contradicted (session 13 read the
// jump as an early switch; the per-channel term, net.ll_channel_us, now costs it). Where
// bandwidth rules (>= 1 MiB) the marginal falls most into the 16 MiB row (the ring's 30 steps of
// latency taking over from the tree's 4), as NCCL's model has it. The Simple switch (128 MiB) is
// within the measured noise (marginal 62-79 GB/s from 16 MiB on), so it is not checked there.
TEST(NetworkFit, Ndv4SwitchPointsAreNcclsAndTheMeasuredKnees) {
  ClusterConfig c = bundled("ndv4-a100");
  NcclTuner tuner(c);
  const auto two = logRows("azure_ndv4_a100_2nodes_allreduce.log");
  constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;
  for (const Row& r : two) {
    const CollectiveChoice choice = tuner.choose(EventKind::kAllReduce, {16, 2, 8}, r.bytes);
    const std::string got = choice.algorithm + "/" + ncclProtocolName(choice.protocol);
    const char* want = r.bytes < 256 * kKiB   ? "tree/LL"
                       : r.bytes < 16 * kMiB  ? "tree/LL128"
                       : r.bytes < 128 * kMiB ? "ring/LL128"
                                              : "ring/Simple";
    EXPECT_EQ(got, want) << r.bytes;
  }
  const auto m = marginal(two);
  int64_t up_at = 0, down_at = 0;
  double up = 0, down = 1e9;
  for (size_t i = 1; i < m.size(); ++i) {
    const double ratio = m[i].second / m[i - 1].second;
    if (ratio > up) up = ratio, up_at = m[i].first;
    if (m[i - 1].first >= kMiB && ratio < down) down = ratio, down_at = m[i].first;
  }
  EXPECT_EQ(up_at, 128 * kKiB);   // LL's channels capped at 16 from 64 KiB (above)
  EXPECT_EQ(down_at, 16 * kMiB);  // tree LL128 -> ring LL128
  // Forcing NCCL_ALGO=ring keeps the ring and lets NCCL's model pick its protocol: LL at 1 KiB.
  NcclTuner ring(c, "ring");
  const CollectiveChoice forced = ring.choose(EventKind::kAllReduce, {16, 2, 8}, 1024);
  EXPECT_EQ(forced.algorithm, "ring");
  EXPECT_EQ(forced.protocol, NcclProtocol::kLL);
}

// p5 (Hopper row, AMD host, Simple only: the EFA plugin), 16 ranks on 2 nodes, graph 16 channels x
// 25 GB/s (min(NVLink 450, 32 EFA 400)), all-reduce by hand:
//   NVLS-tree  25 (NVLink) + 2 x log2(2) x 14 = 53 us, min(400, 400) x 5/6 = 333.3 GB/s
//   tree       92.4 us, min(400 x .92, 16 x 41.4) x .5 = 184 GB/s x corr (<= 1)
//   ring       286.2 us, 400 x 16/30 = 213.3 GB/s
// NVLS-tree has the least latency and the most bandwidth: NCCL runs it at every size (so the
// measured rows, 32 MiB - 8 GiB, have no switch to show). All-gather: the ring is NCCL's only
// algorithm across nodes with 8 ranks per node (PAT needs one; NVLS needs a CollNet plugin).
TEST(NetworkFit, P5SwitchPointsAreNccls) {
  ClusterConfig c = bundled("p5-h100");
  NcclTuner tuner(c);
  for (const Row& r : csvRows("aws_p5_h100_2nodes_all_reduce.csv")) {
    const CollectiveChoice choice = tuner.choose(EventKind::kAllReduce, {16, 2, 8}, r.bytes);
    EXPECT_EQ(choice.algorithm, "nvls_tree") << r.bytes;
  }
  EXPECT_EQ(tuner.choose(EventKind::kAllReduce, {16, 2, 8}, 1024).algorithm, "nvls_tree");
  for (const Row& r : csvRows("aws_p5_h100_2nodes_all_gather.csv")) {
    EXPECT_EQ(tuner.choose(EventKind::kAllGather, {16, 2, 8}, r.bytes).algorithm, "ring");
  }
}

TEST(NetworkFit, P5TwoNodes) {
  ClusterConfig c = bundled("p5-h100");
  NcclTuner tuner(c);
  const Placement p{16, 2, 8};
  // Fitted: 3.6% mean over the three files.
  EXPECT_LT(
      meanError(tuner, EventKind::kAllReduce, p, csvRows("aws_p5_h100_2nodes_all_reduce.csv")),
      0.05);
  EXPECT_LT(
      meanError(tuner, EventKind::kAllGather, p, csvRows("aws_p5_h100_2nodes_all_gather.csv")),
      0.10);
  EXPECT_LT(meanError(tuner, EventKind::kAllToAll, p, csvRows("aws_p5_h100_2nodes_alltoall.csv")),
            0.05);
}

}  // namespace
}  // namespace evsim

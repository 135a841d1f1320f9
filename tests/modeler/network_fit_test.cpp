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
  // Fitted: 7% mean over both files (scripts/fit_network.py --report).
  EXPECT_LT(meanError(tuner, EventKind::kAllReduce, {8, 1, 8}, one), 0.10);
  EXPECT_LT(meanError(tuner, EventKind::kAllReduce, {16, 2, 8}, two), 0.12);
  // Protocols as NCCL switches them: LL for latency-bound sizes, Simple for the largest.
  EXPECT_EQ(tuner.choose(EventKind::kAllReduce, {16, 2, 8}, 1024).protocol, NcclProtocol::kLL);
  EXPECT_EQ(tuner.choose(EventKind::kAllReduce, {16, 2, 8}, int64_t{1} << 34).protocol,
            NcclProtocol::kSimple);
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

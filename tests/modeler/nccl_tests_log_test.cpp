// The nccl-tests importer (modeler/nccl_tests_log.h) on hand-written logs in tests/data/nccl_tests,
// and its records feeding the cost model.
#include "modeler/nccl_tests_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"
#include "modeler/cost_model.h"

namespace evsim {
namespace {

const std::string kData = EVSIM_TEST_DATA_DIR "/nccl_tests/";

std::string errorOf(const std::string& text, const NcclTestsOptions& options = {}) {
  try {
    parseNcclTests(text, "log.txt", options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string twoByTwoLog() {
  std::ifstream in(kData + "all_reduce_perf_2x2.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Where the log says what ran, an option that says otherwise is refused: it used to override
// the log, filing an all-reduce's times as an all-to-all's, or 4 ranks on 2 hosts as 8 on 1.
TEST(NcclTestsLog, OptionsContradictingTheLogRefused) {
  const std::string log = twoByTwoLog();  // "Collective test starting: all_reduce_perf" on line 3
  NcclTestsOptions collective, group, nodes, agreeing;
  collective.collective = EventKind::kAllToAll;
  EXPECT_EQ(errorOf(log, collective),
            "log.txt:3: --collective alltoall: the log is all_reduce_perf (allreduce), "
            "another collective");
  group.group = 8;
  EXPECT_EQ(errorOf(log, group),
            "log.txt: --group 8: the log's Rank lines list 4 ranks (leave --group out)");
  nodes.nodes = 1;
  EXPECT_EQ(errorOf(log, nodes),
            "log.txt: --nodes 1: the log's Rank lines name 2 host(s), so at least 2 nodes (leave "
            "--nodes out, or raise it where nodes share one hostname)");
  // Options that agree with the log change nothing: 4 ranks, 2 hosts of 2.
  agreeing.collective = EventKind::kAllReduce;
  agreeing.group = 4;
  agreeing.nodes = 2;
  const NcclTestsImport agreed = parseNcclTests(log, "log.txt", agreeing);
  EXPECT_EQ(agreed.kind, EventKind::kAllReduce);
  EXPECT_EQ(agreed.placement, (Placement{4, 2, 2}));
}

// Nodes started with one hostname (containers): the 2x2 log's 4 ranks all "on node-a" read as one
// node of 4; --nodes 2 says they were 2 nodes of 4 / 2 = 2 (the 2x2 log's own placement); --nodes 3
// leaves 4 ranks in no equal nodes; --nodes 4 is 4 nodes of 1.
TEST(NcclTestsLog, NodesRaiseTheHostCountWhereHostsShareAName) {
  std::string log = twoByTwoLog();
  for (size_t at = log.find("node-b"); at != std::string::npos; at = log.find("node-b", at)) {
    log.replace(at, 6, "node-a");
  }
  EXPECT_EQ(parseNcclTests(log, "log.txt", {}).placement, (Placement{4, 1, 4}));
  NcclTestsOptions two, three, four;
  two.nodes = 2;
  EXPECT_EQ(parseNcclTests(log, "log.txt", two).placement, (Placement{4, 2, 2}));
  three.nodes = 3;
  EXPECT_EQ(errorOf(log, three),
            "log.txt: --nodes 3: does not divide the log's 4 ranks into equal nodes");
  four.nodes = 4;
  EXPECT_EQ(parseNcclTests(log, "log.txt", four).placement, (Placement{4, 4, 1}));
}

// An iteration count beyond an int is refused, not narrowed (4294967298 = 2^32 + 2 became 2).
TEST(NcclTestsLog, IterationsBeyondAnIntRefused) {
  std::ifstream in(kData + "all_reduce_perf_2x2.log");
  std::stringstream text;
  text << in.rdbuf();
  std::string log = text.str();
  const std::string iters = "warmup iters: 5 iters: 20";
  ASSERT_NE(log.find(iters), std::string::npos);
  log.replace(log.find(iters), iters.size(), "warmup iters: 5 iters: 4294967298");
  EXPECT_EQ(errorOf(log), "log.txt:4: iters: 4294967298 is out of range (at most 2147483647)");
}

// A header that ends at "time" with a row that matches it: algbw and busbw were read past the row
// (found by fuzzing, issue 33). Now one line naming the row and the missing columns.
TEST(NcclTestsLog, HeaderEndingAtTimeIsRefused) {
  const std::string log =
      "# Collective test starting: all_reduce_perf\n#  size count type redop root time\n"
      "1024 256 float sum -1 5.0\n";
  EXPECT_EQ(errorOf(log, NcclTestsOptions{.group = 2}),
            "log.txt:3: the column header has no 'algbw' and 'busbw' columns after its first "
            "'time'");
  // In-place times (the second "time") need their own two columns too.
  const std::string in_place =
      "# Collective test starting: all_reduce_perf\n"
      "#  size count type redop root time algbw busbw #wrong time\n"
      "1024 256 float sum -1 5.0 0.2 0.3 0 5.1\n";
  NcclTestsOptions options{.group = 2};
  options.in_place = true;
  EXPECT_EQ(errorOf(in_place, options),
            "log.txt:3: the column header has no 'algbw' and 'busbw' columns after its second "
            "'time'");
}

TEST(NcclTestsLog, AllReduceOverTwoHostsOfTwo) {
  NcclTestsImport in = loadNcclTests(kData + "all_reduce_perf_2x2.log", {});
  EXPECT_EQ(in.kind, EventKind::kAllReduce);
  EXPECT_EQ(in.placement, (Placement{4, 2, 2}));  // 4 ranks, hosts node-a and node-b, 2 each
  EXPECT_EQ(in.dtype, DType::kFp32);
  EXPECT_EQ(in.hosts, (std::vector<std::string>{"node-a", "node-a", "node-b", "node-b"}));
  EXPECT_EQ(in.devices[0], "NVIDIA A100-SXM4-80GB");
  ASSERT_EQ(in.records.size(), 3u);
  const ProfileRecord& r = in.records[1];
  EXPECT_EQ(r.signature, "allreduce bytes=2097152 group=4 nodes=2 rpn=2 dtype=fp32");
  EXPECT_DOUBLE_EQ(r.time.median_us, 160.0);  // out-of-place
  EXPECT_DOUBLE_EQ(r.time.min_us, 160.0);
  EXPECT_EQ(r.time.count, 20);  // "iters: 20", not the warm-up's 5
  // Recomputed: 2097152 B / 160 us = 13.1072 GB/s algbw, x 2 * 3/4 = 19.6608 busbw (printed 19.66).
  EXPECT_DOUBLE_EQ(r.busbw_gb_s, 2097152 / 160.0 / 1e3 * 1.5);
  EXPECT_FALSE(r.scaled);
  EXPECT_EQ(r.measured_group_size, 4);
  EXPECT_EQ(r.measuredPlacement(), (Placement{4, 2, 2}));  // where the log ran (session 15)

  NcclTestsOptions in_place;
  in_place.in_place = true;
  EXPECT_DOUBLE_EQ(
      loadNcclTests(kData + "all_reduce_perf_2x2.log", in_place).records[1].time.median_us, 170.0);
}

TEST(NcclTestsLog, OlderFormatWithNoiseOnStdout) {
  // No Group field, no root column, a numerical error column (1e-07 is round-off, not a failure),
  // an NCCL INFO line before the table; the file name says all_reduce.
  NcclTestsImport in = loadNcclTests(kData + "all_reduce_perf_old.log", {});
  EXPECT_EQ(in.kind, EventKind::kAllReduce);
  EXPECT_EQ(in.placement, (Placement{2, 1, 2}));  // both ranks on host-a
  ASSERT_EQ(in.records.size(), 2u);
  EXPECT_EQ(in.records[0].signature, "allreduce bytes=1048576 group=2 nodes=1 rpn=2 dtype=fp32");
  EXPECT_DOUBLE_EQ(in.records[0].time.median_us, 80.0);
  const std::string header =
      "# Collective test starting: all_reduce_perf\n"
      "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error\n";
  NcclTestsOptions two;
  two.group = 2;
  EXPECT_EQ(errorOf(header + "1048576 262144 float sum 80 1 1 0.5 81 1 1 0\n", two),
            "log.txt:3: 0.5 wrong values at 1048576 bytes: a failed run is not a measurement");
}

TEST(NcclTestsLog, SendRecvAcrossHostsIsP2P) {
  // No "Collective test starting" line: the file name says sendrecv.
  NcclTestsImport in = loadNcclTests(kData + "sendrecv_perf_2nodes.log", {});
  EXPECT_EQ(in.kind, EventKind::kP2P);
  EXPECT_EQ(in.placement, (Placement{2, 2, 1}));
  ASSERT_EQ(in.records.size(), 2u);
  EXPECT_EQ(in.records[0].signature, "p2p bytes=1048576 group=2 nodes=2 rpn=1 dtype=fp16");
  EXPECT_EQ(in.records[0].time.count, 10);
}

TEST(NcclTestsLog, AllToAllWithGroupGiven) {
  // A log without Rank lines: --group 8 (one node). busbw = algbw x 7/8 as printed.
  NcclTestsOptions options;
  options.group = 8;
  NcclTestsImport in = loadNcclTests(kData + "alltoall_perf_8.log", options);
  EXPECT_EQ(in.kind, EventKind::kAllToAll);
  EXPECT_EQ(in.placement, (Placement{8, 1, 8}));
  ASSERT_EQ(in.records.size(), 2u);
  EXPECT_EQ(in.records[1].signature, "alltoall bytes=2097152 group=8 nodes=1 rpn=8 dtype=fp32");
  EXPECT_DOUBLE_EQ(in.records[1].time.median_us, 60.0);
  EXPECT_EQ(in.records[1].time.count, 50);
  EXPECT_NEAR(in.records[1].busbw_gb_s, 2097152 / 60.0 / 1e3 * 0.875, 1e-9);  // printed 30.58
}

TEST(NcclTestsLog, CsvFormNeedsTheGroup) {
  NcclTestsOptions options;
  options.group = 8;
  NcclTestsImport in = loadNcclTests(kData + "allreduce_excerpt.csv", options);
  EXPECT_EQ(in.kind, EventKind::kAllReduce);
  EXPECT_EQ(in.placement, (Placement{8, 1, 8}));
  ASSERT_EQ(in.records.size(), 3u);
  // 92790 ns out-of-place = 92.79 us; algbw = 1048576 B / 92.79 us = 11.30 GB/s.
  EXPECT_DOUBLE_EQ(in.records[0].time.median_us, 92.79);
  EXPECT_NEAR(in.records[0].algbw_gb_s, 1048576 / 92.79 / 1e3, 1e-9);
  // busbw recomputed: 11.3004 x 2 * 7/8 = 19.776 GB/s (the CSV says 19.78).
  EXPECT_NEAR(in.records[0].busbw_gb_s, 1048576 / 92.79 / 1e3 * 1.75, 1e-9);
  EXPECT_THROW(loadNcclTests(kData + "allreduce_excerpt.csv", {}), InputError);
}

TEST(NcclTestsLog, BadInputNamesFileLineAndRule) {
  EXPECT_EQ(errorOf(""), "log.txt: no measurement rows");
  EXPECT_EQ(errorOf("     1048576   262144  float  sum  -1  100.0  10.49  15.73  0\n"),
            "log.txt:1: a data row before the column header ('#  size  count ...')");
  const std::string header =
      "# Collective test starting: all_reduce_perf\n"
      "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n";
  EXPECT_EQ(errorOf(header + "1048576 262144 float sum -1 100.0 10.49 15.73 0\n"),
            "log.txt:3: 9 columns, the header has 13");
  EXPECT_EQ(errorOf(header + "1048576 262144 int8 sum -1 100 1 1 0 100 1 1 0\n"),
            "log.txt:3: element type 'int8' is not one eventsim models (float, half, bfloat16)");
  EXPECT_EQ(errorOf(header + "1048576 262144 float sum -1 fast 1 1 0 100 1 1 0\n"),
            "log.txt:3: time 'fast' is not a number");
  EXPECT_EQ(errorOf(header + "1048576 262144 float sum -1 100 1 1 0 100 1 1 0\n"),
            "log.txt: no '#  Rank ... on HOST' lines to tell the group: give --group N (and "
            "--nodes K)");
  std::string no_name =
      header.substr(header.find('\n') + 1) + "1048576 262144 float sum -1 100 1 1 0 100 1 1 0\n";
  EXPECT_EQ(errorOf(no_name).rfind("log.txt: which collective?", 0), 0u);
  try {
    loadNcclTests(kData + "wrong_values.log", {});
    FAIL() << "accepted wrong values";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              kData +
                  "wrong_values.log:4: 3 wrong values at 2097152 bytes: a failed run is not a "
                  "measurement");
  }
}

TEST(NcclTestsLog, ImportedRecordsAreMeasuredAndInterpolated) {
  ProfileDb db;
  db.metadata.backend = "nccl-tests";
  for (ProfileRecord& r : loadNcclTests(kData + "all_reduce_perf_2x2.log", {}).records) {
    db.put(std::move(r));
  }
  ClusterConfig cluster = parseClusterConfig(R"(
name: two-by-two
node:
  gpus: 2
  device: {name: g, peak_tflops: {fp32: 10}, memory_bandwidth_gb_s: 1000, memory_gib: 16}
  intra_link: {name: l, bandwidth_gb_s: 100, latency_us: 2}
network: {name: n, bandwidth_gb_s: 25, latency_us: 5}
)",
                                             "two-by-two.yaml");
  CostModel costs(cluster, &db, /*analytic_fallback=*/false);
  Placement p{4, 2, 2};
  auto at = [&](int64_t bytes) {
    return costs.cost(makeCommunication(EventKind::kAllReduce, bytes, p, DType::kFp32));
  };
  ASSERT_TRUE(at(1048576));
  EXPECT_DOUBLE_EQ(at(1048576)->time_us, 100.0);
  EXPECT_EQ(at(1048576)->provenance, Provenance::kMeasured);
  // 3 MiB between 2 MiB (160 us) and 4 MiB (300 us), log-log: fraction ln(1.5)/ln(2) = 0.58496,
  // time = 160 * (300/160)^0.58496 = 160 * exp(0.62861 * 0.58496) = 160 * 1.44443 = 231.11 us.
  auto mid = at(3145728);
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->provenance, Provenance::kDerived);
  EXPECT_NEAR(mid->time_us, 160 * std::pow(300.0 / 160, std::log(1.5) / std::log(2.0)), 1e-9);
  EXPECT_NEAR(mid->time_us, 231.11, 0.01);
}

}  // namespace
}  // namespace evsim

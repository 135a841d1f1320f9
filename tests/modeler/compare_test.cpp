// eventsim compare: the timeline CSV reader and the error metrics, on hand-written timelines
// (tests/data/timelines) whose errors are worked out below.
//
// predicted_2stage.csv: 1M2P1D, GPipe, 2 micro-batches, one block per stage, 200 us iteration:
//   rank 0 (stage 0): F0 gemm 0-10, gemm 10-20, send 20-25 | F1 25-45, send 45-50 |
//                     B0 105-145 | B1 145-185 | optimizer 185-200          (8 events)
//   rank 1 (stage 1): F0 25-45 | F1 50-70 | B0 70-100, send 100-105 | B1 105-135, send 135-140 |
//                     optimizer 140-150                                     (7 events)
// Stage tasks (start/finish): s0 F0 0/25, F1 25/50, B0 105/145, B1 145/185;
//                             s1 F0 25/45, F1 50/70, B0 70/105, B1 105/140.
#include "modeler/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "common/error.h"
#include "modeler/timeline_csv.h"

namespace evsim {
namespace {

const std::string kDir = std::string(EVSIM_TEST_DATA_DIR) + "/timelines/";
constexpr double kTol = 1e-9;

PairComparison compareFiles(const std::string& predicted, const std::string& measured) {
  NameTable names;
  Timeline p = loadTimelineCsv(kDir + predicted, names);
  Timeline m = loadTimelineCsv(kDir + measured, names);
  return compareTimelines(p, m, names);
}

std::string errorOf(const std::string& predicted, const std::string& measured) {
  try {
    compareFiles(predicted, measured);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

const DeviceActivityError& device(const PairComparison& c, int32_t rank) {
  for (const DeviceActivityError& d : c.devices) {
    if (d.rank == rank) return d;
  }
  throw std::runtime_error("no rank " + std::to_string(rank));
}

const StageTaskError& task(const PairComparison& c, int32_t stage, Phase phase, int32_t mb) {
  for (const StageTaskError& t : c.tasks) {
    if (t.stage == stage && t.phase == phase && t.micro_batch == mb) return t;
  }
  throw std::runtime_error("no task");
}

// predicted_recompute.csv: one rank, F0 0-10, the recomputed forward 10-20 (phase recompute) inside
// B0, B0's gemm 20-40, optimizer 40-50. measured_recompute.csv: recompute 12-25, B0 25-45,
// optimizer 45-55 (55 us iteration).
TEST(CompareTest, RecomputedOpsBelongToTheBackwardTask) {
  PairComparison c = compareFiles("predicted_recompute.csv", "measured_recompute.csv");
  EXPECT_EQ(c.matched_events, 4);
  EXPECT_NEAR(c.iteration_error_pct, (50.0 - 55.0) / 55.0 * 100, kTol);
  // Rank 0: |d| per event: F0 0, recompute (2 + 5)/2, B0 5, optimizer 5 -> 3.375 us of 55.
  EXPECT_NEAR(device(c, 0).error_pct, 3.375 / 55 * 100, kTol);
  // B0 starts with its recomputation: 10 vs 12 (2 us), finishes 40 vs 45 (5 us).
  const StageTaskError& b0 = task(c, 0, Phase::kBackward, 0);
  EXPECT_NEAR(b0.start_error_pct, 2.0 / 55 * 100, kTol);
  EXPECT_NEAR(b0.finish_error_pct, 5.0 / 55 * 100, kTol);
}

TEST(CompareTest, IdenticalFilesHaveNoError) {
  PairComparison c = compareFiles("predicted_2stage.csv", "predicted_2stage.csv");
  EXPECT_EQ(c.matched_events, 15);
  EXPECT_DOUBLE_EQ(c.predicted_iteration_us, 200);
  EXPECT_DOUBLE_EQ(c.iteration_error_pct, 0);
  EXPECT_DOUBLE_EQ(c.device_error_pct_max, 0);
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(device(c, 0).events, 8);
  EXPECT_EQ(device(c, 1).events, 7);
  ASSERT_EQ(c.tasks.size(), 8u);  // 2 stages x 2 micro-batches x forward/backward
  const StageTaskError& s0b1 = task(c, 0, Phase::kBackward, 1);
  EXPECT_DOUBLE_EQ(s0b1.predicted_start_us, 145);
  EXPECT_DOUBLE_EQ(s0b1.predicted_finish_us, 185);
  const StageTaskError& s1b0 = task(c, 1, Phase::kBackward, 0);
  EXPECT_DOUBLE_EQ(s1b0.predicted_start_us, 70);
  EXPECT_DOUBLE_EQ(s1b0.predicted_finish_us, 105);  // the gradient send belongs to the task
  EXPECT_DOUBLE_EQ(task(c, 0, Phase::kForward, 0).predicted_finish_us, 25);
}

// Every rank-1 event 10 us later; rank 1 still ends (160) before rank 0 (200), so the iteration
// stays 200 us. Rank 1: (10 + 10) / 2 = 10 us on every event = 5% of 200; rank 0: 0. Stage 1's
// four tasks start and finish 10 us later (5%), stage 0's not: max 5%, mean 2.5%.
TEST(CompareTest, ShiftedRankGivesFivePercentActivityError) {
  PairComparison c = compareFiles("predicted_2stage.csv", "measured_rank1_shift10.csv");
  EXPECT_NEAR(c.iteration_error_pct, 0, kTol);
  EXPECT_NEAR(device(c, 0).error_pct, 0, kTol);
  EXPECT_NEAR(device(c, 1).error_pct, 5.0, kTol);
  EXPECT_NEAR(c.device_error_pct_max, 5.0, kTol);
  EXPECT_EQ(c.device_error_max_rank, 1);
  EXPECT_NEAR(c.device_error_pct_mean, 2.5, kTol);
  EXPECT_NEAR(c.start_error_pct.max, 5.0, kTol);
  EXPECT_NEAR(c.start_error_pct.mean, 2.5, kTol);
  EXPECT_NEAR(c.finish_error_pct.max, 5.0, kTol);
  EXPECT_NEAR(c.finish_error_pct.mean, 2.5, kTol);
  EXPECT_NEAR(task(c, 1, Phase::kForward, 1).start_error_pct, 5.0, kTol);
  EXPECT_NEAR(task(c, 0, Phase::kBackward, 1).finish_error_pct, 0, kTol);
}

// Rank 0's optimizer takes 25 us instead of 15: measured iteration 210 us.
// Iteration error (200 - 210) / 210 = -4.7619%. Rank 0: only the optimizer differs, by 10 us at its
// end: (0 + 10) / 2 = 5 us over 8 events = 0.625 us = 0.2976% of 210. No stage task changes.
TEST(CompareTest, LongerMeasuredIterationGivesNegativeIterationError) {
  PairComparison c = compareFiles("predicted_2stage.csv", "measured_longer.csv");
  EXPECT_DOUBLE_EQ(c.measured_iteration_us, 210);
  EXPECT_NEAR(c.iteration_error_pct, -100.0 * 10 / 210, kTol);
  EXPECT_NEAR(device(c, 0).error_pct, 100.0 * 0.625 / 210, kTol);
  EXPECT_NEAR(device(c, 1).error_pct, 0, kTol);
  EXPECT_EQ(c.device_error_max_rank, 0);
  EXPECT_NEAR(c.task_error_pct.max, 0, kTol);
  // And the other way round the sign flips: (210 - 200) / 200 = +5%.
  PairComparison r = compareFiles("measured_longer.csv", "predicted_2stage.csv");
  EXPECT_NEAR(r.iteration_error_pct, 5.0, kTol);
}

// Rank 0's two forward gemms of micro-batch 0 (same key) measure 0-12 and 12-20, written in reverse
// time order. Matched by occurrence in time order: (0 + 2) / 2 + (2 + 0) / 2 = 2 us over 8 events
// = 0.25 us = 0.125% of 200. Matched in file order it would be (12 + 10) / 2 + (10 + 8) / 2 = 20 us
// -> 1.25%.
TEST(CompareTest, RepeatedKeysMatchInTimeOrder) {
  PairComparison c = compareFiles("predicted_2stage.csv", "measured_reordered.csv");
  EXPECT_NEAR(device(c, 0).error_pct, 0.125, kTol);
  EXPECT_NEAR(device(c, 1).error_pct, 0, kTol);
  EXPECT_NEAR(c.task_error_pct.max, 0, kTol);  // stage 0 F0 still spans 0-25
}

TEST(CompareTest, MissingRowsNameTheFileAndTheKey) {
  std::string e = errorOf("predicted_2stage.csv", "measured_missing_send.csv");
  EXPECT_NE(e.find("measured_missing_send.csv: lacks 1 event(s) of"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 pp-comm backward mb 1 layer 1 send_gradient #0"), std::string::npos)
      << e;
  std::string reverse = errorOf("measured_missing_send.csv", "predicted_2stage.csv");
  EXPECT_NE(reverse.find("measured_missing_send.csv: lacks 1 event(s) of"), std::string::npos)
      << reverse;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

Timeline readText(const std::string& text, NameTable& names, const std::string& path = "t.csv") {
  std::istringstream in(text);
  return readTimelineCsv(in, path, names);
}

// The 13-column header of files written before cp and ep (still read: cp = ep = 0); the tests
// below that build rows by hand use it, and the 15-column form has tests of its own.
const std::string kHeader = std::string(kTimelineCsvHeaderWithoutCpEp) + "\n";
const std::string kCpEpHeader = std::string(kTimelineCsvHeader) + "\n";

// Two TP ranks on one stage, one micro-batch. Predicted: both ranks F 0-10, B 10-30 (iteration
// 30). Measured: rank 0 F 0-10, B 12-30; rank 1 F 2-12, B 12-34 (iteration 34).
// Stage F: start min(0, 2) = 0 vs 0 -> 0; finish max(10, 12) = 12 vs 10 -> 2/34 = 5.882%.
// Stage B: start 12 vs 10 -> 5.882%; finish 34 vs 30 -> 11.765%.
// Rank 0: F 0, B (2 + 0) / 2 = 1 -> 0.5 us mean = 1.4706%. Rank 1: F 2, B (2 + 4) / 2 = 3 -> 2.5 us
// = 7.353%. Iteration: (30 - 34) / 34 = -11.765%.
TEST(CompareTest, StageTasksSpanTheStageRanks) {
  NameTable names;
  Timeline p = readText(kHeader +
                            "0,0,0,0,compute,g,0,10,0,forward,gemm,0,estimated\n"
                            "0,0,0,0,compute,g,10,20,0,backward,gemm,0,estimated\n"
                            "1,1,0,0,compute,g,0,10,0,forward,gemm,0,estimated\n"
                            "1,1,0,0,compute,g,10,20,0,backward,gemm,0,estimated\n",
                        names, "p.csv");
  Timeline m = readText(kHeader +
                            "1,1,0,0,compute,g,2,10,0,forward,gemm,0,measured\n"
                            "1,1,0,0,compute,g,12,22,0,backward,gemm,0,measured\n"
                            "0,0,0,0,compute,g,0,10,0,forward,gemm,0,measured\n"
                            "0,0,0,0,compute,g,12,18,0,backward,gemm,0,measured\n",
                        names, "m.csv");
  PairComparison c = compareTimelines(p, m, names);
  EXPECT_NEAR(c.iteration_error_pct, -100.0 * 4 / 34, kTol);
  EXPECT_NEAR(device(c, 0).error_pct, 100.0 * 0.5 / 34, kTol);
  EXPECT_NEAR(device(c, 1).error_pct, 100.0 * 2.5 / 34, kTol);
  EXPECT_NEAR(c.device_error_pct_mean, 100.0 * 1.5 / 34, kTol);
  ASSERT_EQ(c.tasks.size(), 2u);
  const StageTaskError& f = task(c, 0, Phase::kForward, 0);
  EXPECT_NEAR(f.start_error_pct, 0, kTol);
  EXPECT_NEAR(f.finish_error_pct, 100.0 * 2 / 34, kTol);
  const StageTaskError& b = task(c, 0, Phase::kBackward, 0);
  EXPECT_NEAR(b.start_error_pct, 100.0 * 2 / 34, kTol);
  EXPECT_NEAR(b.finish_error_pct, 100.0 * 4 / 34, kTol);
  EXPECT_NEAR(c.start_error_pct.mean, 100.0 * 1 / 34, kTol);
  EXPECT_NEAR(c.finish_error_pct.max, 100.0 * 4 / 34, kTol);
  EXPECT_NEAR(c.task_error_pct.mean, 100.0 * 8 / 4 / 34, kTol);
}

// A measured clock that starts at 1e6 us: times count from each file's own first start.
TEST(CompareTest, TimesAreRelativeToEachFilesStart) {
  NameTable names;
  Timeline p = readText(kHeader +
                            "0,0,0,0,compute,g,0,10,0,forward,gemm,0,estimated\n"
                            "0,0,0,0,compute,g,10,10,0,backward,gemm,0,estimated\n",
                        names);
  Timeline m = readText(kHeader +
                            "0,0,0,0,compute,g,1000000,10,0,forward,gemm,0,measured\n"
                            "0,0,0,0,compute,g,1000010,10,0,backward,gemm,0,measured\n",
                        names);
  PairComparison c = compareTimelines(p, m, names);
  EXPECT_NEAR(c.iteration_error_pct, 0, kTol);
  EXPECT_NEAR(c.device_error_pct_max, 0, kTol);
  EXPECT_NEAR(c.task_error_pct.max, 0, kTol);
}

std::string readError(const std::string& text) {
  NameTable names;
  try {
    readText(text, names, "x.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TimelineCsvTest, RejectsMalformedInputNamingFileLineAndColumn) {
  const std::string ok = "0,0,0,0,compute,g,0,10,0,forward,gemm,0,estimated\n";
  EXPECT_NE(readError("").find("x.csv: empty file"), std::string::npos);
  EXPECT_NE(readError("rank,tp\n" + ok).find("x.csv:1: header 'rank,tp' is not"),
            std::string::npos);
  EXPECT_NE(readError(kHeader).find("x.csv: no events"), std::string::npos);
  EXPECT_NE(readError(kHeader + ok + "0,0,0,0,compute,g,0,10,0,forward,gemm,0\n")
                .find("x.csv:3: 12 columns, expected 13 (the header's)"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + ok + "0,0,0,0,compute,g,0,10,0,forward,gemm,0,e,extra\n")
                .find("x.csv:3: 14 columns, expected 13"),
            std::string::npos);
  EXPECT_NE(readError(kCpEpHeader + "0,0,0,0,compute,g,0,10,0,forward,gemm,0,e,0,0,x,y\n")
                .find("x.csv:2: more than 15 columns"),
            std::string::npos);
  EXPECT_NE(readError(kCpEpHeader + ok)  // 13 columns under the 15-column header
                .find("x.csv:2: 13 columns, expected 15"),
            std::string::npos);
  EXPECT_NE(readError(kCpEpHeader + "0,0,0,0,compute,g,0,10,0,forward,gemm,0,e,-1,0\n")
                .find("column 'cp' = '-1': must be >= 0"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,compute,g,abc,10,0,forward,gemm,0,e\n")
                .find("x.csv:2: column 'start_us' = 'abc': not a number"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,compute,g,5x,10,0,forward,gemm,0,e\n")
                .find("column 'start_us' = '5x': not a number"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,compute,g,0,-1,0,forward,gemm,0,e\n")
                .find("column 'dur_us' = '-1': must be >= 0"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "r0,0,0,0,compute,g,0,1,0,forward,gemm,0,e\n")
                .find("column 'rank' = 'r0': not an integer"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,compute,g,0,1,-2,forward,gemm,0,e\n")
                .find("column 'micro_batch' = '-2': must be >= -1"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,gpu,g,0,1,0,forward,gemm,0,e\n")
                .find("column 'stream' = 'gpu': not one of"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,compute,g,0,1,0,fwd,gemm,0,e\n")
                .find("column 'phase' = 'fwd': not one of"),
            std::string::npos);
  EXPECT_NE(readError(kHeader + "0,0,0,0,compute,g,0,1,0,forward,gemm,tail,e\n")
                .find("column 'layer' = 'tail'"),
            std::string::npos);
  EXPECT_NE(
      readError(kHeader + "0,0,0,0,compute,g,0,1,0,forward,,0,e\n").find("column 'op' = '': empty"),
      std::string::npos);
  EXPECT_NE(readError(kHeader + ok + "0,0,1,0,compute,g,0,1,0,forward,gemm,0,e\n")
                .find("x.csv:3: rank 0 is at tp 0 cp 0 pp 1 dp 0 here but at tp 0 cp 0 pp 0 dp 0 "
                      "earlier"),
            std::string::npos);
  // A CP peer is told apart from its TP peer: the same rank at another cp is a mixed file.
  EXPECT_NE(readError(kCpEpHeader + "3,1,0,0,compute,g,0,1,0,forward,gemm,0,e,1,0\n" +
                      "3,1,0,0,compute,g,1,1,0,forward,gemm,0,e,0,0\n")
                .find("x.csv:3: rank 3 is at tp 1 cp 0 pp 0 dp 0 here but at tp 1 cp 1 pp 0 dp 0 "
                      "earlier"),
            std::string::npos);
}

TEST(TimelineCsvTest, ReadsCrlfEmbeddingAndHeadLayers) {
  NameTable names;
  Timeline t =
      readText(std::string(kTimelineCsvHeaderWithoutCpEp) + "\r\n" +
                   "2,1,0,0,tp-comm,ar,5.5,2.25,-1,grad-sync,grad_allreduce,embedding,m\r\n"
                   "2,1,0,0,dp-comm,ar,1.5,1,3,backward,x,head,m\r\n",
               names);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].layer, kEmbeddingLayer);
  EXPECT_EQ(t.rows[0].stream, Stream::kTpComm);
  EXPECT_EQ(t.rows[0].phase, Phase::kGradSync);
  EXPECT_EQ(t.rows[0].micro_batch, -1);
  EXPECT_EQ(t.rows[1].layer, kHeadLayer);
  EXPECT_EQ(names.name(t.rows[0].op), "grad_allreduce");
  EXPECT_DOUBLE_EQ(t.begin_us, 1.5);
  EXPECT_DOUBLE_EQ(t.end_us, 7.75);
  EXPECT_DOUBLE_EQ(t.iterationUs(), 6.25);
}

TEST(TimelineCsvTest, MissingFileIsAnInputError) {
  NameTable names;
  try {
    loadTimelineCsv(kDir + "no-such-file.csv", names);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-file.csv: cannot open"), std::string::npos);
  }
}

TEST(RankingTest, PreservedOrderHasTauOne) {
  RankingComparison r = compareRankings({1, 2, 3}, {10, 20, 30});
  EXPECT_TRUE(r.preserved);
  ASSERT_TRUE(r.kendall_tau.has_value());
  EXPECT_NEAR(*r.kendall_tau, 1.0, kTol);
}

TEST(RankingTest, ReversedOrderHasTauMinusOne) {
  RankingComparison r = compareRankings({1, 2, 3}, {30, 20, 10});
  EXPECT_FALSE(r.preserved);
  EXPECT_NEAR(*r.kendall_tau, -1.0, kTol);
  EXPECT_EQ(r.predicted_order, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(r.measured_order, (std::vector<size_t>{2, 1, 0}));
}

// One swapped pair of three: C = 2, D = 1 -> tau = 1/3.
TEST(RankingTest, OneSwapGivesTauOneThird) {
  RankingComparison r = compareRankings({1, 2, 3}, {10, 30, 20});
  EXPECT_FALSE(r.preserved);
  EXPECT_NEAR(*r.kendall_tau, 1.0 / 3, kTol);
}

// Tau-b with a tie in the prediction: C = 2, D = 0, n0 = 3, ties 1 and 0 -> 2 / sqrt(2 * 3).
TEST(RankingTest, TiesUseTauB) {
  RankingComparison r = compareRankings({1, 1, 2}, {1, 2, 3});
  EXPECT_TRUE(r.preserved);
  EXPECT_NEAR(*r.kendall_tau, 2.0 / std::sqrt(6.0), kTol);
  EXPECT_FALSE(compareRankings({5}, {7}).kendall_tau.has_value());
}

TEST(CompareTest, RankingTreatsTimesWithinTheToleranceAsTies) {
  // Strategies 0 and 1: predicted 100 < 101, measured 101.5 > 100 (1.5% apart). Strictly that
  // pair is discordant; with a 2% tolerance the measurement ties it, and the other pairs
  // (120 / 130 against the rest) agree.
  const std::vector<double> predicted = {100, 101, 120}, measured = {101.5, 100, 130};
  EXPECT_FALSE(compareRankings(predicted, measured).preserved);
  RankingComparison r = compareRankings(predicted, measured, 2.0);
  EXPECT_TRUE(r.preserved);
  // tau-b: C = 2, D = 0, 3 pairs, no predicted tie, 1 measured tie: 2 / sqrt(3 * 2).
  ASSERT_TRUE(r.kendall_tau.has_value());
  EXPECT_NEAR(*r.kendall_tau, 2 / std::sqrt(6.0), 1e-12);
  // A 1% tolerance does not cover the 1.5% gap: discordant again.
  EXPECT_FALSE(compareRankings(predicted, measured, 1.0).preserved);
}

}  // namespace
}  // namespace evsim

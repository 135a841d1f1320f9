// Chrome trace and CSV timelines of a small simulation, parsed back and checked against counts
// worked out by hand: one process per rank with its name and sort index, one thread per stream,
// well-formed non-overlapping complete events, and rank selection.
//
// Simulation (support/hand_traced_simulation.h): the tiny GPT (4 decoder blocks) as 2M2P2D, b = 1,
// B = 4 -> m = 2, GPipe, on 2 nodes x 4 GPUs. Costs: compute 1 us, TP all-reduce 0.25, P2P 0.5, DP
// all-reduce 3 (multiples of 0.25, so the 3-decimal trace is exact).
//
// Op counts with TP = 2 (ops/layer_ops.h; TP all-reduces in brackets):
//   block forward 17 = 15 + [attn_proj_allreduce, fc2_allreduce]
//   block backward 23 = 21 + [fc1_input_grad_allreduce, qkv_input_grad_allreduce]
//   embedding forward 4 = word_embedding [embedding_allreduce] position_add embedding_dropout;
//   embedding backward 2
//   head forward 6 = final_layernorm lm_head_gemm cross_entropy [3 cross-entropy all-reduces];
//   head backward 5 = cross_entropy_bwd lm_head_dgrad lm_head_wgrad [input grad all-reduce]
//                     final_layernorm_bwd
// Blocks split 2 / 2 over the two stages:
//   stage 0: F = 4 + 2*17 = 38 (TP 1 + 2*2 = 5), B = 2*23 + 2 = 48 (TP 4)
//   stage 1: F = 2*17 + 6 = 40 (TP 4 + 3 = 7),   B = 5 + 2*23 = 51 (TP 1 + 4 = 5)
// Complete events per rank = m (F + B) + sends + gradient all-reduces + optimizer ops, and with
// the sender written, the receive slices (pp-recv thread):
//   stage 0: 2 * 86 + 2 (activation sends) + 1 + 1 = 176
//            = compute 2 * (33 + 44) + 1 = 155, tp-comm 2 * 9 = 18, pp-comm 2, dp-comm 1;
//            + 2 gradient receives
//   stage 1: 2 * 91 + 2 (gradient sends) + 1 + 1 = 186
//            = compute 2 * (33 + 46) + 1 = 159, tp-comm 2 * 12 = 24, pp-comm 2, dp-comm 1;
//            + 2 activation receives
#include "modeler/trace_writer.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/timeline_csv.h"
#include "plan/iteration_plan.h"
#include "support/hand_traced_simulation.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using nlohmann::json;

constexpr int kWorld = 8;
constexpr int64_t kMicroBatches = 2;

json traceOf(const Simulation& sim, const std::vector<int64_t>& ranks) {
  std::ostringstream out;
  writeChromeTrace(sim, ranks, out);
  return json::parse(out.str());
}

std::vector<json> eventsWithPh(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

class TraceWriterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim_ = new Simulation(test::handTracedSimulation()); }
  static void TearDownTestSuite() {
    delete sim_;
    sim_ = nullptr;
  }
  static Simulation* sim_;
};
Simulation* TraceWriterTest::sim_ = nullptr;

TEST_F(TraceWriterTest, PlanMatchesTheHandCount) {
  // Preconditions of the counts in the header comment.
  const IterationPlan& p = sim_->plan;
  ASSERT_EQ(p.micro_batches, kMicroBatches);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].num_layers, 2);
  EXPECT_EQ(p.stages[1].num_layers, 2);
  EXPECT_EQ(p.stages[0].forward.size(), 38u);
  EXPECT_EQ(p.stages[0].backward.size(), 48u);
  EXPECT_EQ(p.stages[1].forward.size(), 40u);
  EXPECT_EQ(p.stages[1].backward.size(), 51u);
  EXPECT_EQ(p.stages[0].optimizer.size(), 1u);
  EXPECT_EQ(p.stages[1].optimizer.size(), 1u);
}

TEST_F(TraceWriterTest, ProcessAndThreadMetadata) {
  json trace = traceOf(*sim_, selectRanks(*sim_, {}));
  ASSERT_TRUE(trace.contains("traceEvents"));
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  // rank = tp + 2 (dp + 2 pp), node = rank / 4, gpu = rank % 4.
  const std::map<int, std::string> expected_names = {
      {0, "rank 0 (node 0, gpu 0) tp0 pp0 dp0"}, {1, "rank 1 (node 0, gpu 1) tp1 pp0 dp0"},
      {2, "rank 2 (node 0, gpu 2) tp0 pp0 dp1"}, {3, "rank 3 (node 0, gpu 3) tp1 pp0 dp1"},
      {4, "rank 4 (node 1, gpu 0) tp0 pp1 dp0"}, {5, "rank 5 (node 1, gpu 1) tp1 pp1 dp0"},
      {6, "rank 6 (node 1, gpu 2) tp0 pp1 dp1"}, {7, "rank 7 (node 1, gpu 3) tp1 pp1 dp1"}};
  const std::map<int, std::string> stream_names = {
      {0, "compute"}, {1, "tp-comm"}, {2, "pp-comm"}, {3, "dp-comm"}, {4, "pp-recv"}};
  std::map<int, std::string> names;
  std::map<int, int> sort_index;
  std::map<int, std::map<int, std::string>> threads;
  for (const json& m : eventsWithPh(trace, "M")) {
    int pid = m.at("pid");
    const std::string name = m.at("name");
    if (name == "process_name") {
      EXPECT_FALSE(names.count(pid)) << "two process names for pid " << pid;
      names[pid] = m.at("args").at("name");
    } else if (name == "process_sort_index") {
      sort_index[pid] = m.at("args").at("sort_index");
    } else if (name == "thread_name") {
      threads[pid][m.at("tid").get<int>()] = m.at("args").at("name");
    } else {
      ADD_FAILURE() << "unexpected metadata " << m.dump();
    }
  }
  EXPECT_EQ(names, expected_names);
  ASSERT_EQ(sort_index.size(), static_cast<size_t>(kWorld));
  for (const auto& [pid, index] : sort_index) EXPECT_EQ(index, pid);
  ASSERT_EQ(threads.size(), static_cast<size_t>(kWorld));
  for (const auto& [pid, t] : threads) EXPECT_EQ(t, stream_names) << "pid " << pid;
}

TEST_F(TraceWriterTest, CompleteEventsAreWellFormedAndCountedByHand) {
  json trace = traceOf(*sim_, selectRanks(*sim_, {}));
  const std::set<std::string> phases = {"forward", "backward", "grad-sync", "optimizer"};
  const std::set<std::string> provenances = {"measured", "derived", "estimated"};
  std::map<int, std::map<int, int>> per_thread;  // pid -> tid -> count
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  double last_end = 0;
  for (const json& x : eventsWithPh(trace, "X")) {
    const int pid = x.at("pid"), tid = x.at("tid");
    const double ts = x.at("ts"), dur = x.at("dur");
    EXPECT_GE(ts, 0);
    EXPECT_GE(dur, 0);
    EXPECT_GE(pid, 0);
    EXPECT_LT(pid, kWorld);
    EXPECT_GE(tid, 0);
    EXPECT_LE(tid, 4);
    const json& args = x.at("args");
    ASSERT_TRUE(args.contains("micro_batch")) << x.dump();
    ASSERT_TRUE(args.contains("phase")) << x.dump();
    ASSERT_TRUE(args.contains("layer")) << x.dump();
    ASSERT_TRUE(args.contains("event")) << x.dump();
    ASSERT_TRUE(args.contains("provenance")) << x.dump();
    const int mb = args.at("micro_batch");
    const std::string phase = args.at("phase");
    EXPECT_TRUE(phases.count(phase)) << phase;
    EXPECT_TRUE(provenances.count(args.at("provenance").get<std::string>())) << x.dump();
    EXPECT_FALSE(args.at("event").get<std::string>().empty());
    if (phase == "forward" || phase == "backward") {
      EXPECT_GE(mb, 0);
      EXPECT_LT(mb, kMicroBatches);
    } else {
      EXPECT_EQ(mb, -1);
    }
    ++per_thread[pid][tid];
    spans[{pid, tid}].push_back({ts, ts + dur});
    last_end = std::max(last_end, ts + dur);
  }
  // Per rank and stream, from the header comment.
  const std::map<int, int> stage0 = {{0, 155}, {1, 18}, {2, 2}, {3, 1}, {4, 2}};  // 178 in all
  const std::map<int, int> stage1 = {{0, 159}, {1, 24}, {2, 2}, {3, 1}, {4, 2}};  // 188 in all
  ASSERT_EQ(per_thread.size(), static_cast<size_t>(kWorld));
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(per_thread[rank], rank < 4 ? stage0 : stage1) << "rank " << rank;
  }
  // Slices on one thread never overlap (Perfetto could not draw them).
  for (auto& [key, list] : spans) {
    std::sort(list.begin(), list.end());
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_GE(list[i].first, list[i - 1].second)
          << "pid " << key.first << " tid " << key.second << " slice " << i;
    }
  }
  // The last slice is an optimizer step ending the iteration.
  EXPECT_NEAR(last_end, sim_->summary.iteration_us, 1e-3);
}

TEST_F(TraceWriterTest, CommunicationSlicesCarryBytesAndGroup) {
  json trace = traceOf(*sim_, {0});
  int sends = 0, grad = 0;
  for (const json& x : eventsWithPh(trace, "X")) {
    const int tid = x.at("tid");
    if (tid == 0) {
      EXPECT_FALSE(x.at("args").contains("bytes")) << x.dump();
      continue;
    }
    EXPECT_TRUE(x.at("args").contains("bytes")) << x.dump();
    EXPECT_TRUE(x.at("args").contains("group")) << x.dump();
    if (tid == 2) {
      ++sends;
      EXPECT_EQ(x.at("name"), "send_activation");  // stage 0 only sends forward
      EXPECT_EQ(x.at("args").at("group"), 2);
      EXPECT_DOUBLE_EQ(x.at("dur").get<double>(), 0.5);
      EXPECT_EQ(x.at("args").at("provenance"), "estimated");
    }
    if (tid == 3) {
      ++grad;
      EXPECT_EQ(x.at("name"), "grad_allreduce");
      EXPECT_EQ(x.at("args").at("group"), 2);  // D = 2
      EXPECT_DOUBLE_EQ(x.at("dur").get<double>(), 3);
      EXPECT_EQ(x.at("args").at("provenance"), "derived");
    }
  }
  EXPECT_EQ(sends, 2);
  EXPECT_EQ(grad, 1);
}

TEST(TraceWriterOverlapTest, BucketsAreSeparateSlicesOnTheDpThread) {
  Simulation sim = test::handTracedSimulation(/*dp_overlap=*/true);
  json trace = traceOf(sim, selectRanks(sim, {}));
  std::map<int, int> grad_sync, total;
  std::map<int, std::vector<std::pair<double, double>>> dp_spans;
  for (const json& x : eventsWithPh(trace, "X")) {
    const int pid = x.at("pid");
    ++total[pid];
    if (x.at("tid") == 3) {
      ++grad_sync[pid];
      EXPECT_EQ(x.at("name"), "grad_bucket_allreduce");
      const double ts = x.at("ts"), dur = x.at("dur");
      dp_spans[pid].push_back({ts, ts + dur});
    }
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    const StagePlan& stage = sim.plan.stages[rank < 4 ? 0 : 1];
    const size_t buckets = stage.dp_buckets.size();
    // Megatron buckets only pipeline rank 0's first chunk (plan/ddp_buckets.h): a bucket per
    // layer there (the embedding and blocks 0-1), one for stage 1's whole chunk.
    EXPECT_EQ(buckets, rank < 4 ? 3u : 1u);
    EXPECT_EQ(grad_sync[rank], static_cast<int>(buckets));
    // m (F + B) + 2 sends + 2 receives + buckets + 1 optimizer op.
    const size_t expected =
        kMicroBatches * (stage.forward.size() + stage.backward.size()) + 2 + 2 + buckets + 1;
    EXPECT_EQ(total[rank], static_cast<int>(expected)) << "rank " << rank;
    auto& spans = dp_spans[rank];
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_GE(spans[i].first, spans[i - 1].second);
  }
}

TEST_F(TraceWriterTest, SelectedRanksOnly) {
  std::vector<int64_t> ranks = selectRanks(*sim_, {1, 6});
  EXPECT_EQ(ranks, (std::vector<int64_t>{1, 6}));
  json trace = traceOf(*sim_, ranks);
  std::set<int> pids;
  int x_count = 0;
  for (const json& e : trace.at("traceEvents")) {
    pids.insert(e.at("pid").get<int>());
    if (e.at("ph") == "X") ++x_count;
  }
  EXPECT_EQ(pids, (std::set<int>{1, 6}));
  // One stage-0 rank, one stage-1 rank; their peers (5 and 2) are not written: no receives.
  EXPECT_EQ(x_count, 176 + 186);
  EXPECT_EQ(eventsWithPh(trace, "M").size(), 2u * (2 + 5));  // name, sort index, 5 threads
  EXPECT_TRUE(eventsWithPh(trace, "s").empty());
}

TEST_F(TraceWriterTest, FlowsPairEverySendWithOneReceive) {
  // Every rank written: 8 ranks x m = 2 sends (stage 0 activations to rank + 4, stage 1 gradients
  // to rank - 4: rank = tp + 2 (dp + 2 pp)), each with one receive slice on the peer and one flow.
  json trace = traceOf(*sim_, selectRanks(*sim_, {}));
  std::map<int64_t, json> starts, finishes;
  for (const json& s : eventsWithPh(trace, "s")) {
    EXPECT_TRUE(starts.emplace(s.at("id").get<int64_t>(), s).second) << "duplicate id";
  }
  for (const json& f : eventsWithPh(trace, "f")) {
    EXPECT_EQ(f.at("bp"), "e");
    EXPECT_TRUE(finishes.emplace(f.at("id").get<int64_t>(), f).second) << "duplicate id";
  }
  ASSERT_EQ(starts.size(), 16u);
  ASSERT_EQ(finishes.size(), 16u);
  std::vector<json> sends, recvs;
  for (const json& x : eventsWithPh(trace, "X")) {
    if (x.at("tid") == 2) sends.push_back(x);
    if (x.at("tid") == 4) recvs.push_back(x);
  }
  ASSERT_EQ(sends.size(), 16u);
  ASSERT_EQ(recvs.size(), 16u);
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id)) << id;
    const json& f = finishes.at(id);
    const int from = s.at("pid"), to = f.at("pid");
    EXPECT_EQ(to, from < 4 ? from + 4 : from - 4);
    EXPECT_EQ(s.at("tid"), 2);
    EXPECT_EQ(f.at("tid"), 4);
    // The flow starts inside a send slice of its rank and ends inside a receive slice of the peer
    // that names the sender and has the send's interval.
    const double ts = s.at("ts"), tf = f.at("ts");
    auto inside = [](const json& x, int pid, double t) {
      return x.at("pid") == pid && x.at("ts").get<double>() <= t &&
             t <= x.at("ts").get<double>() + x.at("dur").get<double>();
    };
    int send_hits = 0, recv_hits = 0;
    for (const json& x : sends) send_hits += inside(x, from, ts);
    for (const json& x : recvs) {
      if (!inside(x, to, tf)) continue;
      ++recv_hits;
      EXPECT_EQ(x.at("args").at("from_rank"), from);
      EXPECT_EQ(x.at("name"), from < 4 ? "recv_activation" : "recv_gradient");
      EXPECT_DOUBLE_EQ(x.at("ts").get<double>(), ts);
      EXPECT_DOUBLE_EQ(x.at("dur").get<double>(), 0.5);
    }
    EXPECT_EQ(send_hits, 1) << id;
    EXPECT_EQ(recv_hits, 1) << id;
  }
}

TEST_F(TraceWriterTest, GzipTraceDecompressesToTheSameJson) {
  const std::string path = ::testing::TempDir() + "evsim_trace_test.json.gz";
  // Every rank: more than the compressor's 256 KiB input chunk, so the mid-stream flushes run.
  const std::vector<int64_t> ranks = selectRanks(*sim_, {});
  writeTimelineFiles(simulationTimeline(*sim_), ranks, path, "");
  gzFile in = gzopen(path.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  std::string text;
  char chunk[4096];
  int n = 0;
  while ((n = gzread(in, chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
  gzclose(in);
  std::remove(path.c_str());
  EXPECT_GT(text.size(), size_t{1} << 18);
  EXPECT_EQ(json::parse(text), traceOf(*sim_, ranks));
}

TEST_F(TraceWriterTest, SelectRanksDefaultsToEveryRank) {
  EXPECT_EQ(selectRanks(*sim_, {}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(TraceWriterTest, RankOutsideTheWorldIsInputError) {
  EXPECT_THROW(selectRanks(*sim_, {8}), InputError);
  EXPECT_THROW(selectRanks(*sim_, {0, 100}), InputError);
  try {
    selectRanks(*sim_, {8});
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--ranks"), std::string::npos) << e.what();
  }
}

// BUG (modeler/trace_writer.cpp, selectRanks): only `r >= world` is rejected; a negative rank is
// returned as is and later expanded by RankLayout::coord(-1) into garbage coordinates (and an
// out-of-range pipeline lookup). Fix: `if (r < 0 || r >= world) EVSIM_THROW(InputError, ...)`.
TEST_F(TraceWriterTest, NegativeRankIsInputError) {
  EXPECT_THROW(selectRanks(*sim_, {-1}), InputError);
}

// --- CSV
// ----------------------------------------------------------------------------------------------

std::vector<std::string> splitLine(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

TEST_F(TraceWriterTest, CsvHeaderAndRows) {
  std::ostringstream out;
  const std::vector<int64_t> ranks = {0, 5};
  writeTimelineCsv(*sim_, ranks, out);
  std::istringstream in(out.str());
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line,
            "rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance,cp,"
            "ep");
  const std::set<std::string> streams = {"compute", "tp-comm", "pp-comm", "dp-comm"};
  std::map<int, int> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> f = splitLine(line);
    ASSERT_EQ(f.size(), 15u) << line;
    EXPECT_EQ(f[13], "0") << line;  // no context parallelism
    EXPECT_EQ(f[14], "0") << line;  // no expert parallelism
    const int rank = std::stoi(f[0]);
    ++rows[rank];
    EXPECT_TRUE(streams.count(f[4])) << line;
    EXPECT_GE(std::stod(f[6]), 0) << line;
    EXPECT_GE(std::stod(f[7]), 0) << line;
    if (rank == 5) {  // tp1 pp1 dp0
      EXPECT_EQ(f[1], "1");
      EXPECT_EQ(f[2], "1");
      EXPECT_EQ(f[3], "0");
    }
  }
  // The same number of rows as complete events in the trace of the same ranks: 176 and 186.
  json trace = traceOf(*sim_, ranks);
  std::map<int, int> x_events;
  for (const json& x : eventsWithPh(trace, "X")) ++x_events[x.at("pid").get<int>()];
  EXPECT_EQ(rows, x_events);
  EXPECT_EQ(rows, (std::map<int, int>{{0, 176}, {5, 186}}));
}

// --ranks all (issue 34, item 4): 2M2P2D has one pipeline class, so two simulated timelines
// (stage 0: ranks 0-3 = tp x dp, rank = tp + 2 dp + 4 pp; stage 1: ranks 4-7), each written once.
TEST_F(TraceWriterTest, PerTimelineTraceWritesEachTimelineOnceWithItsRanks) {
  const TimelineSource source = simulationTimeline(*sim_);
  const std::vector<RankGroup> groups =
      groupRanks(source, selectRanks(*sim_, {}), TimelineGrouping::kPerTimeline);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].timeline, 0);
  EXPECT_EQ(groups[0].ranks, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(groups[1].timeline, 1);
  EXPECT_EQ(groups[1].ranks, (std::vector<int64_t>{4, 5, 6, 7}));
  std::ostringstream out;
  writeChromeTrace(source, selectRanks(*sim_, {}), out, TimelineGrouping::kPerTimeline);
  const json trace = json::parse(out.str());
  std::map<int, std::string> names, labels;
  for (const json& m : eventsWithPh(trace, "M")) {
    if (m.at("name") == "process_name") names[m.at("pid")] = m.at("args").at("name");
    if (m.at("name") == "process_labels") labels[m.at("pid")] = m.at("args").at("labels");
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "timeline 0 (pp0): 4 ranks"},
                                               {4, "timeline 1 (pp1): 4 ranks"}}));
  EXPECT_EQ(labels, (std::map<int, std::string>{{0, "ranks 0-3"}, {4, "ranks 4-7"}}));
  // Each timeline's 176 / 186 slices once (not 4 times), plus the receives of the other stage's
  // two sends (176 + 2, 186 + 2), and 4 flows.
  std::map<int, int> x_events;
  for (const json& x : eventsWithPh(trace, "X")) ++x_events[x.at("pid").get<int>()];
  EXPECT_EQ(x_events, (std::map<int, int>{{0, 178}, {4, 188}}));
  EXPECT_EQ(eventsWithPh(trace, "s").size(), 4u);
  EXPECT_EQ(eventsWithPh(trace, "f").size(), 4u);
  // A subset keeps only its ranks in the labels; one rank alone keeps the per-rank name.
  std::ostringstream some;
  writeChromeTrace(source, {1, 2, 6}, some, TimelineGrouping::kPerTimeline);
  const json part = json::parse(some.str());
  std::map<int, std::string> part_names;
  for (const json& m : eventsWithPh(part, "M")) {
    if (m.at("name") == "process_name") part_names[m.at("pid")] = m.at("args").at("name");
  }
  EXPECT_EQ(part_names, (std::map<int, std::string>{{1, "timeline 0 (pp0): 2 ranks"},
                                                    {6, "rank 6 (node 1, gpu 2) tp0 pp1 dp1"}}));
}

TEST_F(TraceWriterTest, PerTimelineCsvHasTheRankMapAndATimelineColumn) {
  std::ostringstream out;
  writeTimelineCsv(simulationTimeline(*sim_), selectRanks(*sim_, {}), out,
                   TimelineGrouping::kPerTimeline);
  std::istringstream in(out.str());
  std::string line;
  std::vector<std::string> head(4);
  for (std::string& h : head) ASSERT_TRUE(std::getline(in, h));
  EXPECT_EQ(head[0], kTimelineMapComment);
  EXPECT_EQ(head[1], "# timeline 0: ranks 0-3");
  EXPECT_EQ(head[2], "# timeline 1: ranks 4-7");
  EXPECT_EQ(head[3], "timeline," + std::string(kTimelineCsvHeader));
  std::map<std::string, int> rows;  // "timeline,rank,tp,pp,dp" -> rows
  while (std::getline(in, line)) {
    const std::vector<std::string> f = splitLine(line);
    ASSERT_EQ(f.size(), 16u) << line;
    ++rows[f[0] + "," + f[1] + "," + f[2] + "," + f[3] + "," + f[4]];
  }
  // The timelines' lowest ranks (0: tp0 pp0 dp0, 4: tp0 pp1 dp0), 176 and 186 rows (not x4).
  EXPECT_EQ(rows, (std::map<std::string, int>{{"0,0,0,0,0", 176}, {"1,4,0,1,0", 186}}));
  // compare reads per-rank CSVs only: one line saying so.
  NameTable names;
  std::istringstream again(out.str());
  try {
    readTimelineCsv(again, "all.csv", names);
    ADD_FAILURE() << "read";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "all.csv: a per-timeline CSV (simulate --ranks all: one row set per simulated "
              "timeline, standing for many ranks); compare needs one per rank: write it with "
              "--ranks LIST");
  }
}

}  // namespace
}  // namespace evsim

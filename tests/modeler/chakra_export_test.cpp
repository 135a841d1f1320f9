// Chakra execution traces (simulate --chakra) of the small simulation trace_writer_test.cpp traces
// by hand, written to files, read back with the generated protobuf classes and checked against
// counts, sizes, peers and groups worked out by hand.
//
// Simulation: the tiny GPT (hidden 64, 4 heads, ffn 256, seq 32, vocab 512, 4 blocks, fp16) as
// 2M2P2D, b = 1, B = 4 -> m = 2 micro-batches, GPipe, on 2 nodes x 4 GPUs; compute 1 us, TP
// all-reduce 0.25, P2P 0.5, DP all-reduce 3. Ranks: rank = tp + 2 (dp + 2 pp).
// From trace_writer_test.cpp's op counts, per rank:
//   stage 0: compute 155, TP all-reduces 18, gradient all-reduce 1, activation sends 2 (to the
//            stage-1 rank of its column), gradient receives 2 -> 178 nodes
//   stage 1: compute 159, TP all-reduces 24, gradient all-reduce 1, gradient sends 2, activation
//            receives 2 -> 188 nodes
// Bytes: a pipeline transfer and the block/embedding TP all-reduces carry s b h x 2 bytes =
// 32 x 1 x 64 x 2 = 4096; all 18 of stage 0's TP all-reduces are of that kind (embedding,
// attn_proj, fc2, fc1/qkv input grads), 18 of stage 1's 24 (the head's 3 cross-entropy all-reduces
// per micro-batch are smaller). Groups: TP {0,1} {2,3} {4,5} {6,7}; DP (same tp and pp) {0,2} {1,3}
// {4,6} {5,7}: 8 groups. Tags: 1 + (micro_batch x chunks + chunk) x 2 + (0 activation, 1 gradient),
// chunks = 1.
#include "modeler/chakra_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "common/error.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "io/chakra/chakra_file.h"
#include "modeler/cost_model.h"
#include "plan/iteration_plan.h"
#include "support/hand_traced_simulation.h"
#include "support/test_support.h"

namespace evsim {
namespace {

namespace fs = std::filesystem;
using ChakraProtoMsg::Node;

const ChakraProtoMsg::AttributeProto* attr(const Node& n, const std::string& name) {
  for (const auto& a : n.attr()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int count(const std::vector<Node>& nodes, ChakraProtoMsg::NodeType type) {
  return static_cast<int>(
      std::count_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.type() == type; }));
}

class ChakraExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sim_ = new Simulation(test::handTracedSimulation());
    dir_ = fs::temp_directory_path() / fmt::format("evsim_chakra_{}", ::getpid());
    fs::remove_all(dir_);
    output_ = writeChakraTraces(*sim_, dir_.string(), "et", 1.0);
    for (int r = 0; r < 8; ++r) traces_.push_back(readChakraTrace(path(r)));
  }
  static void TearDownTestSuite() {
    fs::remove_all(dir_);
    delete sim_;
  }
  static std::string path(int rank) { return (dir_ / fmt::format("et.{}.et", rank)).string(); }

  static Simulation* sim_;
  static fs::path dir_;
  static ChakraOutput output_;
  static std::vector<ChakraTrace> traces_;
};
Simulation* ChakraExportTest::sim_ = nullptr;
fs::path ChakraExportTest::dir_;
ChakraOutput ChakraExportTest::output_;
std::vector<ChakraTrace> ChakraExportTest::traces_;

TEST_F(ChakraExportTest, OneFilePerRankWithTheCountsWorkedOutByHand) {
  EXPECT_EQ(output_.files, 8);
  EXPECT_EQ(output_.nodes, 4 * 178 + 4 * 188);
  for (int r = 0; r < 8; ++r) {
    const std::vector<Node>& n = traces_[r].nodes;
    const bool first_stage = r < 4;
    SCOPED_TRACE(r);
    EXPECT_EQ(traces_[r].metadata.version(), "0.0.4");
    EXPECT_EQ(n.size(), first_stage ? 178u : 188u);
    EXPECT_EQ(count(n, ChakraProtoMsg::COMP_NODE), first_stage ? 155 : 159);
    EXPECT_EQ(count(n, ChakraProtoMsg::COMM_COLL_NODE), first_stage ? 19 : 25);
    EXPECT_EQ(count(n, ChakraProtoMsg::COMM_SEND_NODE), 2);
    EXPECT_EQ(count(n, ChakraProtoMsg::COMM_RECV_NODE), 2);
    for (size_t i = 0; i < n.size(); ++i) {
      EXPECT_EQ(n[i].id(), i);
      ASSERT_NE(attr(n[i], "is_cpu_op"), nullptr);
      EXPECT_FALSE(attr(n[i], "is_cpu_op")->bool_val());
      if (n[i].type() == ChakraProtoMsg::COMP_NODE) {
        EXPECT_EQ(n[i].duration_micros(), 1u);  // every compute op costs 1 us
        ASSERT_NE(attr(n[i], "num_ops"), nullptr);
        EXPECT_EQ(attr(n[i], "num_ops")->value_case(), ChakraProtoMsg::AttributeProto::kInt64Val);
        ASSERT_NE(attr(n[i], "tensor_size"), nullptr);
        EXPECT_EQ(attr(n[i], "tensor_size")->value_case(),
                  ChakraProtoMsg::AttributeProto::kUint64Val);
      }
      // A dependency names an earlier node: the feeder can always issue the first one left.
      for (uint64_t d : n[i].data_deps()) EXPECT_LT(d, i);
    }
  }
  // The GEMM qkv of a block on one TP rank: 2 x (s b) x h x (3h / M) = 2 x 32 x 64 x 96 FLOPs.
  bool found_qkv = false;
  for (const Node& node : traces_[0].nodes) {
    if (node.name().rfind("qkv_gemm forward mb0", 0) == 0) {
      EXPECT_EQ(attr(node, "num_ops")->int64_val(), 2 * 32 * 64 * 96);
      found_qkv = true;
      break;
    }
  }
  EXPECT_TRUE(found_qkv);
}

TEST_F(ChakraExportTest, CollectivesNameTheirGroupsAndSizes) {
  std::string json;
  std::ifstream in(output_.comm_group_path);
  json.assign(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(output_.groups, 8);
  // First met writing rank 0, then 1, ...: rank 0's TP and DP groups, rank 1's DP group, ...
  EXPECT_EQ(json,
            "{\n  \"1\": [0, 1],\n  \"2\": [0, 2],\n  \"3\": [1, 3],\n  \"4\": [2, 3],\n"
            "  \"5\": [4, 5],\n  \"6\": [4, 6],\n  \"7\": [5, 7],\n  \"8\": [6, 7]\n}\n");
  for (int r : {0, 5}) {
    int tp_4096 = 0, tp_other = 0, dp = 0;
    for (const Node& n : traces_[r].nodes) {
      if (n.type() != ChakraProtoMsg::COMM_COLL_NODE) continue;
      const std::string group = attr(n, "pg_name")->string_val();
      EXPECT_EQ(attr(n, "comm_type")->int64_val(), ChakraProtoMsg::ALL_REDUCE);
      const int64_t bytes = attr(n, "comm_size")->int64_val();
      if (group == (r == 0 ? "2" : "7")) {  // the DP group: {0,2}, {5,7}
        ++dp;
        EXPECT_EQ(n.duration_micros(), 3u);
      } else {
        EXPECT_EQ(group, r == 0 ? "1" : "5");  // the TP group: {0,1}, {4,5}
        ++(bytes == 4096 ? tp_4096 : tp_other);
      }
    }
    EXPECT_EQ(dp, 1);
    EXPECT_EQ(tp_4096, 18);
    EXPECT_EQ(tp_other, r == 0 ? 0 : 6);
  }
}

TEST_F(ChakraExportTest, PipelineTransfersPairUpAcrossRanks) {
  // Rank 0 (pp0) sends activations of micro-batches 0 and 1 to rank 4 with tags 1 and 3 and
  // receives their gradients from it with tags 2 and 4; rank 5 (pp1) sends gradients to rank 1.
  auto transfers = [&](int r, ChakraProtoMsg::NodeType type) {
    std::vector<std::tuple<int, int, int, int64_t>> out;  // src, dst, tag, bytes
    for (const Node& n : traces_[r].nodes) {
      if (n.type() != type) continue;
      out.emplace_back(attr(n, "comm_src")->int32_val(), attr(n, "comm_dst")->int32_val(),
                       attr(n, "comm_tag")->int32_val(), attr(n, "comm_size")->int64_val());
    }
    return out;
  };
  using T = std::vector<std::tuple<int, int, int, int64_t>>;
  EXPECT_EQ(transfers(0, ChakraProtoMsg::COMM_SEND_NODE), (T{{0, 4, 1, 4096}, {0, 4, 3, 4096}}));
  EXPECT_EQ(transfers(0, ChakraProtoMsg::COMM_RECV_NODE), (T{{4, 0, 2, 4096}, {4, 0, 4, 4096}}));
  EXPECT_EQ(transfers(5, ChakraProtoMsg::COMM_SEND_NODE), (T{{5, 1, 2, 4096}, {5, 1, 4, 4096}}));
  EXPECT_EQ(transfers(5, ChakraProtoMsg::COMM_RECV_NODE), (T{{1, 5, 1, 4096}, {1, 5, 3, 4096}}));
  // Every send of every rank has exactly one matching receive on its destination.
  std::multiset<std::tuple<int, int, int, int64_t>> sends, recvs;
  for (int r = 0; r < 8; ++r) {
    for (const auto& t : transfers(r, ChakraProtoMsg::COMM_SEND_NODE)) sends.insert(t);
    for (const auto& t : transfers(r, ChakraProtoMsg::COMM_RECV_NODE)) recvs.insert(t);
  }
  EXPECT_EQ(sends, recvs);
  // Each group's members issue the same collectives in the same order (or ASTRA-sim hangs).
  std::map<std::string, std::map<int, std::vector<std::pair<int64_t, int64_t>>>> by_group;
  for (int r = 0; r < 8; ++r) {
    for (const Node& n : traces_[r].nodes) {
      if (n.type() != ChakraProtoMsg::COMM_COLL_NODE) continue;
      by_group[attr(n, "pg_name")->string_val()][r].emplace_back(attr(n, "comm_type")->int64_val(),
                                                                 attr(n, "comm_size")->int64_val());
    }
  }
  EXPECT_EQ(by_group.size(), 8u);
  for (const auto& [group, members] : by_group) {
    EXPECT_EQ(members.size(), 2u) << group;
    EXPECT_EQ(members.begin()->second, members.rbegin()->second) << group;
  }
}

TEST_F(ChakraExportTest, DependenciesFollowTheTimeline) {
  const std::vector<Node>& n = traces_[0].nodes;
  // Stage 0 starts with word_embedding (0-1 us), then its TP all-reduce (1-1.25), then
  // position_add (1.25-2.25): the all-reduce waits for the GEMM, position_add for both.
  EXPECT_EQ(n[0].name().rfind("word_embedding", 0), 0u) << n[0].name();
  EXPECT_EQ(n[0].data_deps_size(), 0);
  EXPECT_EQ(n[1].type(), ChakraProtoMsg::COMM_COLL_NODE);
  EXPECT_EQ(std::vector<uint64_t>(n[1].data_deps().begin(), n[1].data_deps().end()),
            std::vector<uint64_t>{0});
  EXPECT_EQ(n[2].name().rfind("position_add", 0), 0u) << n[2].name();
  EXPECT_EQ(std::vector<uint64_t>(n[2].data_deps().begin(), n[2].data_deps().end()),
            (std::vector<uint64_t>{0, 1}));
  // Every receive feeds a later node (the backward that needs the gradient).
  for (const Node& recv : n) {
    if (recv.type() != ChakraProtoMsg::COMM_RECV_NODE) continue;
    const bool used = std::any_of(n.begin(), n.end(), [&](const Node& x) {
      return std::find(x.data_deps().begin(), x.data_deps().end(), recv.id()) !=
             x.data_deps().end();
    });
    EXPECT_TRUE(used) << recv.name();
  }
}

TEST_F(ChakraExportTest, BadDirectoryAndOversizeAreInputErrors) {
  const fs::path file = dir_ / "et.0.et";
  EXPECT_THROW(writeChakraTraces(*sim_, file.string(), "et", 1.0), InputError);
  EXPECT_THROW(writeChakraTraces(*sim_, (file / "sub").string(), "et", 1.0), InputError);
  // 8 files of about 178-188 nodes of tens of bytes: more than a millionth of a GiB.
  EXPECT_THROW(writeChakraTraces(*sim_, (dir_ / "big").string(), "et", 1e-6), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "big"));
  // A truncated file is refused when read back.
  const fs::path cut = dir_ / "cut.et";
  fs::copy_file(file, cut);
  fs::resize_file(cut, fs::file_size(cut) - 3);
  EXPECT_THROW(readChakraTrace(cut.string()), InputError);
}

TEST_F(ChakraExportTest, AnEarlierLargerRunsRankFilesAreRemovedAndNothingElse) {
  const fs::path dir = dir_ / "rerun";
  fs::create_directories(dir);
  // An earlier 12-rank run's files 8..11, and files that only look alike.
  const std::vector<std::string> stale = {"et.8.et", "et.9.et", "et.11.et"};
  const std::vector<std::string> kept = {"et.x.et", "other.9.et", "et.9.et.bak", "et..et",
                                         "notes.txt"};
  for (const std::string& name : stale) std::ofstream(dir / name) << "old";
  for (const std::string& name : kept) std::ofstream(dir / name) << "keep";
  std::ofstream(dir / "et.3.et") << "old";  // rewritten by this 8-rank run
  const ChakraOutput out = writeChakraTraces(*sim_, dir.string(), "et", 1.0);
  EXPECT_EQ(out.files, 8);
  EXPECT_EQ(out.stale_removed, 3);
  for (const std::string& name : stale) EXPECT_FALSE(fs::exists(dir / name)) << name;
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(dir / name)) << name;
  EXPECT_GT(fs::file_size(dir / "et.3.et"), 3u);
  EXPECT_EQ(readChakraTrace((dir / "et.7.et").string()).nodes.size(), 188u);
  // A second run into the same folder finds nothing stale.
  EXPECT_EQ(writeChakraTraces(*sim_, dir.string(), "et", 1.0).stale_removed, 0);
}

// Runs every rank's nodes the way ASTRA-sim's workload layer issues them (no durations, only the
// order): a node is issued once its data_deps are done; one GPU compute node, one host node and
// one collective or send at a time per rank, receives any number; a collective finishes when every
// member of its group has issued its k-th collective of that group, a send and its receive
// together (rendezvous, stricter than ASTRA-sim's eager sends). Returns the nodes left unfinished
// (0: the traces run to the end without a deadlock).
int64_t replayUnfinished(const std::vector<std::vector<Node>>& ranks,
                         const std::map<int, std::vector<int64_t>>& group_ranks) {
  const size_t world = ranks.size();
  struct RankState {
    std::vector<int> waiting;  // unfinished deps per node
    std::vector<std::vector<int64_t>> children;
    std::set<int64_t> ready;         // deps done, not issued
    int64_t busy[3] = {-1, -1, -1};  // GPU compute, host, communication
    std::map<int, int> coll_count;   // group -> collectives issued
  };
  std::vector<RankState> st(world);
  for (size_t r = 0; r < world; ++r) {
    const std::vector<Node>& n = ranks[r];
    st[r].waiting.resize(n.size());
    st[r].children.resize(n.size());
    for (size_t i = 0; i < n.size(); ++i) {
      st[r].waiting[i] = n[i].data_deps_size();
      for (uint64_t d : n[i].data_deps()) st[r].children[d].push_back(static_cast<int64_t>(i));
      if (n[i].data_deps_size() == 0) st[r].ready.insert(static_cast<int64_t>(i));
    }
  }
  int64_t finished = 0, total = 0;
  for (const auto& n : ranks) total += static_cast<int64_t>(n.size());
  auto resource = [](const Node& n) {
    if (n.type() == ChakraProtoMsg::COMP_NODE) return attr(n, "is_cpu_op")->bool_val() ? 1 : 0;
    return n.type() == ChakraProtoMsg::COMM_RECV_NODE ? -1 : 2;
  };
  auto finish = [&](size_t r, int64_t i) {
    ++finished;
    const int res = resource(ranks[r][i]);
    if (res >= 0 && st[r].busy[res] == i) st[r].busy[res] = -1;
    for (int64_t c : st[r].children[i]) {
      if (--st[r].waiting[c] == 0) st[r].ready.insert(c);
    }
  };
  // Pending: collective instances (group, k) -> arrived (rank, node); transfers by (src, dst, tag).
  std::map<std::pair<int, int>, std::vector<std::pair<size_t, int64_t>>> colls;
  std::map<std::tuple<int, int, int>, std::vector<std::pair<size_t, int64_t>>> sends, recvs;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < world; ++r) {
      for (auto it = st[r].ready.begin(); it != st[r].ready.end();) {
        const int64_t i = *it;
        const Node& n = ranks[r][i];
        const int res = resource(n);
        if (res >= 0 && st[r].busy[res] >= 0) {
          ++it;
          continue;
        }
        it = st[r].ready.erase(it);
        progress = true;
        if (res >= 0) st[r].busy[res] = i;
        if (n.type() == ChakraProtoMsg::COMP_NODE) {
          finish(r, i);
        } else if (n.type() == ChakraProtoMsg::COMM_COLL_NODE) {
          const int g = std::stoi(attr(n, "pg_name")->string_val());
          auto& arrived = colls[{g, st[r].coll_count[g]++}];
          arrived.emplace_back(r, i);
          if (arrived.size() == group_ranks.at(g).size()) {
            for (auto [rr, ii] : arrived) finish(rr, ii);
          }
        } else {
          const std::tuple<int, int, int> key{attr(n, "comm_src")->int32_val(),
                                              attr(n, "comm_dst")->int32_val(),
                                              attr(n, "comm_tag")->int32_val()};
          const bool send = n.type() == ChakraProtoMsg::COMM_SEND_NODE;
          auto& mine = send ? sends[key] : recvs[key];
          auto& theirs = send ? recvs[key] : sends[key];
          if (theirs.empty()) {
            mine.emplace_back(r, i);
          } else {
            const auto [rr, ii] = theirs.front();
            theirs.erase(theirs.begin());
            finish(r, i);
            finish(rr, ii);
          }
        }
        break;  // the ready set changed: start this rank's scan again
      }
    }
  }
  return total - finished;
}

// Every rank's nodes of a simulation costed by the device model, and its groups.
struct AllRanks {
  std::vector<std::vector<Node>> nodes;
  std::map<int, std::vector<int64_t>> groups;
};
AllRanks allRanks(const std::string& model, Strategy s, const ClusterConfig& cluster) {
  IterationPlan plan =
      buildIterationPlan(loadModelConfig(test::configPath("models", model)), cluster, s);
  CostModel costs(cluster, nullptr, /*analytic fallback=*/true);
  std::vector<EventCost> c = costs.costAll(plan.events);
  const Simulation sim = simulate(std::move(plan), std::move(c));
  AllRanks out;
  ChakraCommGroups groups;
  for (int64_t r = 0; r < s.gpus(); ++r) out.nodes.push_back(chakraNodes(sim, r, groups));
  for (size_t g = 0; g < groups.groups().size(); ++g)
    out.groups[static_cast<int>(g) + 1] = groups.groups()[g];
  return out;
}

TEST_F(ChakraExportTest, TheHandTracedTracesReplayToTheEnd) {
  std::vector<std::vector<Node>> nodes;
  for (const ChakraTrace& t : traces_) nodes.push_back(t.nodes);
  std::map<int, std::vector<int64_t>> groups = {{1, {0, 1}}, {2, {0, 2}}, {3, {1, 3}}, {4, {2, 3}},
                                                {5, {4, 5}}, {6, {4, 6}}, {7, {5, 7}}, {8, {6, 7}}};
  EXPECT_EQ(replayUnfinished(nodes, groups), 0);
  // A receive taken away leaves its sender (and what follows it) unfinished: the check can fail.
  for (Node& n : nodes[4]) {
    if (n.type() == ChakraProtoMsg::COMM_RECV_NODE) {
      n.set_type(ChakraProtoMsg::COMP_NODE);
      break;
    }
  }
  EXPECT_GT(replayUnfinished(nodes, groups), 0);
}

struct ReplayCase {
  const char* name;
  const char* model;
  const char* strategy;
  int64_t micro_batch, global_batch;
  Schedule schedule;
  int virtual_stages, cp, ep;
  Offload offload = Offload::kNone;
  const char* cluster = nullptr;  // bundled; default: 4 GPUs per node
};

class ChakraReplayTest : public ::testing::TestWithParam<ReplayCase> {};

TEST_P(ChakraReplayTest, EveryRankRunsToTheEndWithMatchedTransfers) {
  const ReplayCase& c = GetParam();
  Strategy s = test::strategy(c.strategy, c.micro_batch, c.global_batch);
  s.schedule = c.schedule;
  s.virtual_stages = c.virtual_stages;
  s.cp = c.cp;
  s.ep = c.ep;
  s.offload = c.offload;
  const ClusterConfig cluster = c.cluster
                                    ? loadClusterConfig(test::configPath("clusters", c.cluster))
                                    : test::cluster(4, static_cast<int>(s.gpus() / 4));
  const AllRanks all = allRanks(c.model, s, cluster);
  std::multiset<std::tuple<int, int, int, int64_t>> sends, recvs;
  int cp_sends = 0, all_to_alls = 0, host_ops = 0;
  for (const auto& rank : all.nodes) {
    for (const Node& n : rank) {
      if (n.type() == ChakraProtoMsg::COMM_COLL_NODE &&
          attr(n, "comm_type")->int64_val() == ChakraProtoMsg::ALL_TO_ALL)
        ++all_to_alls;
      if (n.type() == ChakraProtoMsg::COMP_NODE && attr(n, "is_cpu_op")->bool_val()) ++host_ops;
      if (n.type() == ChakraProtoMsg::COMM_SEND_NODE && attr(n, "comm_tag")->int32_val() >= 1 << 30)
        ++cp_sends;
      if (n.type() != ChakraProtoMsg::COMM_SEND_NODE && n.type() != ChakraProtoMsg::COMM_RECV_NODE)
        continue;
      auto& set = n.type() == ChakraProtoMsg::COMM_SEND_NODE ? sends : recvs;
      set.emplace(attr(n, "comm_src")->int32_val(), attr(n, "comm_dst")->int32_val(),
                  attr(n, "comm_tag")->int32_val(), attr(n, "comm_size")->int64_val());
    }
  }
  EXPECT_EQ(sends, recvs);
  EXPECT_FALSE(sends.empty());
  EXPECT_EQ(cp_sends > 0, c.cp > 1);
  EXPECT_EQ(all_to_alls > 0, c.ep > 1);
  EXPECT_EQ(host_ops > 0, c.offload != Offload::kNone);
  EXPECT_EQ(replayUnfinished(all.nodes, all.groups), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ChakraReplayTest,
    ::testing::Values(
        ReplayCase{"dapple", "tiny-gpt", "2M2P2D", 1, 8, Schedule::kDapple, 1, 1, 1},
        ReplayCase{"interleaved", "tiny-gpt", "1M2P2D", 1, 8, Schedule::kInterleaved, 2, 1, 1},
        ReplayCase{"zbv", "tiny-gpt", "1M2P2D", 1, 8, Schedule::kZbv, 1, 1, 1},
        ReplayCase{"dualpipev", "tiny-gpt", "1M2P2D", 1, 8, Schedule::kDualPipeV, 1, 1, 1},
        ReplayCase{"context_parallel", "tiny-llama", "1M2P2D", 1, 4, Schedule::kDapple, 1, 2, 1},
        ReplayCase{"offload", "tiny-gpt", "2M2P1D", 1, 4, Schedule::kDapple, 1, 1, 1,
                   Offload::kBoth, "cpu-local"},
        ReplayCase{"expert_parallel", "tiny-moe", "1M2P4D", 1, 8, Schedule::kDapple, 1, 1, 2}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace evsim

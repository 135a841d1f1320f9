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

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "common/error.h"
#include "io/chakra/chakra_file.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

namespace fs = std::filesystem;
using ChakraProtoMsg::Node;

Simulation smallSimulation() {
  Strategy s;
  s.tp = 2;
  s.pp = 2;
  s.dp = 2;
  s.micro_batch = 1;
  s.global_batch = 4;
  s.schedule = Schedule::kGpipe;
  IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                          test::cluster(4, 2, test::kSlowLinks), s);
  std::set<int> tp_ops, dp_ops;
  for (const StagePlan& st : plan.stages) {
    for (const OpList* ops : {&st.forward, &st.backward}) {
      for (const OpInstance& op : *ops) {
        if (op.stream == Stream::kTpComm) tp_ops.insert(op.event);
      }
    }
    if (st.dp_allreduce >= 0) dp_ops.insert(st.dp_allreduce);
  }
  std::vector<EventCost> costs;
  for (int e = 0; e < plan.events.size(); ++e) {
    const double us = plan.events[e].event.kind == EventKind::kCompute ? 1.0
                      : dp_ops.count(e)                                ? 3.0
                      : tp_ops.count(e)                                ? 0.25
                                                                       : 0.5;
    costs.push_back({us, Provenance::kMeasured});
  }
  return simulate(std::move(plan), std::move(costs));
}

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
    sim_ = new Simulation(smallSimulation());
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

}  // namespace
}  // namespace evsim

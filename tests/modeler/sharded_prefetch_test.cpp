// ZeRO-3 / FSDP prefetch (plan/sharded_prefetch.h): the reordered op list, and its timing through
// the one rule tasks are timed by (modeler/op_offsets.h), traced by hand.
#include "plan/sharded_prefetch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "modeler/op_offsets.h"

namespace evsim {
namespace {

// Each op its own event, its duration keyed by name (us).
struct Fixture {
  EventTable table;
  std::map<std::string_view, double> us;
  OpList ops;
  void gather(std::string_view name, double t) { transfer(EventKind::kAllGather, name, t); }
  void scatter(std::string_view name, double t) { transfer(EventKind::kReduceScatter, name, t); }
  void compute(std::string_view name, double t) {
    const int64_t m = static_cast<int64_t>(ops.size()) + 1;  // a distinct event each
    const Event gemm = makeCompute("gemm", {{"m", m}, {"n", 64}, {"k", 64}}, "nn", DType::kBf16);
    ops.push_back(OpInstance{table.intern(gemm), Stream::kCompute, 0, name});
    us[name] = t;
  }
  // An activation offload or prefetch: a host-stream copy beside the next `span` ops.
  void hostCopy(std::string_view name, double t, int span) {
    const int64_t elems = static_cast<int64_t>(100 + ops.size());  // a distinct event each
    ops.push_back(OpInstance{table.intern(makeCompute("offload_h2d", {{"elems", elems}}, "",
                                                      DType::kBf16)),
                             Stream::kHost, 0, name});
    ops.back().overlap_ops = span;
    us[name] = t;
  }
  void transfer(EventKind kind, std::string_view name, double t) {
    Placement dp{8, 1, 8};
    const int64_t bytes = static_cast<int64_t>(1000 + ops.size());  // a distinct event each
    ops.push_back(OpInstance{table.intern(makeCommunication(kind, bytes, dp, DType::kBf16)),
                             Stream::kDpComm, 0, name});
    us[name] = t;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const OpInstance& op : ops) out.push_back(std::string(op.name));
    return out;
  }
  std::vector<int> spans() const {
    std::vector<int> out;
    for (const OpInstance& op : ops) out.push_back(op.overlap_ops);
    return out;
  }
  double taskUs() const {
    return opOffsets(
        ops, [](const OpInstance&) { return true; },
        [&](const OpInstance& op) {
          return std::pair{0.0, us.at(op.name)};
        },
        [](size_t, double) {});
  }
};

// A forward: the embedding and two layers, each after its gather (2, 1; 3, 5; 3, 5).
Fixture forwardOfTwoLayers() {
  Fixture f;
  f.gather("g_emb", 2);
  f.compute("emb", 1);
  f.gather("g0", 3);
  f.compute("c0", 5);
  f.gather("g1", 3);
  f.compute("c1", 5);
  return f;
}

TEST(ShardedPrefetch, ForwardGathersTheNextLayerBesideThisOne) {
  Fixture f = forwardOfTwoLayers();
  EXPECT_DOUBLE_EQ(f.taskUs(), 19);  // blocking: 2 + 1 + 3 + 5 + 3 + 5
  prefetchShardedTransfers(f.ops, f.table);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"g_emb", "g0", "emb", "g1", "c0", "c1"}));
  EXPECT_EQ(f.spans(), (std::vector<int>{0, 1, 0, 1, 0, 0}));
  // g_emb 0-2 exposed; g0 2-5 beside emb 2-3; g1 5-8 (after g0 on the DP stream, released at
  // c0's turn) beside c0 5-10; c1 10-15.
  EXPECT_DOUBLE_EQ(f.taskUs(), 15);
}

TEST(ShardedPrefetch, BackwardRegathersAheadAndScattersBehind) {
  Fixture f;
  f.gather("gh", 3);
  f.compute("hb", 4);
  f.scatter("sh", 6);
  f.gather("g1", 3);
  f.compute("b1", 10);
  f.scatter("s1", 6);
  f.gather("g0", 3);
  f.compute("b0", 10);
  f.scatter("s0", 6);
  EXPECT_DOUBLE_EQ(f.taskUs(), 51);  // blocking: the sum
  prefetchShardedTransfers(f.ops, f.table);
  EXPECT_EQ(f.names(),
            (std::vector<std::string>{"gh", "g1", "hb", "sh", "g0", "b1", "s1", "b0", "s0"}));
  EXPECT_EQ(f.spans(), (std::vector<int>{0, 1, 0, 2, 1, 0, 1, 0, 0}));
  // gh 0-3 exposed; g1 3-6 beside hb 3-7; sh 7-13 and g0 13-16 beside b1 7-17; s1 17-23 beside
  // b0 17-27; s0 27-33 exposed (the task ends when it has).
  EXPECT_DOUBLE_EQ(f.taskUs(), 33);
}

TEST(ShardedPrefetch, KeepsOtherOverlappingOpsBesideTheSameOps) {
  Fixture f;
  f.gather("g0", 2);
  f.compute("c0", 4);
  f.compute("offload0", 1);  // runs beside layer 1's gather and compute, as offload places it
  f.ops.back().overlap_ops = 2;
  f.gather("g1", 2);
  f.compute("c1", 4);
  f.compute("after", 1);
  prefetchShardedTransfers(f.ops, f.table);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"g0", "g1", "c0", "offload0", "c1", "after"}));
  // offload0 was released at "after": it still is, now one op later.
  EXPECT_EQ(f.spans(), (std::vector<int>{0, 2, 0, 1, 0, 0}));
}

TEST(ShardedPrefetch, BackwardActivationPrefetchesStayBesideTheirLayer) {
  // As addActivationOffload lays out a backward: layer 1's own prefetch first (blocking), layer
  // 0's beside layer 1's run, then the runs. The copies do not hold the device, so they must not
  // split layer 1's unit from its gather: g0 still goes beside b1, s1 beside b0.
  Fixture f;
  f.hostCopy("h1", 2, 0);
  f.hostCopy("h0", 5, 3);  // beside g1 b1 s1
  f.gather("g1", 3);
  f.compute("b1", 10);
  f.scatter("s1", 6);
  f.gather("g0", 3);
  f.compute("b0", 10);
  f.scatter("s0", 6);
  prefetchShardedTransfers(f.ops, f.table);
  EXPECT_EQ(f.names(),
            (std::vector<std::string>{"g1", "g0", "h1", "h0", "b1", "s1", "b0", "s0"}));
  EXPECT_EQ(f.spans(), (std::vector<int>{0, 3, 0, 1, 0, 1, 0, 0}));
  // g1 0-3 exposed; g0 3-6 beside h1, h0, b1; h1 3-5 blocks; h0 5-10 beside b1 5-15; s1 15-21
  // beside b0 15-25; s0 25-31 exposed. (Before the fix: 33, h0 blocking and g0 after it.)
  EXPECT_DOUBLE_EQ(f.taskUs(), 31);
}

TEST(ShardedPrefetch, ASecondListOnOneThreadIsReorderedAsOnAFreshThread) {
  // prefetchShardedTransfers keeps its arrays per thread across calls: a short list reordered
  // after a longer one (arrays larger, holding that list's positions) comes out exactly as on a
  // thread that never ran it, and as traced by hand in ForwardGathersTheNextLayerBesideThisOne.
  Fixture fresh = forwardOfTwoLayers();
  std::thread([&] { prefetchShardedTransfers(fresh.ops, fresh.table); }).join();
  Fixture longer;
  for (const char* layer : {"2", "1", "0"}) {
    longer.gather(layer, 3);
    longer.compute(layer, 10);
    longer.scatter(layer, 6);
  }
  prefetchShardedTransfers(longer.ops, longer.table);
  Fixture second = forwardOfTwoLayers();
  prefetchShardedTransfers(second.ops, second.table);
  EXPECT_EQ(second.names(), (std::vector<std::string>{"g_emb", "g0", "emb", "g1", "c0", "c1"}));
  EXPECT_EQ(second.spans(), (std::vector<int>{0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(second.names(), fresh.names());
  EXPECT_EQ(second.spans(), fresh.spans());
}

TEST(ShardedPrefetch, ListWithoutShardedTransfersIsUnchanged) {
  Fixture f;
  f.compute("a", 1);
  f.compute("b", 2);
  f.ops.front().overlap_ops = 1;
  const OpList before = f.ops;
  prefetchShardedTransfers(f.ops, f.table);
  ASSERT_EQ(f.ops.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(f.ops[i].name, before[i].name);
    EXPECT_EQ(f.ops[i].overlap_ops, before[i].overlap_ops);
  }
}

}  // namespace
}  // namespace evsim

// Dedup and counts: identical layers, micro-batches, replicas and TP ranks collapse into one event
// whose count grows exactly as worked out by hand; different shapes stay apart.
//
// Counting convention (plan/iteration_plan.h): count = executions over all devices; an op of the
// per-micro-batch lists runs m times on each of the M*D devices of its stage; a collective counts
// once per participating rank; a P2P transfer twice (send + receive).

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "events/event_file.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::countOf;

// Tiny model: h=64, a=4, f=256, s=32, vocabulary 512 (a multiple of 128*2, so no padding at M=2).
ModelConfig tiny(int layers) { return test::model(64, 4, 256, 32, 512, layers); }

std::map<std::string, int64_t> countsBySignature(const IterationPlan& plan) {
  std::map<std::string, int64_t> out;
  for (const UniqueEvent& u : plan.events.events()) out[u.signature] = u.count;
  return out;
}

// Events that run once per iteration (optimizer step, DP gradient all-reduce), not per micro-batch.
std::set<int> perIterationEvents(const IterationPlan& plan) {
  std::set<int> out;
  for (const StagePlan& s : plan.stages) {
    for (const OpInstance& op : s.optimizer) out.insert(op.event);
    if (s.dp_allreduce >= 0) out.insert(s.dp_allreduce);
    for (const GradBucket& b : s.dp_buckets) out.insert(b.event);
  }
  return out;
}

TEST(Dedup, TinyCountsByHand) {
  // 2M1P2D, b=2, B=8: m = 8/(2*2) = 2 micro-batches, M*D = 4 devices, T = 2*32 = 64 tokens.
  IterationPlan plan =
      buildIterationPlan(tiny(2), test::cluster(8), test::strategy("2M1P2D", 2, 8));
  ASSERT_EQ(plan.micro_batches, 2);
  const auto& t = plan.events;
  // QKV forward: 2 layers * m 2 * M 2 * D 2 = 16.  n = 3h/M = 96.
  EXPECT_EQ(countOf(t, "gemm m=64 n=96 k=64 layout=nt dtype=fp16"), 16);
  // Scores batched GEMM (b*a/M = 4 heads, s x s, k = d = 16): forward scores + backward dP = dC V^T
  // share the signature: 2 per layer -> 2 * 16 = 32.
  EXPECT_EQ(countOf(t, "bgemm batch=4 m=32 n=32 k=16 layout=nt dtype=fp16"), 32);
  // LM head forward (vocabulary shard 256): once per micro-batch per device on the last stage = 8.
  EXPECT_EQ(countOf(t, "gemm m=64 n=256 k=64 layout=nt dtype=fp16"), 8);
  // TP all-reduce of T*h fp16 = 64*64*2 = 8192 B: 4 per block (2 forward, 2 backward) + the
  // embedding's + the LM head input gradient's = 10 per micro-batch per device -> 10 * 8 = 80.
  // One node of 8 GPUs: the group of 2 is intra-node.
  EXPECT_EQ(countOf(t, "allreduce bytes=8192 group=2 nodes=1 rpn=2 dtype=fp16"), 80);
  // Vocab-parallel cross-entropy: 3 fp32 all-reduces of one value per token (64*4 = 256 B) -> 24.
  EXPECT_EQ(countOf(t, "allreduce bytes=256 group=2 nodes=1 rpn=2 dtype=fp32"), 24);
  // Per-rank parameters: block 4h^2/2 + 3h/2 + h + 2hf/2 + f/2 + h + 4h = 8192 + 96 + 64 + 16384 +
  // 128 + 64 + 256 = 25184, two blocks 50368; embedding 256*64 + 32*64 = 18432; final layernorm
  // 2h = 128 (no second LM head copy with P = 1): 68928. Adam once per device: 4.
  EXPECT_EQ(countOf(t, "adam params=68928 dtype=fp32"), 4);
  // DP gradient all-reduce of 68928 fp16 values = 137856 B over D = 2 (ranks 0,2 / 1,3): 4.
  EXPECT_EQ(countOf(t, "allreduce bytes=137856 group=2 nodes=1 rpn=2 dtype=fp16"), 4);
}

TEST(Dedup, DoublingLayersKeepsUniqueEventsAndDoublesBlockCounts) {
  // P = 1, so no partition choice: 2 blocks vs 4 blocks, 2M1P2D, b=2, B=8 (m=2, M*D=4).
  ClusterConfig cluster = test::cluster(8);
  Strategy s = test::strategy("2M1P2D", 2, 8);
  IterationPlan two = buildIterationPlan(tiny(2), cluster, s);
  IterationPlan four = buildIterationPlan(tiny(4), cluster, s);
  EXPECT_EQ(two.events.size(), four.events.size());

  // Only the optimizer step and the DP gradient all-reduce change (more parameters); every other
  // signature is shared.
  std::set<int> once_two = perIterationEvents(two), once_four = perIterationEvents(four);
  auto a = countsBySignature(two), b = countsBySignature(four);
  for (int i = 0; i < two.events.size(); ++i) {
    if (once_two.count(i)) continue;
    EXPECT_TRUE(b.count(two.events[i].signature)) << two.events[i].signature;
  }
  EXPECT_EQ(once_two.size(), once_four.size());

  // Per block: counts double. QKV: L*m*M*D = 2*2*2*2 = 16 -> 32.
  const std::string qkv = "gemm m=64 n=96 k=64 layout=nt dtype=fp16";
  EXPECT_EQ(a[qkv], 16);
  EXPECT_EQ(b[qkv], 32);
  // TP all-reduce: (4L + 2) * m*M*D: 10*8 = 80 -> 18*8 = 144 (embedding and head do not double).
  const std::string tp_ar = "allreduce bytes=8192 group=2 nodes=1 rpn=2 dtype=fp16";
  EXPECT_EQ(a[tp_ar], 80);
  EXPECT_EQ(b[tp_ar], 144);
  // Outside the blocks: unchanged. LM head 8; cross-entropy all-reduces 24.
  const std::string head = "gemm m=64 n=256 k=64 layout=nt dtype=fp16";
  EXPECT_EQ(a[head], 8);
  EXPECT_EQ(b[head], 8);
  // Op executions: block ops 40 per block (17 forward + 23 backward) at 8 each; embedding 4 + 2,
  // head 6 + 5 ops at 8 each; adam 4; DP all-reduce 4.
  //   L=2: 2*40*8 + 17*8 + 8 = 640 + 136 + 8 = 784;  L=4: 1280 + 136 + 8 = 1424.
  EXPECT_EQ(two.op_executions, 784);
  EXPECT_EQ(four.op_executions, 1424);
}

TEST(Dedup, DoublingGlobalBatchDoublesPerMicroBatchCountsOnly) {
  // 2M2P2D on one 8-GPU node, b=2: B=8 -> m=2, B=16 -> m=4. Same events; every per-micro-batch
  // event (compute, TP all-reduce, P2P) doubles; the optimizer and DP all-reduce stay.
  ClusterConfig cluster = test::cluster(8);
  IterationPlan small = buildIterationPlan(tiny(4), cluster, test::strategy("2M2P2D", 2, 8));
  IterationPlan big = buildIterationPlan(tiny(4), cluster, test::strategy("2M2P2D", 2, 16));
  ASSERT_EQ(small.micro_batches, 2);
  ASSERT_EQ(big.micro_batches, 4);
  ASSERT_EQ(small.events.size(), big.events.size());
  std::set<int> once = perIterationEvents(small);
  EXPECT_EQ(once.size(), 4u);  // adam and DP all-reduce for each of the 2 stages
  for (int i = 0; i < small.events.size(); ++i) {
    SCOPED_TRACE(small.events[i].signature);
    ASSERT_EQ(big.events[i].signature, small.events[i].signature);  // interned in the same order
    int64_t factor = once.count(i) ? 1 : 2;
    EXPECT_EQ(big.events[i].count, factor * small.events[i].count);
  }
  // P2P of T*h fp16 = 64*64*2 = 8192 B between ranks r and r + M*D = r + 4, both on node 0
  // (so 1 node holding both ranks of the pair: rpn 2). m*M*D = 2*2*2 = 8 transfers each way per
  // boundary, each counted twice (send + receive): 2 * 2 * 8 = 32 -> 64.
  const std::string p2p = "p2p bytes=8192 group=2 nodes=1 rpn=2 dtype=fp16";
  EXPECT_EQ(countOf(small.events, p2p), 32);
  EXPECT_EQ(countOf(big.events, p2p), 64);
}

TEST(Dedup, DoublingReplicasDoublesCountsAndOnlyTheDpGroupChanges) {
  // 2M1P2D (B=8) vs 2M1P4D (B=16): m = 2 for both; twice the devices run every op.
  ClusterConfig cluster = test::cluster(8);
  IterationPlan d2 = buildIterationPlan(tiny(2), cluster, test::strategy("2M1P2D", 2, 8));
  IterationPlan d4 = buildIterationPlan(tiny(2), cluster, test::strategy("2M1P4D", 2, 16));
  ASSERT_EQ(d2.events.size(), d4.events.size());
  auto b = countsBySignature(d4);
  for (const UniqueEvent& u : d2.events.events()) {
    if (u.event.kind == EventKind::kCompute ||
        (u.event.kind == EventKind::kAllReduce && u.event.placement.group_size == 2 &&
         u.event.message_bytes != 137856)) {
      // Compute and TP all-reduces: same signature, count doubles (adam too: once per device).
      ASSERT_TRUE(b.count(u.signature)) << u.signature;
      EXPECT_EQ(b[u.signature], 2 * u.count) << u.signature;
    }
  }
  // The DP gradient all-reduce: same bytes, group 2 -> 4 (ranks 0,2,4,6 on node 0); once per rank.
  EXPECT_EQ(countOf(d2.events, "allreduce bytes=137856 group=2 nodes=1 rpn=2 dtype=fp16"), 4);
  EXPECT_EQ(countOf(d4.events, "allreduce bytes=137856 group=4 nodes=1 rpn=4 dtype=fp16"), 8);
  EXPECT_EQ(d4.op_executions, 2 * d2.op_executions);
}

TEST(Dedup, TensorParallelRanksShareOneOpList) {
  // 4M1P1D vs 1M1P1D: the M ranks of a stage run one op list; counts carry the factor M.
  ClusterConfig cluster = test::cluster(8);
  ModelConfig model = test::model(64, 4, 256, 32, 512, 2);  // 512 is a multiple of 128*4
  IterationPlan m1 = buildIterationPlan(model, cluster, test::strategy("1M1P1D", 2, 2));
  IterationPlan m4 = buildIterationPlan(model, cluster, test::strategy("4M1P1D", 2, 2));
  // fc1 forward: n = f/M = 256 (M=1); count = L * m * M = 2 * 1 * 1 = 2.
  EXPECT_EQ(countOf(m1.events, "gemm m=64 n=256 k=64 layout=nt dtype=fp16"), 2);
  // At M=4, f/M = 64 = h: fc1 (T, f/M, h) and fc2 (T, h, f/M) are both 64x64x64 nt and collapse
  // into one event, run 2 ops * L 2 * m 1 * M 4 = 16 times.
  EXPECT_EQ(countOf(m4.events, "gemm m=64 n=64 k=64 layout=nt dtype=fp16"), 16);
  // M=1 has no TP all-reduce at all; M=4 adds 2 per block forward + embedding + 3 cross-entropy.
  int tp_ops_m1 = 0, tp_ops_m4 = 0;
  for (const OpInstance& op : m1.stages[0].forward) tp_ops_m1 += op.stream == Stream::kTpComm;
  for (const OpInstance& op : m4.stages[0].forward) tp_ops_m4 += op.stream == Stream::kTpComm;
  EXPECT_EQ(tp_ops_m1, 0);
  EXPECT_EQ(tp_ops_m4, 2 * 2 + 1 + 3);
  EXPECT_EQ(m4.stages[0].forward.size(), m1.stages[0].forward.size() + 8);
}

TEST(Dedup, DifferentMicroBatchSizesDoNotCollapse) {
  // b=1 vs b=2 change T = b*s in every GEMM (m, n or k) and b*a/M in every batched GEMM.
  ClusterConfig cluster = test::cluster(8);
  IterationPlan b1 = buildIterationPlan(tiny(2), cluster, test::strategy("2M1P1D", 1, 4));
  IterationPlan b2 = buildIterationPlan(tiny(2), cluster, test::strategy("2M1P1D", 2, 4));
  std::set<std::string> gemms1, gemms2;
  for (const UniqueEvent& u : b1.events.events()) {
    if (u.event.op == "gemm" || u.event.op == "bgemm") gemms1.insert(u.signature);
  }
  for (const UniqueEvent& u : b2.events.events()) {
    if (u.event.op == "gemm" || u.event.op == "bgemm") gemms2.insert(u.signature);
  }
  // Per block: 4 forward GEMMs + 8 backward + 3 distinct batched; LM head: 3 GEMMs. 18 each.
  EXPECT_EQ(gemms1.size(), 18u);
  EXPECT_EQ(gemms2.size(), 18u);
  for (const std::string& sig : gemms1) EXPECT_FALSE(gemms2.count(sig)) << sig;
  EXPECT_TRUE(gemms1.count("gemm m=32 n=96 k=64 layout=nt dtype=fp16"));           // T = 32
  EXPECT_TRUE(gemms2.count("gemm m=64 n=96 k=64 layout=nt dtype=fp16"));           // T = 64
  EXPECT_TRUE(gemms1.count("bgemm batch=2 m=32 n=32 k=16 layout=nt dtype=fp16"));  // 1*4/2
  EXPECT_TRUE(gemms2.count("bgemm batch=4 m=32 n=32 k=16 layout=nt dtype=fp16"));  // 2*4/2
}

// The done-when: BERT-Large 2M2P4D on a40-4x4 (4 nodes x 4 GPUs), b=4, B=64.
TEST(Dedup, BertLarge2M2P4DCollapsesIntoFortyEvents) {
  ModelConfig model = loadModelConfig(test::configPath("models", "bert-large"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "a40-4x4"));
  IterationPlan plan = buildIterationPlan(model, cluster, test::strategy("2M2P4D", 4, 64));
  // m = 64 / (4*4) = 4; T = 4*512 = 2048; vocabulary 30522 padded to a multiple of 256 = 30720,
  // shard 15360; b*a/M = 32 heads per rank.
  ASSERT_EQ(plan.micro_batches, 4);
  ASSERT_EQ(plan.padded_vocab, 30720);

  // Op executions. Per block per micro-batch per device: forward 17 ops (attention 10 incl. its
  // all-reduce, MLP 7), backward 23 (MLP 9, attention 14) = 40; m*M*D = 4*2*4 = 32 devices x
  // micro-batches -> 24 * 40 * 32 = 30720. Embedding 4 + 2 and head 6 + 5 ops: 17 * 32 = 544.
  // Adam and DP all-reduce once per device: 16 + 16. P2P: one boundary, m*M*D = 32 transfers each
  // way, each counted twice: 128. Total 30720 + 544 + 32 + 128 = 31424.
  EXPECT_EQ(plan.op_executions, 31424);
  // Unique: 35 compute (12 forward block shapes, 14 new backward ones, 2 embedding, 5 head, 2 adam
  // steps with different stage sizes) + 5 communication (listed below) = 40.
  EXPECT_EQ(plan.events.size(), 40);
  EXPECT_GT(plan.op_executions, 1000);
  EXPECT_LT(plan.events.size(), 60);

  // Stage split: a block costs c ~ 83.8 GFLOP per rank (forward + backward); the head adds the LM
  // head's 3 * 2*2048*15360*1024 = 193 GFLOP ~ 2.3c. 12/12 -> 14.3c, 13/11 -> max(13c, 13.3c),
  // 14/10 -> 14c: 13 blocks on stage 0, 11 on stage 1.
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].num_layers, 13);
  EXPECT_EQ(plan.stages[1].first_layer, 13);
  EXPECT_EQ(plan.stages[1].num_layers, 11);

  // Communication events and where they sit. rank = tp + 2*(dp + 4*pp), node = rank / 4.
  std::map<std::string, std::string> scope;
  int comm = 0;
  for (const UniqueEvent& u : plan.events.events()) {
    if (!isCommunication(u.event.kind)) continue;
    ++comm;
    scope[u.signature] = std::string(scopeName(u.event.placement));
  }
  EXPECT_EQ(comm, 5);
  // TP pair {2k, 2k+1} is inside one node: T*h*2 B = 2048*1024*2 = 4194304 B. 4 per block + 1
  // (embedding) + 1 (LM head input gradient) = 98 per micro-batch per device: 98*32 = 3136.
  const std::string tp_ar = "allreduce bytes=4194304 group=2 nodes=1 rpn=2 dtype=fp16";
  EXPECT_EQ(scope[tp_ar], "intra");
  EXPECT_EQ(countOf(plan.events, tp_ar), 3136);
  // Cross-entropy: 3 fp32 all-reduces of 2048 values = 8192 B on the last stage: 3*32 = 96.
  const std::string ce_ar = "allreduce bytes=8192 group=2 nodes=1 rpn=2 dtype=fp32";
  EXPECT_EQ(scope[ce_ar], "intra");
  EXPECT_EQ(countOf(plan.events, ce_ar), 96);
  // DP group of stage 0, tp 0: ranks 0,2,4,6 on nodes 0,0,1,1 -> 2 nodes, 2 ranks per node.
  // Per-rank block parameters: 4h^2/2 + 3h/2 + h + 2hf/2 + f/2 + h + 4h = 6301184.
  // Stage 0: 13 blocks + embedding (15360*1024 + 512*1024) = 81915392 + 16252928 = 98168320
  // params -> 196336640 B. Stage 1: 11 blocks + final layernorm + tied LM head copy
  // (2*1024 + 15360*1024) = 69313024 + 15730688 = 85043712 -> 170087424 B. Once per rank: 8 each.
  const std::string dp0 = "allreduce bytes=196336640 group=4 nodes=2 rpn=2 dtype=fp16";
  const std::string dp1 = "allreduce bytes=170087424 group=4 nodes=2 rpn=2 dtype=fp16";
  EXPECT_EQ(scope[dp0], "inter");
  EXPECT_EQ(scope[dp1], "inter");
  EXPECT_EQ(countOf(plan.events, dp0), 8);
  EXPECT_EQ(countOf(plan.events, dp1), 8);
  EXPECT_EQ(countOf(plan.events, "adam params=98168320 dtype=fp32"), 8);
  EXPECT_EQ(countOf(plan.events, "adam params=85043712 dtype=fp32"), 8);
  // Stage 0 ranks 0..7 (nodes 0, 1) send to rank + 8 (nodes 2, 3): inter-node, T*h*2 B.
  const std::string p2p = "p2p bytes=4194304 group=2 nodes=2 rpn=1 dtype=fp16";
  EXPECT_EQ(scope[p2p], "inter");
  EXPECT_EQ(countOf(plan.events, p2p), 128);
  // Block GEMMs collapse over 24 layers, 4 micro-batches, 2 TP ranks and 4 replicas: QKV 768.
  EXPECT_EQ(countOf(plan.events, "gemm m=2048 n=1536 k=1024 layout=nt dtype=fp16"), 768);
}

}  // namespace
}  // namespace evsim

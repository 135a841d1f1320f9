// Context parallelism's --cp-comm-type (ops/cp_comm.h): the bytes each variant exchanges per layer
// and the attention calls it runs, worked by hand on tiny-llama; the exposed CP time of each on a
// hand-traced timeline; the groups the collectives run over; the memory of the gathered K/V; and
// the refusals Megatron and Transformer Engine make.
#include <gtest/gtest.h>

#include <string>

#include "modeler/memory_components.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "plan/rank_layout.h"
#include "support/cp_tiny_llama.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::cpStrategy;
using test::tinyLlama;

struct CpOp {
  std::string name;
  EventKind kind;
  int64_t bytes;
  int group;
  bool overlapped;
};

// Layer 1's CP ops in order, forward or backward.
std::vector<CpOp> cpOps(const IterationPlan& plan, bool backward) {
  std::vector<CpOp> out;
  for (const OpInstance& op : backward ? plan.stages[0].backward : plan.stages[0].forward) {
    if (op.layer != 1 || op.stream != Stream::kCpComm) continue;
    const Event& e = test::eventOf(plan, op);
    out.push_back({std::string(op.name), e.kind, e.message_bytes, e.placement.group_size,
                   op.overlap_ops > 0});
  }
  return out;
}

// Sum of the attention calls' FLOPs in layer 1's forward.
double attentionFlops(const IterationPlan& plan) {
  double flops = 0;
  for (const OpInstance& op : plan.stages[0].forward) {
    if (op.layer != 1 || op.name.find("flash_attention") != 0) continue;
    flops += test::eventOf(plan, op).flops;
  }
  return flops;
}

// b = 2, C = 4: each rank holds T = 2 x 32 / 4 = 16 tokens: Q (and O) q = 4 B x 8 rows (b x 4
// heads) x 8 tokens x 16 = 4096 bytes; K (or V) k = 4 x (2 x 2) x 8 x 16 = 2048.
TEST(CpCommType, AllGatherMovesTheWholeKAndVByHand) {
  const IterationPlan plan =
      buildIterationPlan(tinyLlama(), test::cluster(2, 2), cpStrategy(4, CpComm::kAllGather));
  // Forward: K and V gathered, C k = 8192 bytes each (nccl-tests' size: the gathered buffer),
  // exposed; backward: the same gathers, then dK and dV reduce-scattered (8192 each).
  const std::vector<CpOp> fwd = cpOps(plan, false), bwd = cpOps(plan, true);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].name, "cp_k_allgather");
  EXPECT_EQ(fwd[1].name, "cp_v_allgather");
  for (const CpOp& op : fwd) {
    EXPECT_EQ(op.kind, EventKind::kAllGather);
    EXPECT_EQ(op.bytes, 8192);
    EXPECT_EQ(op.group, 4);
    EXPECT_FALSE(op.overlapped);
  }
  ASSERT_EQ(bwd.size(), 4u);
  EXPECT_EQ(bwd[0].kind, EventKind::kAllGather);
  EXPECT_EQ(bwd[1].kind, EventKind::kAllGather);
  EXPECT_EQ(bwd[2].name, "cp_dk_reduce_scatter");
  EXPECT_EQ(bwd[2].kind, EventKind::kReduceScatter);
  EXPECT_EQ(bwd[3].kind, EventKind::kReduceScatter);
  for (const CpOp& op : bwd) EXPECT_EQ(op.bytes, 8192);
  // The 4 CP ranks of 2 GPUs per node: the group spans 2 nodes, 2 on each.
  const OpInstance& gather = test::findOp(plan.stages[0].forward, "cp_k_allgather", 1);
  EXPECT_EQ(test::eventOf(plan, gather).placement.nodes, 2);
  EXPECT_EQ(test::eventOf(plan, gather).placement.ranks_per_node, 2);
  // The rank's C = 4 causal blocks of its 8 queries (8 query rows, 4 K/V rows), as the ring's.
  EXPECT_EQ(test::dimValues(test::eventOf(plan, test::findOp(plan.stages[0].forward,
                                                              "flash_attention", 1))),
            (std::vector<int64_t>{8, 4, 8, 16, 1}));
  EXPECT_EQ(test::countOps(plan.stages[0].forward, "flash_attention_gathered_block"), 4 * 3);
  // Per rank on the wire, forward: (C-1)/C of each gathered buffer, 2 x 6144 bytes; the ring
  // sends 3 x 4096 = 12288: the same, and all of it exposed here.
}

TEST(CpCommType, A2aScattersHeadsAndRunsTheWholeSequence) {
  // C = 2 (tiny-llama's 2 K/V heads allow no more): T = 32 tokens, q = 4 x 8 x 16 x 16 = 8192,
  // k = 4 x 4 x 16 x 16 = 4096.
  const IterationPlan plan =
      buildIterationPlan(tinyLlama(), test::cluster(2, 2), cpStrategy(2, CpComm::kA2a));
  const std::vector<CpOp> fwd = cpOps(plan, false), bwd = cpOps(plan, true);
  ASSERT_EQ(fwd.size(), 4u);
  const std::vector<std::string> fwd_names = {"cp_q_a2a", "cp_k_a2a", "cp_v_a2a", "cp_out_a2a"};
  const std::vector<int64_t> fwd_bytes = {8192, 4096, 4096, 8192};
  for (size_t i = 0; i < fwd.size(); ++i) {
    EXPECT_EQ(fwd[i].name, fwd_names[i]);
    EXPECT_EQ(fwd[i].kind, EventKind::kAllToAll);
    EXPECT_EQ(fwd[i].bytes, fwd_bytes[i]);
    EXPECT_EQ(fwd[i].group, 2);
    EXPECT_FALSE(fwd[i].overlapped);
  }
  ASSERT_EQ(bwd.size(), 4u);
  const std::vector<std::string> bwd_names = {"cp_dout_a2a", "cp_dq_a2a", "cp_dk_a2a", "cp_dv_a2a"};
  const std::vector<int64_t> bwd_bytes = {8192, 8192, 4096, 4096};
  for (size_t i = 0; i < bwd.size(); ++i) {
    EXPECT_EQ(bwd[i].name, bwd_names[i]);
    EXPECT_EQ(bwd[i].bytes, bwd_bytes[i]);
  }
  // One causal call over the whole 32 tokens on (b x 4 heads) / 2 = 4 query rows, 2 K/V rows.
  EXPECT_EQ(test::countOps(plan.stages[0].forward, "flash_attention"), 4);  // one per layer
  EXPECT_EQ(test::countOps(plan.stages[0].forward, "flash_attention_ring_step"), 0);
  EXPECT_EQ(test::dimValues(test::eventOf(plan, test::findOp(plan.stages[0].forward,
                                                              "flash_attention", 1))),
            (std::vector<int64_t>{4, 2, 32, 16, 1}));
}

TEST(CpCommType, HierarchicalA2aThenRingByHand) {
  // C = 4 as A = 2 (a2a) x R = 2 (ring). q = 4096, k = 2048 (T = 16). The a2a over CP ranks
  // {0, 1} (one node of 2 GPUs), the ring between CP ranks 0 and 2 (two nodes).
  const IterationPlan plan =
      buildIterationPlan(tinyLlama(), test::cluster(2, 2), cpStrategy(4, CpComm::kA2aP2p, 2));
  const std::vector<CpOp> fwd = cpOps(plan, false), bwd = cpOps(plan, true);
  ASSERT_EQ(fwd.size(), 5u);  // q, k, v a2a; one ring exchange (R - 1); out a2a
  EXPECT_EQ(fwd[0].bytes, 4096);
  EXPECT_EQ(fwd[1].bytes, 2048);
  EXPECT_EQ(fwd[2].bytes, 2048);
  EXPECT_EQ(fwd[3].name, "cp_kv_exchange");
  EXPECT_EQ(fwd[3].kind, EventKind::kP2P);
  EXPECT_EQ(fwd[3].bytes, 2 * 2048);  // K and V of s/R = 16 tokens on 2 of 4 K/V rows
  EXPECT_TRUE(fwd[3].overlapped);
  EXPECT_EQ(fwd[4].name, "cp_out_a2a");
  EXPECT_EQ(fwd[0].group, 2);
  // dout a2a; beside step 0 K and V, beside step 1 (the last) dK and dV; dq, dk, dv a2a.
  ASSERT_EQ(bwd.size(), 6u);
  EXPECT_EQ(bwd[1].bytes, 2 * 2048);
  EXPECT_EQ(bwd[2].bytes, 2 * 2048);
  EXPECT_EQ(bwd[3].name, "cp_dq_a2a");
  const OpInstance& a2a = test::findOp(plan.stages[0].forward, "cp_q_a2a", 1);
  EXPECT_EQ(test::eventOf(plan, a2a).placement.nodes, 1);
  const OpInstance& ring = test::findOp(plan.stages[0].forward, "cp_kv_exchange", 1);
  EXPECT_EQ(test::eventOf(plan, ring).placement.nodes, 2);
  // R = 2 causal steps of s/R = 16 queries on 8 / A = 4 query rows and 2 K/V rows.
  EXPECT_EQ(test::dimValues(test::eventOf(plan, test::findOp(plan.stages[0].forward,
                                                              "flash_attention", 1))),
            (std::vector<int64_t>{4, 2, 16, 16, 1}));
}

TEST(CpCommType, RingBackwardSendsWhatTransformerEngineSends) {
  // TE's AttnFuncWithCPAndKVP2P.backward (context_parallel.py, not fp8): its p2p buffers are
  // [2, K|V] (the K/V block and the running dK/dV sums, 2k each) and step i of C sends
  // buffer[0] (K, V) at i = 0, the whole buffer (K, V, dK, dV) at 0 < i < C - 1 and buffer[1]
  // (dK, dV) at i = C - 1, each beside step i. C = 4, k = 2048: 4096, 8192, 8192, 4096 bytes
  // (4k (C - 1) = 24576 in all); the forward's C - 1 = 3 K/V blocks of 2k = 4096.
  const IterationPlan plan =
      buildIterationPlan(tinyLlama(), test::cluster(2, 2), cpStrategy(4, CpComm::kP2p));
  std::vector<int64_t> fwd_bytes, bwd_bytes;
  for (const CpOp& op : cpOps(plan, false)) fwd_bytes.push_back(op.bytes);
  for (const CpOp& op : cpOps(plan, true)) {
    EXPECT_EQ(op.name, "cp_kv_grad_exchange");
    EXPECT_TRUE(op.overlapped);
    bwd_bytes.push_back(op.bytes);
  }
  EXPECT_EQ(fwd_bytes, (std::vector<int64_t>{4096, 4096, 4096}));
  EXPECT_EQ(bwd_bytes, (std::vector<int64_t>{4096, 8192, 8192, 4096}));
  // Each backward exchange right before its step's attention call.
  const OpList& backward = plan.stages[0].backward;
  int steps = 0;
  for (size_t i = 0; i + 1 < backward.size(); ++i) {
    if (backward[i].layer != 1 || backward[i].name != "cp_kv_grad_exchange") continue;
    EXPECT_EQ(backward[i + 1].name,
              steps++ == 0 ? "flash_attention_bwd" : "flash_attention_ring_step_bwd");
  }
  EXPECT_EQ(steps, 4);
}

TEST(CpCommType, EveryVariantRunsTheSameAttentionWork) {
  // s^2 (a/t) d / C multiply-adds per rank and b (QK^T and PV over the causal half), forward:
  // 4 x b a d s^2 / (2 C) FLOPs = 4 x 8 x 16 x 32^2 / (2 C) = 262144 / C.
  const ModelConfig model = tinyLlama();
  const ClusterConfig cluster = test::cluster(2, 2);
  for (const Strategy& s : {cpStrategy(4, CpComm::kP2p), cpStrategy(4, CpComm::kAllGather),
                            cpStrategy(4, CpComm::kA2aP2p, 2)}) {
    EXPECT_DOUBLE_EQ(attentionFlops(buildIterationPlan(model, cluster, s)), 262144.0 / 4)
        << cpCommName(s.cp_comm);
  }
  for (const Strategy& s : {cpStrategy(2, CpComm::kP2p), cpStrategy(2, CpComm::kA2a)}) {
    EXPECT_DOUBLE_EQ(attentionFlops(buildIterationPlan(model, cluster, s)), 262144.0 / 2)
        << cpCommName(s.cp_comm);
  }
}

// Every compute op 1 us, every CP transfer 5 us, nothing else to communicate (M = P = D = 1), one
// micro-batch: the exposed CP time by hand, per variant at C = 2 (4 layers).
Simulation tracedRun(CpComm comm) {
  IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(2), cpStrategy(2, comm));
  std::vector<EventCost> costs;
  for (const UniqueEvent& u : plan.events.events()) {
    costs.push_back(EventCost{u.event.kind == EventKind::kCompute ? 1.0 : 5.0});
  }
  return simulate(std::move(plan), std::move(costs));
}

TEST(CpCommType, ExposedTimeOnAHandTracedCase) {
  // p2p: per layer one exchange forward, beside a 1 us step: 5 - 1 = 4 exposed; and two backward
  // (TE sends beside both steps at C = 2: K/V, then dK/dV), each beside its step and TE's dQ
  // accumulation (ops/cp_ring_copies.h), 1 us each: 5 - 2 = 3 each. 4 x 4 + 4 x 2 x 3 = 40 of
  // 12 x 5 = 60 us.
  const Simulation p2p = tracedRun(CpComm::kP2p);
  EXPECT_DOUBLE_EQ(p2p.summary.mean_device.cp_comm_us, 60.0);
  EXPECT_DOUBLE_EQ(p2p.summary.mean_device.exposed_cp_comm_us, 40.0);
  // allgather: per layer 2 gathers forward, 2 gathers + 2 reduce-scatters backward, all exposed:
  // 4 x 6 x 5 = 120 us.
  const Simulation ag = tracedRun(CpComm::kAllGather);
  EXPECT_DOUBLE_EQ(ag.summary.mean_device.cp_comm_us, 120.0);
  EXPECT_DOUBLE_EQ(ag.summary.mean_device.exposed_cp_comm_us, 120.0);
  // a2a: per layer 4 all-to-alls forward (Q, K, V, O) and 4 backward (dO, dQ, dK, dV): 160 us.
  const Simulation a2a = tracedRun(CpComm::kA2a);
  EXPECT_DOUBLE_EQ(a2a.summary.mean_device.exposed_cp_comm_us, 160.0);
  // The forward task: the ring's is its compute plus 4 per exchange, and 3 more compute ops per
  // layer (TE's K/V packing and two output corrections, ops/cp_ring_copies.h); the others' all of
  // the transfers. Each variant runs as many attention calls at C = 2 but a2a (one per layer).
  const double p2p_fwd = p2p.input.stages[0].forward_us, ag_fwd = ag.input.stages[0].forward_us;
  EXPECT_DOUBLE_EQ(ag_fwd - p2p_fwd, 4 * (2 * 5.0) - 4 * 4.0 - 4 * 3.0);
  EXPECT_DOUBLE_EQ(a2a.input.stages[0].forward_us - p2p_fwd,
                   4 * (4 * 5.0 - 1.0) - 4 * 4.0 - 4 * 3.0);
}

TEST(CpCommType, CommunicationBuffersByVariant) {
  // tiny-llama, b = 2: k = e T g d / t = 4 x (64 / C) x 2 x 16 bytes; q = 4 x (64 / C) x 64.
  const ModelConfig model = tinyLlama();
  // C = 4: k = 2048, q = 4096. p2p: 8k; allgather: 4 C k; a2a+p2p: max(8k, 2 (q + 2k)).
  EXPECT_EQ(tensorContextBufferBytes(model, cpStrategy(4, CpComm::kP2p)), 16384);
  EXPECT_EQ(tensorContextBufferBytes(model, cpStrategy(4, CpComm::kAllGather)), 32768);
  EXPECT_EQ(tensorContextBufferBytes(model, cpStrategy(4, CpComm::kA2aP2p, 2)), 16384);
  // C = 2: k = 4096, q = 8192: a2a 2 (q + 2k) = 32768.
  EXPECT_EQ(tensorContextBufferBytes(model, cpStrategy(2, CpComm::kA2a)), 32768);
}

TEST(CpCommType, RankLayoutGroupsOfTheHierarchy) {
  // M 2, C 8, on 8 GPUs per node: CP index x of (tp 0, dp 0) is rank 2x: CP ranks 0-3 on node 0,
  // 4-7 on node 1. a2a blocks of 4: {0..3} on one node; of 8: two nodes. Ring stride 4 (R = 2):
  // CP 0 <-> 4 crosses nodes; stride 1 within blocks of 2 never does, but the full ring does.
  Strategy s = test::strategy("2M1P1D", 1, 1);
  s.cp = 8;
  const RankLayout layout(s, 8);
  EXPECT_EQ(layout.worstCpBlock(0, 4).nodes, 1);
  EXPECT_EQ(layout.worstCpBlock(0, 4).ranks_per_node, 4);
  EXPECT_EQ(layout.worstCpBlock(0, 8).nodes, 2);
  EXPECT_EQ(layout.worstCpRingPair(0, 4).nodes, 2);
  EXPECT_EQ(layout.worstCpRingPair(0, 1).nodes, 2);
  Strategy small = s;
  small.cp = 4;  // CP ranks on ranks 0, 2, 4, 6: one node
  EXPECT_EQ(RankLayout(small, 8).worstCpRingPair(0, 2).nodes, 1);
}

TEST(CpCommType, RefusalsNameTheRule) {
  const ModelConfig model = tinyLlama();
  const ClusterConfig cluster = test::cluster(2, 2);
  // Transformer Engine: a2a needs the rank's heads divisible by C (2 K/V heads, C = 4).
  const auto a2a = strategyViolation(model, cluster, cpStrategy(4, CpComm::kA2a));
  ASSERT_TRUE(a2a);
  EXPECT_CONTAINS(*a2a, "--cp 4 --cp-comm-type a2a");
  EXPECT_CONTAINS(*a2a, "key/value heads (2/M = 2) divisible by 4");
  // Megatron: a2a+p2p needs the hierarchical sizes.
  const auto hier = strategyViolation(model, cluster, cpStrategy(4, CpComm::kA2aP2p));
  ASSERT_TRUE(hier);
  EXPECT_CONTAINS(*hier, "--hierarchical-context-parallel-sizes");
  // A per-layer list with different types, and an unknown type.
  EXPECT_CONTAINS(test::inputErrorOf([] { parseCpComm("p2p,a2a"); }), "per-layer list");
  EXPECT_CONTAINS(test::inputErrorOf([] { parseCpComm("ring"); }), "unknown type");
  EXPECT_EQ(parseCpComm("all_gather"), CpComm::kAllGather);
  EXPECT_FALSE(strategyViolation(model, cluster, cpStrategy(4, CpComm::kAllGather)));
}

TEST(CpCommType, TechniquesNameTheType) {
  EXPECT_EQ(cpStrategy(4, CpComm::kP2p).techniques(), " cp4");
  EXPECT_EQ(cpStrategy(4, CpComm::kAllGather).techniques(), " cp4(allgather)");
  EXPECT_EQ(cpStrategy(4, CpComm::kAllGather).techniques(Strategy::TechniqueStyle::kShort),
            " cp4(ag)");
  EXPECT_EQ(cpStrategy(4, CpComm::kA2aP2p, 2).techniques(), " cp4(a2a2+p2p)");
}

}  // namespace
}  // namespace evsim

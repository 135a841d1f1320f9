// Issue 30 item 4, the MoE communication as DeepSeek-V3 and Megatron run it: DeepEP's two-hop
// dispatch with node-limited routing (ops/moe_dispatch.h) and the all-to-all / compute overlap
// of fused F&B tasks (Megatron's --overlap-moe-expert-parallel-comm; timing_engine.h). Bytes
// per hop, the pipelined pair's time and the fused task's exposed time worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "modeler/op_offsets.h"
#include "modeler/simulation.h"
#include "modeler/timing_engine.h"
#include "ops/moe_dispatch.h"
#include "plan/iteration_plan.h"
#include "plan/task_graph.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::eventOf;
using test::findOp;

MoeSpec moe(int64_t experts, int64_t k, int64_t groups = 0, int64_t group_topk = 0) {
  MoeSpec m;
  m.num_experts = experts, m.top_k = k;
  m.router_groups = groups, m.router_group_topk = group_topk;
  return m;
}

// 8 experts on 4 nodes x 2 ranks (one expert per rank, two per node), k = 2.
// Node-limited, 4 groups (one per node), 2 per token: L = 2 nodes, a pool of 4 experts.
//   P(a node of the pool gets neither pick) = C(2, 2) / C(4, 2) = 1/6: 2 (1 - 1/6) = 5/3 nodes;
//   P(a rank misses) = C(3, 2) / C(4, 2) = 1/2: 4 ranks x 1/2 = 2 (k distinct experts, one each).
// Unlimited: L = 4, pool 8: P(node misses) = C(6, 2) / C(8, 2) = 15/28: 4 x 13/28 = 13/7 nodes;
//   ranks 8 x (1 - C(7, 2) / C(8, 2)) = 8 x 1/4 = 2.
TEST(DeepEpFanout, NodeLimitedRoutingByHand) {
  const DispatchFanout limited = deepEpFanout(moe(8, 2, 4, 2), 4, 2);
  EXPECT_EQ(limited.reachable_nodes, 2);
  EXPECT_DOUBLE_EQ(limited.nodes_per_token, 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(limited.ranks_per_token, 2.0);
  const DispatchFanout open = deepEpFanout(moe(8, 2), 4, 2);
  EXPECT_EQ(open.reachable_nodes, 4);
  EXPECT_DOUBLE_EQ(open.nodes_per_token, 13.0 / 7.0);
  EXPECT_DOUBLE_EQ(open.ranks_per_token, 2.0);
  // Two groups over four nodes (a group spans 2 nodes), one per token: L = 1 x 4 / 2 = 2.
  EXPECT_EQ(deepEpFanout(moe(8, 2, 2, 1), 4, 2).reachable_nodes, 2);
}

// DeepSeek-V3 at EP 64 = 8 nodes x 8: 256 experts, k = 8, 8 groups, 4 per token: L = 4 nodes of
// 32 experts, pool 128. P(node misses) = prod_{i<8} (96 - i) / (128 - i) = 0.0927473, so
// 4 (1 - 0.0927473) = 3.62901 nodes a token (7/8 of them remote: 3.175 RDMA copies, against 7 of
// the all-to-all's 8 copies); ranks: 32 (1 - prod (124 - i) / (128 - i)) = 32 (1 - 0.770020) =
// 7.35937.
TEST(DeepEpFanout, DeepSeekV3AtEp64) {
  const DispatchFanout f = deepEpFanout(moe(256, 8, 8, 4), 8, 8);
  EXPECT_EQ(f.reachable_nodes, 4);
  EXPECT_NEAR(f.nodes_per_token, 3.62901, 5e-5);
  EXPECT_NEAR(f.ranks_per_token, 7.35937, 5e-5);
  EXPECT_NEAR(missProbability(128, 32, 8), 0.0927473, 5e-7);
}

// A tiny MoE (h = 64, s = 32, b = 1, fp16, 8 GeLU experts, k = 2, 4 groups, 2 per token) on
// 1M1P8D with E = 8 over 4 nodes of 2 GPUs: T = 32 tokens a rank (no SP).
constexpr const char* kTinyMoe =
    "name: tiny-moe\ndtype: fp16\nhidden_size: 64\nnum_heads: 4\nffn_hidden_size: 256\n"
    "seq_length: 32\nvocab_size: 512\nadd_bias_linear: false\nnum_experts: 8\n"
    "moe_router_topk: 2\nmoe_ffn_hidden_size: 128\nmoe_router_num_groups: 4\n"
    "moe_router_group_topk: 2\nlayers:\n  - {type: embedding}\n"
    "  - {type: decoder, count: 4, cross_attention: false}\n  - {type: head}\n";

IterationPlan tinyPlan(MoeDispatcher dispatcher) {
  Strategy st = test::strategy("1M1P8D", 1, 8);
  st.ep = 8;
  st.moe_dispatcher = dispatcher;
  return buildIterationPlan(parseModelConfig(kTinyMoe, "tiny-moe"), test::cluster(2, 4), st);
}

// All-to-all: T k = 64 copies x 64 x 2 bytes = 8,192 over the EP group (8 ranks, 4 nodes, 2 a
// node). DeepEP: the RDMA hop ceil(32 x 5/3) = 54 tokens x 128 bytes = 6,912 over the rail group
// (one rank on each of the 4 nodes), pipelined with the NVLink hop's 32 x 2 = 64 x 128 = 8,192
// inside the node (2 ranks); the same for the combine and both backwards.
TEST(DeepEpOps, BytesPerHopByHand) {
  const IterationPlan a2a = tinyPlan(MoeDispatcher::kAllToAll);
  const Event& all = eventOf(a2a, findOp(a2a.stages[0].forward, "moe_dispatch_alltoall", 0));
  EXPECT_EQ(all.message_bytes, 8'192);
  EXPECT_EQ(all.placement, (Placement{8, 4, 2}));

  const IterationPlan dep = tinyPlan(MoeDispatcher::kDeepEp);
  const StagePlan& s = dep.stages[0];
  EXPECT_EQ(test::countOps(s.forward, "moe_dispatch_alltoall"), 0);
  for (const auto& [list, rdma, nvlink] :
       {std::tuple{&s.forward, "moe_dispatch_rdma", "moe_dispatch_nvlink"},
        std::tuple{&s.forward, "moe_combine_rdma", "moe_combine_nvlink"},
        std::tuple{&s.backward, "moe_combine_rdma_bwd", "moe_combine_nvlink_bwd"},
        std::tuple{&s.backward, "moe_dispatch_rdma_bwd", "moe_dispatch_nvlink_bwd"}}) {
    const OpInstance& r = findOp(*list, rdma, 0);
    const OpInstance& n = findOp(*list, nvlink, 0);
    EXPECT_EQ(eventOf(dep, r).message_bytes, 6'912) << rdma;
    EXPECT_EQ(eventOf(dep, r).placement, (Placement{4, 4, 1})) << rdma;
    EXPECT_TRUE(r.pipelined_with_next && r.overlap_ops == 1) << rdma;
    EXPECT_EQ(eventOf(dep, n).message_bytes, 8'192) << nvlink;
    EXPECT_EQ(eventOf(dep, n).placement, (Placement{2, 1, 2})) << nvlink;
    EXPECT_EQ(&n, &r + 1) << nvlink;  // the NVLink hop right after its RDMA hop
  }
}

// The pipelined pair lasts as long as its longer hop: compute 10, RDMA 7 beside NVLink 4, compute
// 5: 10 + 7 + 5 = 22 (the last compute starts at 17); with NVLink 9 instead, 10 + 9 + 5 = 24.
// Two ordinary overlapping ops of one stream would queue: 10 + 7 + 4 + 5 = 26.
TEST(DeepEpOps, PipelinedHopsCostTheLonger) {
  for (const auto& [nvlink_us, pipelined, expected] :
       {std::tuple{4.0, true, 22.0}, std::tuple{9.0, true, 24.0}, std::tuple{4.0, false, 26.0}}) {
    OpList ops(4);
    const double times[] = {10, 7, nvlink_us, 5};
    for (int i = 0; i < 4; ++i) ops[i].event = i;
    ops[1].stream = ops[2].stream = Stream::kEpComm;
    ops[1].overlap_ops = 1;
    ops[1].pipelined_with_next = pipelined;
    std::vector<double> starts(4);
    const double end = opOffsets(
        ops, [](const OpInstance&) { return true; },
        [&](const OpInstance& op) {
          return std::pair{0.0, times[op.event]};
        },
        [&](size_t i, double t) { starts[i] = t; });
    EXPECT_DOUBLE_EQ(end, expected);
    EXPECT_DOUBLE_EQ(starts[2], pipelined ? 10.0 : 17.0);
  }
}

// The fused task's body: C = 10 of compute beside A = 4 of all-to-all at f = 1.25: the compute
// does 4 / 1.25 = 3.2 of its work while the all-to-all runs, the other 6.8 after: 4 + 6.8 = 10.8
// (= C + A (1 - 1/f)). C = 3: f C = 3.75 <= 4, hidden: 4. f = 1: max(C, A).
TEST(FusedTask, ComputeSlowsBesideTheAllToAll) {
  EXPECT_DOUBLE_EQ(fusedTaskUs(10, 4, 1.25), 10.8);
  EXPECT_DOUBLE_EQ(fusedTaskUs(3, 4, 1.25), 4.0);
  EXPECT_DOUBLE_EQ(fusedTaskUs(10, 4, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(fusedTaskUs(3, 0, 1.25), 3.0);
}

// Megatron's combined 1F1B on the interleaved schedule, P = 2, v = 2, m = 4: every forward its
// device runs right before a backward of another (micro-batch, chunk) is fused with it.
TEST(MoeA2aOverlap, SteadyStateForwardsFuseWithTheNextBackward) {
  const TaskGraph plain = buildTaskGraph(Schedule::kInterleaved, 2, 2, 4);
  const TaskGraph fused = buildTaskGraph(Schedule::kInterleaved, 2, 2, 4, 0, true);
  for (int s = 0; s < 2; ++s) {
    const size_t tasks = static_cast<size_t>(fused.tasks_per_device);
    ASSERT_EQ(plain.tasks_per_device, fused.tasks_per_device);
    int pairs = 0;
    for (size_t i = 0; i < tasks; ++i) {
      const TaskNode& n = fused.nodes[fused.nodeAt(s, i)];
      const TaskNode& p = plain.nodes[plain.nodeAt(s, i)];
      EXPECT_EQ(n.task.phase, p.task.phase);  // the same order, only fused
      EXPECT_EQ(n.task.micro_batch, p.task.micro_batch);
      const bool expect_fused =
          i + 1 < tasks && p.task.phase == Phase::kForward &&
          plain.nodes[plain.nodeAt(s, i + 1)].task.phase == Phase::kBackward;
      if (n.fused_size > 1) {
        ++pairs;
        EXPECT_TRUE(expect_fused);
        EXPECT_EQ(n.fused_size, 2);
        EXPECT_TRUE(fused.nodes[fused.nodeAt(s, i + 1)].task.overlapped);
      }
    }
    EXPECT_GT(pairs, 0);
  }
}

// The fused pair's time by hand: each task F = 2 (1 of it all-to-all), B = 4 (2 of it), factor
// 1.095 (the network's): C = 1 + 2 = 3, A = 1 + 2 = 3, f C = 3.285 > 3, so the pair lasts
// 3 + 3 (1 - 1/1.095) = 3.260274 instead of 6, and 0.260274 of it is overlap slowdown.
TEST(MoeA2aOverlap, FusedPairTimeAndSlowdownByHand) {
  TimingInput in;
  in.schedule = Schedule::kInterleaved;
  in.micro_batches = 4;
  in.virtual_stages = 2;
  in.fuse_moe_a2a = true;
  StageCost cost;
  cost.forward_us = 2, cost.backward_us = 4;
  cost.forward_overlap_us = 1, cost.backward_overlap_us = 2;
  cost.a2a_compute_slowdown = 1.095;
  in.stages.assign(4, cost);
  in.pipelines.push_back(PipelineCost{std::vector<double>(3, 0), std::vector<double>(3, 0), {}});
  const IterationTimeline tl = computeTimeline(in);
  const double pair = 3 + 3 * (1 - 1 / 1.095);
  int fused = 0;
  for (const StageTimeline& st : tl.pipelines[0].stages) {
    for (size_t i = 0; i < st.tasks.size(); ++i) {
      const TaskTiming& t = st.tasks[i];
      const TaskNode& node = tl.graph.nodes[st.node(i)];
      if (node.fused_size == 2) {
        ++fused;
        EXPECT_NEAR(t.run.duration(), pair, 1e-12);
        EXPECT_NEAR(st.overlapSlowdownUs(i), pair - 3, 1e-12);
      } else if (node.fused_size == 1) {
        EXPECT_DOUBLE_EQ(t.run.duration(), node.task.phase == Phase::kForward ? 2.0 : 4.0);
      }
    }
  }
  EXPECT_GT(fused, 0);
  in.fuse_moe_a2a = false;
  EXPECT_LT(tl.iteration_us, computeTimeline(in).iteration_us);
}

// Megatron's rules and what the models need, one line each.
TEST(MoeCommFlags, Refusals) {
  const ModelConfig model = parseModelConfig(kTinyMoe, "tiny-moe");
  const ClusterConfig cluster = test::cluster(2, 4);
  auto why = [&](auto change) {
    Strategy st = test::strategy("1M2P4D", 1, 8);
    st.ep = 4;
    change(st);
    return strategyViolation(model, cluster, st).value_or("");
  };
  EXPECT_NE(why([](Strategy& s) {
              s.moe_dispatcher = MoeDispatcher::kDeepEp, s.ep = 1;
            }).find("--moe-enable-deepep: DeepEP dispatches over the EP group"),
            std::string::npos);
  EXPECT_NE(why([](Strategy& s) {
              s.moe_a2a_overlap = true;
            }).find("modelled in the interleaved schedule"),
            std::string::npos);
  EXPECT_NE(why([](Strategy& s) {
              s.moe_a2a_overlap = true, s.schedule = Schedule::kInterleaved;
              s.virtual_stages = 2, s.recompute = Recompute::kFull;
            }).find("not with full recomputation"),
            std::string::npos);
  EXPECT_EQ(why([](Strategy& s) {
              s.moe_a2a_overlap = true, s.schedule = Schedule::kInterleaved;
              s.virtual_stages = 2, s.moe_dispatcher = MoeDispatcher::kDeepEp;
            }),
            "");
  // EP 4 on nodes of 6 GPUs: neither whole nodes nor inside one.
  Strategy odd = test::strategy("1M1P12D", 1, 12);
  odd.ep = 4, odd.moe_dispatcher = MoeDispatcher::kDeepEp;
  EXPECT_NE(strategyViolation(model, test::cluster(6, 2), odd)
                .value_or("")
                .find("--moe-enable-deepep --ep 4: the EP group must be whole nodes of 6 GPUs"),
            std::string::npos);
}

// The model file's groups: both or neither, dividing the experts, holding k.
TEST(MoeCommFlags, RouterGroupKeys) {
  const std::string base =
      "name: m\ndtype: fp16\nhidden_size: 64\nnum_heads: 4\nffn_hidden_size: 256\n"
      "seq_length: 32\nvocab_size: 512\nnum_experts: 8\nmoe_router_topk: 4\n"
      "layers:\n  - {type: embedding}\n  - {type: decoder, count: 1, cross_attention: false}\n  - "
      "{type: head}\n";
  auto with = [&](const std::string& extra) { return extra + base; };
  EXPECT_THROW(parseModelConfig(with("moe_router_num_groups: 4\n"), "m"), InputError);
  EXPECT_THROW(parseModelConfig(with("moe_router_num_groups: 3\nmoe_router_group_topk: 1\n"), "m"),
               InputError);
  EXPECT_THROW(parseModelConfig(with("moe_router_num_groups: 4\nmoe_router_group_topk: 1\n"), "m"),
               InputError);  // 1 group of 2 experts cannot hold k = 4
  const ModelConfig ok =
      parseModelConfig(with("moe_router_num_groups: 4\nmoe_router_group_topk: 2\n"), "m");
  EXPECT_EQ(ok.moe.router_groups, 4);
  EXPECT_EQ(ok.moe.router_group_topk, 2);
}

}  // namespace
}  // namespace evsim

// Transformer Engine's ring-attention copies and merges (ops/cp_ring_copies.h): the bytes of each
// kernel on tiny-llama by hand, and their per-layer totals against a transliteration of TE's
// branches (context_parallel.py's causal, non-fp8 sbhd path: Megatron's layout, whose halves are
// views), walked for every rank of the ring
// and averaged; the backward's exchange beside its step and dQ accumulation only (a timeline by
// hand); none under FSDP (PyTorch's ring) or without CP.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "modeler/op_offsets.h"
#include "plan/iteration_plan.h"
#include "support/cp_tiny_llama.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::cpStrategy;
using test::tinyLlama;

struct Bytes {
  double read = 0, write = 0;
  void add(double r, double w) { read += r, write += w; }
};

// Layer 1's memory_pass ops whose name starts with "cp_", summed by name.
std::map<std::string, Bytes> cpCopies(const IterationPlan& plan, bool backward) {
  std::map<std::string, Bytes> out;
  for (const OpInstance& op : backward ? plan.stages[0].backward : plan.stages[0].forward) {
    if (op.layer != 1 || op.name.rfind("cp_", 0) != 0) continue;
    const Event& e = test::eventOf(plan, op);
    if (e.kind != EventKind::kCompute) continue;
    const std::vector<int64_t> dims = test::dimValues(e);  // read_bytes, write_bytes
    out[std::string(op.name)].add(double(dims[0]), double(dims[1]));
  }
  return out;
}

Bytes total(const std::map<std::string, Bytes>& ops) {
  Bytes sum;
  for (const auto& [name, b] : ops) sum.add(b.read, b.write);
  return sum;
}

// TE's forward on rank r of R (AttnFuncWithCPAndKVP2P.forward, causal): the send buffer's cat,
// the output corrections after the loop.
Bytes teForward(int R, int r, double q, double k) {
  Bytes b;
  b.add(2 * k, 2 * k);  // torch.cat((k.view(-1), v.view(-1)))
  // The steps' halves (k_part[0], q_part[1] of [2, s/2C, b, h, d]) are contiguous views: no copy.
  b.add(q, q);  // flash_attn_fwd_out_correction_init on step 0
  for (int i = 1; i < R; ++i) {
    if (i <= r) b.add(2 * q, q);  // out.add_(out_per_step * exp(...)): out and O_i read
    else b.add(q, q / 2);  // the second-half correction
  }
  return b;
}

// TE's backward on rank r of R (AttnFuncWithCPAndKVP2P.backward, causal, not fp8).
Bytes teBackward(int R, int r, double q, double k) {
  Bytes b;
  b.add(2 * k, 2 * k);  // p2p_comm_buffers[0][0].copy_(kv)
  for (int i = 0; i < R; ++i) {
    // The steps' inputs (K, V halves; Q, O, dO halves) are views under sbhd: no copy.
    // dq (an add reads both operands, writes one; a copy reads and writes one)
    if (i > R - r - 1) {
      b.add(2 * q, q);
    } else if (i == R - r - 1) {
      if (r == R - 1) b.add(q, q);
      else b.add(q / 2 + q, q);  // dq[0].copy_(dq_[0]), dq[1].add_(dq_[1])
    } else if (i > 0) {
      b.add(q, q / 2);  // dq[1].add_(dq_)
    } else {
      b.add(q / 2, q / 2);  // dq[1].copy_(dq_)
    }
    // dk and dv
    for (int t = 0; t < 2; ++t) {
      if (i == R - 1) {
        if (r == 0) b.add(k + k / 2, k);  // dk[0].add_(dk_[0]), dk[1].copy_(dk_[1])
        else b.add(2 * k, k);
      } else if (i >= R - r - 1) {
        if (i == 0 && r == R - 1) b.add(k / 2, k / 2);  // dk[0].copy_(dk_)
        else b.add(k, k / 2);  // dk[0].add_(dk_)
      } else if (i > 0) {
        b.add(2 * k, k);
      } else {
        b.add(k, k);
      }
    }
  }
  return b;
}

Bytes meanOverRanks(int R, double q, double k, bool backward) {
  Bytes mean;
  for (int r = 0; r < R; ++r) {
    const Bytes b = backward ? teBackward(R, r, q, k) : teForward(R, r, q, k);
    mean.add(b.read / R, b.write / R);
  }
  return mean;
}

TEST(CpRingCopies, EachKernelByHandAtTwoRanks) {
  // C = 2: T = 2 x 32 / 2 = 32 tokens; q = 4 B x 8 rows (b x 4 heads) x 16 x 16 = 8192,
  // k = 4 x 4 x 16 x 16 = 4096.
  const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(2), cpStrategy(2));
  const auto fwd = cpCopies(plan, false), bwd = cpCopies(plan, true);
  ASSERT_EQ(fwd.size(), 3u);
  EXPECT_EQ(fwd.at("cp_kv_pack").read, 8192);  // 2k
  EXPECT_EQ(fwd.at("cp_out_correction_init").write, 8192);
  // Step 1's correction: rank 0 the second half (reads 4096 + 4096, writes 4096), rank 1 all of
  // it (reads 16384, writes 8192): mean 12288 read, 6144 written.
  EXPECT_EQ(fwd.at("cp_out_correction").read, 12288);
  EXPECT_EQ(fwd.at("cp_out_correction").write, 6144);
  ASSERT_EQ(bwd.size(), 4u);
  EXPECT_EQ(bwd.at("cp_kv_grad_buffer").write, 8192);
  // dQ: rank 0 copies a half then copies one half and adds the other (2q read, 1.5q written),
  // rank 1 copies then adds the whole (3q, 2q): mean 2.5q = 20480 read, 1.75q = 14336 written.
  EXPECT_EQ(bwd.at("cp_dq_accumulate").read, 20480);
  EXPECT_EQ(bwd.at("cp_dq_accumulate").write, 14336);
  // dK: rank 0 a copy then half add + half copy (2.5k, 2k), rank 1 a half copy then an add
  // (2.5k, 1.5k): mean 10240 read, 7168 written; dV the same.
  EXPECT_EQ(bwd.at("cp_dk_accumulate").read, 10240);
  EXPECT_EQ(bwd.at("cp_dk_accumulate").write, 7168);
  EXPECT_EQ(bwd.at("cp_dv_accumulate").write, 7168);
  // Three accumulations per step, one per layer of each other kernel: 4 layers.
  EXPECT_EQ(test::countOps(plan.stages[0].backward, "cp_dq_accumulate"), 2 * 4);
  EXPECT_EQ(test::countOps(plan.stages[0].forward, "cp_out_correction"), 1 * 4);
}

TEST(CpRingCopies, TotalsMatchTransformerEnginesBranchesOnEveryRank) {
  // C = 4 (ring 4): T = 16, q = 4 x 8 x 8 x 16 = 4096, k = 4 x 4 x 8 x 16 = 2048; and the ring of
  // a2a+p2p (A = 2, R = 2): s/R = 16 tokens on 2 of 4 query heads, the same q and k bytes.
  struct Case {
    Strategy strategy;
    int ring;
  };
  for (const Case& c : {Case{cpStrategy(4), 4}, Case{cpStrategy(4, CpComm::kA2aP2p, 2), 2}}) {
    const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(4), c.strategy);
    for (bool backward : {false, true}) {
      const Bytes want = meanOverRanks(c.ring, 4096, 2048, backward);
      const Bytes got = total(cpCopies(plan, backward));
      EXPECT_DOUBLE_EQ(got.read, want.read) << c.ring << (backward ? " backward" : " forward");
      EXPECT_DOUBLE_EQ(got.write, want.write) << c.ring << (backward ? " backward" : " forward");
    }
  }
}

// TE's backward step i: its exchange issued, the attention call, dq.add_, then "wait until dKV is
// received" before the dK/dV adds into the received running sums. Layer 1's ring at C = 2 timed
// by op_offsets.h's rule with times by hand: buffer 1, exchange 30, each step 10, dQ 2, dK 3,
// dV 4 (us). Buffer [0, 1]; exchange 0 (K/V) [1, 31] beside step 0 [1, 11] and dQ [11, 13]; dK
// waits for it: [31, 34], dV [34, 38]; exchange 1 (dK/dV, TE's last step) [38, 68] beside step 1
// [38, 48] and dQ [48, 50]; dK waits: [68, 71], dV [71, 75].
TEST(CpRingCopies, BackwardDqAccumulationRunsBesideTheKvGradExchange) {
  const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(2), cpStrategy(2));
  const OpList& backward = plan.stages[0].backward;
  OpList ring;
  for (const OpInstance& op : backward) {
    const bool ring_op = op.name.rfind("cp_", 0) == 0 || op.name.rfind("flash_attention", 0) == 0;
    if (op.layer == 1 && ring_op) ring.push_back(op);
  }
  const std::vector<std::string> names = {
      "cp_kv_grad_buffer", "cp_kv_grad_exchange", "flash_attention_bwd",
      "cp_dq_accumulate",  "cp_dk_accumulate",    "cp_dv_accumulate",
      "cp_kv_grad_exchange", "flash_attention_ring_step_bwd", "cp_dq_accumulate",
      "cp_dk_accumulate", "cp_dv_accumulate"};
  ASSERT_EQ(ring.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(ring[i].name, names[i]) << i;
  EXPECT_EQ(ring[1].overlap_ops, 2);
  EXPECT_EQ(ring[6].overlap_ops, 2);
  const std::map<std::string, double> times = {
      {"cp_kv_grad_buffer", 1},   {"cp_kv_grad_exchange", 30}, {"flash_attention_bwd", 10},
      {"flash_attention_ring_step_bwd", 10}, {"cp_dq_accumulate", 2}, {"cp_dk_accumulate", 3},
      {"cp_dv_accumulate", 4}};
  std::vector<double> starts(ring.size());
  const double end = opOffsets(
      ring, [](const OpInstance&) { return true; },
      [&](const OpInstance& op) { return std::pair{0.0, times.at(std::string(op.name))}; },
      [&](size_t i, double t) { starts[i] = t; });
  EXPECT_EQ(starts, (std::vector<double>{0, 1, 1, 11, 31, 34, 38, 38, 48, 68, 71}));
  EXPECT_DOUBLE_EQ(end, 75);
}

TEST(CpRingCopies, EachBackwardExchangeRunsBesideItsStepAndDqAccumulationOnly) {
  // C = 4 (four backward exchanges a layer, one beside each step) and the ring of a2a+p2p (two);
  // the forward's exchanges feed their step alone (the output corrections come after the loop).
  for (const Strategy& s : {cpStrategy(4), cpStrategy(4, CpComm::kA2aP2p, 2)}) {
    const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(4), s);
    const OpList& backward = plan.stages[0].backward;
    int exchanges = 0;
    for (size_t i = 0; i < backward.size(); ++i) {
      if (backward[i].name != "cp_kv_grad_exchange") continue;
      ++exchanges;
      EXPECT_EQ(backward[i].overlap_ops, 2);
      ASSERT_LT(i + 3, backward.size());
      EXPECT_EQ(backward[i + 1].name.rfind("flash_attention", 0), 0u) << backward[i + 1].name;
      EXPECT_EQ(backward[i + 2].name, "cp_dq_accumulate");
      EXPECT_EQ(backward[i + 3].name, "cp_dk_accumulate");
    }
    EXPECT_EQ(exchanges, (s.cp_comm == CpComm::kP2p ? 4 : 2) * 4);  // per layer, 4 layers
    for (const OpInstance& op : plan.stages[0].forward) {
      if (op.name == "cp_kv_exchange") {
        EXPECT_EQ(op.overlap_ops, 1);
      }
    }
  }
}

TEST(CpRingCopies, NoneUnderFsdpOrWithoutARing) {
  const ModelConfig model = tinyLlama();
  Strategy fsdp = cpStrategy(2);
  fsdp.framework = Framework::kFsdp;
  fsdp.zero_stage = 3;  // FSDP shards over D x C
  EXPECT_TRUE(cpCopies(buildIterationPlan(model, test::cluster(2), fsdp), false).empty());
  EXPECT_TRUE(cpCopies(buildIterationPlan(model, test::cluster(2), fsdp), true).empty());
  for (const Strategy& s : {cpStrategy(2, CpComm::kA2a), cpStrategy(2, CpComm::kAllGather),
                            cpStrategy(1)}) {
    const IterationPlan plan = buildIterationPlan(model, test::cluster(2), s);
    EXPECT_TRUE(cpCopies(plan, false).empty()) << cpCommName(s.cp_comm);
    EXPECT_TRUE(cpCopies(plan, true).empty()) << cpCommName(s.cp_comm);
  }
}

}  // namespace
}  // namespace evsim

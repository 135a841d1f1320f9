// GEMM shapes per rank under Megatron's column/row-parallel partitioning, their FLOPs, and the
// FLOPs of a whole GPT-3 iteration against the closed form of Narayanan et al. (SC'21).
//
// Shapes follow PyTorch's Linear, Y = X W^T with W [out, in]:
//   forward  Y[T, out]  = X[T, in] W^T          gemm m=T   n=out k=in   layout nt
//   dgrad    dX[T, in]  = dY[T, out] W          gemm m=T   n=in  k=out  layout nn
//   wgrad    dW[out,in] = dY^T[out, T] X        gemm m=out n=in  k=T    layout tn
// Column-parallel (QKV, fc1, LM head) splits `out` by M; row-parallel (attention projection, fc2)
// splits `in` by M. Attention runs a/M heads per rank: batched GEMMs of batch b*a/M.

#include <gtest/gtest.h>

#include <cmath>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::dimValues;
using test::eventOf;
using test::findOp;
using V = std::vector<int64_t>;

// Tiny model: h = 256, a = 8 heads (head dim d = 32), f = 4h = 1024, s = 64, vocabulary 1100,
// 2 decoder blocks; b = 2, so T = b*s = 128 tokens per micro-batch.
constexpr int64_t kH = 256, kHeads = 8, kF = 1024, kS = 64, kVocab = 1100, kB = 2;
constexpr int64_t kT = kB * kS;      // 128
constexpr int64_t kD = kH / kHeads;  // 32

IterationPlan tinyPlan(int tp) {
  ModelConfig model = test::model(kH, kHeads, kF, kS, kVocab, 2);
  ClusterConfig cluster = test::cluster(8);
  return buildIterationPlan(model, cluster, test::strategy(std::to_string(tp) + "M1P1D", kB, kB));
}

struct GemmCase {
  const char* op;
  const char* layout;
  V dims;  // gemm: m n k; bgemm: batch m n k
};

void expectGemm(const IterationPlan& plan, const OpList& ops, const GemmCase& c, int layer) {
  SCOPED_TRACE(c.op);
  const Event& e = eventOf(plan, findOp(ops, c.op, layer));
  EXPECT_EQ(e.op, c.dims.size() == 3 ? "gemm" : "bgemm");
  EXPECT_EQ(e.layout, c.layout);
  EXPECT_EQ(dimValues(e), c.dims);
}

class GemmShapes : public ::testing::TestWithParam<int> {};

TEST_P(GemmShapes, BlockForwardIsColumnThenRowParallel) {
  const int64_t M = GetParam();
  IterationPlan plan = tinyPlan(static_cast<int>(M));
  ASSERT_EQ(plan.stages.size(), 1u);
  const OpList& fwd = plan.stages[0].forward;
  const int64_t heads = kB * kHeads / M;  // b*a/M = 16/M
  for (int layer : {0, 1}) {
    expectGemm(plan, fwd, {"qkv_gemm", "nt", {kT, 3 * kH / M, kH}}, layer);    // 768/M
    expectGemm(plan, fwd, {"attn_scores", "nt", {heads, kS, kS, kD}}, layer);  // Q K^T
    expectGemm(plan, fwd, {"attn_values", "nn", {heads, kS, kD, kS}}, layer);  // P V
    expectGemm(plan, fwd, {"attn_proj_gemm", "nt", {kT, kH, kH / M}}, layer);  // 256/M in
    expectGemm(plan, fwd, {"fc1_gemm", "nt", {kT, kF / M, kH}}, layer);        // 1024/M
    expectGemm(plan, fwd, {"fc2_gemm", "nt", {kT, kH, kF / M}}, layer);
  }
}

TEST_P(GemmShapes, BlockBackwardDgradNnWgradTn) {
  const int64_t M = GetParam();
  IterationPlan plan = tinyPlan(static_cast<int>(M));
  const OpList& bwd = plan.stages[0].backward;
  const int64_t heads = kB * kHeads / M;
  for (int layer : {0, 1}) {
    expectGemm(plan, bwd, {"qkv_dgrad", "nn", {kT, kH, 3 * kH / M}}, layer);
    expectGemm(plan, bwd, {"qkv_wgrad", "tn", {3 * kH / M, kH, kT}}, layer);
    expectGemm(plan, bwd, {"attn_proj_dgrad", "nn", {kT, kH / M, kH}}, layer);
    expectGemm(plan, bwd, {"attn_proj_wgrad", "tn", {kH, kH / M, kT}}, layer);
    expectGemm(plan, bwd, {"fc1_dgrad", "nn", {kT, kH, kF / M}}, layer);
    expectGemm(plan, bwd, {"fc1_wgrad", "tn", {kF / M, kH, kT}}, layer);
    expectGemm(plan, bwd, {"fc2_dgrad", "nn", {kT, kF / M, kH}}, layer);
    expectGemm(plan, bwd, {"fc2_wgrad", "tn", {kH, kF / M, kT}}, layer);
    // context C = P V:  dP = dC V^T [s,d]x[d,s];  dV = P^T dC [s,s]x[s,d]
    expectGemm(plan, bwd, {"attn_values_dgrad_p", "nt", {heads, kS, kS, kD}}, layer);
    expectGemm(plan, bwd, {"attn_values_dgrad_v", "tn", {heads, kS, kD, kS}}, layer);
    // scores S = Q K^T:  dQ = dS K [s,s]x[s,d];  dK = dS^T Q
    expectGemm(plan, bwd, {"attn_scores_dgrad_q", "nn", {heads, kS, kD, kS}}, layer);
    expectGemm(plan, bwd, {"attn_scores_dgrad_k", "tn", {heads, kS, kD, kS}}, layer);
  }
}

TEST_P(GemmShapes, LmHeadIsVocabParallelOnPaddedVocabulary) {
  const int64_t M = GetParam();
  IterationPlan plan = tinyPlan(static_cast<int>(M));
  // 1100 padded up to a multiple of 128*M: M=1 -> 1152 (9*128), M=2 -> 1280 (5*256),
  // M=4 -> 1536 (3*512), M=8 -> 2048 (2*1024).
  const int64_t padded = M == 1 ? 1152 : M == 2 ? 1280 : M == 4 ? 1536 : 2048;
  EXPECT_EQ(plan.padded_vocab, padded);
  const int64_t v = padded / M;  // 1152, 640, 384, 256
  expectGemm(plan, plan.stages[0].forward, {"lm_head_gemm", "nt", {kT, v, kH}}, kHeadLayer);
  expectGemm(plan, plan.stages[0].backward, {"lm_head_dgrad", "nn", {kT, kH, v}}, kHeadLayer);
  expectGemm(plan, plan.stages[0].backward, {"lm_head_wgrad", "tn", {v, kH, kT}}, kHeadLayer);
}

TEST_P(GemmShapes, TwoTpAllReducesEachWayPerBlock) {
  // Megatron's g (after each row-parallel GEMM, forward) and f (before each column-parallel GEMM,
  // backward): 2 + 2 per block when M > 1, none when M = 1. Each reduces T*h fp16 values.
  const int M = GetParam();
  IterationPlan plan = tinyPlan(M);
  for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
    int allreduces = 0;
    for (const OpInstance& op : *ops) {
      if (op.layer != 0 || op.stream != Stream::kTpComm) continue;
      ++allreduces;
      const Event& e = eventOf(plan, op);
      EXPECT_EQ(e.kind, EventKind::kAllReduce);
      EXPECT_EQ(e.message_bytes, kT * kH * 2);  // 128 * 256 * 2 B = 65536 B
      EXPECT_EQ(e.placement.group_size, M);
    }
    EXPECT_EQ(allreduces, M == 1 ? 0 : 2);
  }
}

TEST_P(GemmShapes, ForwardLayerFlopsOverRanksMatchClosedForm) {
  // One block's forward GEMM FLOPs over its M ranks: QKV 6Th^2 + projection 2Th^2 + fc1 8Th^2 +
  // fc2 8Th^2 = 24 b s h^2, plus scores and values 2 b s^2 h each = 4 b s^2 h.
  // b=2, s=64, h=256: 24*2*64*65536 + 4*2*4096*256 = 201326592 + 8388608 = 209715200.
  const int M = GetParam();
  IterationPlan plan = tinyPlan(M);
  double forward = 0, backward = 0;
  for (const OpInstance& op : plan.stages[0].forward) {
    const Event& e = eventOf(plan, op);
    if (op.layer == 0 && (e.op == "gemm" || e.op == "bgemm")) forward += e.flops;
  }
  for (const OpInstance& op : plan.stages[0].backward) {
    const Event& e = eventOf(plan, op);
    if (op.layer == 0 && (e.op == "gemm" || e.op == "bgemm")) backward += e.flops;
  }
  EXPECT_DOUBLE_EQ(forward * M, 209715200.0);
  // Backward: two GEMMs of the forward's size per GEMM.
  EXPECT_DOUBLE_EQ(backward * M, 2 * 209715200.0);
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, GemmShapes, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) {
                           return std::string("M").append(std::to_string(info.param));
                         });

TEST(GemmFlops, Gpt3On1024GpusMatchesNarayananFormula) {
  // GPT-3 175B: l=96, h=12288, a=96, s=2048, V=51200 (already a multiple of 128*8 = 1024, so no
  // padding). 8M8P16D, b=1, B=1536: m = 1536/16 = 96 micro-batches per pipeline.
  // Per sample per block, forward GEMMs: 24 s h^2 + 4 s^2 h; backward twice that (no
  // recomputation): 72 s h^2 (1 + s/(6h)). LM head: 2 s h V forward, twice that backward.
  // Over all devices, for the whole batch:
  //   72 B s l h^2 (1 + s/(6h)) + 6 B s h V = 3.3743e18 + 1.1875e16 = 3.3862e18 FLOPs.
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  Strategy s = test::strategy("8M8P16D", 1, 1536);
  IterationPlan plan = buildIterationPlan(model, cluster, s);
  EXPECT_EQ(plan.micro_batches, 96);
  EXPECT_EQ(s.gpus(), 1024);
  EXPECT_EQ(plan.padded_vocab, 51200);

  double total = 0;
  for (const UniqueEvent& u : plan.events.events()) {
    if (u.event.op == "gemm" || u.event.op == "bgemm") total += u.event.flops * double(u.count);
  }
  const double B = 1536, S = 2048, L = 96, H = 12288, Vocab = 51200;
  const double expected = 72 * B * S * L * H * H * (1 + S / (6 * H)) + 6 * B * S * H * Vocab;
  EXPECT_NEAR(expected, 3.3862e18, 0.0001e18);
  EXPECT_NEAR(total / expected, 1.0, 0.01);
}

}  // namespace
}  // namespace evsim

// torchtitan's per-op selective checkpointing (--recompute selective-op, ops/op_checkpoint.cpp)
// against bytes and FLOPs counted by hand from torchtitan's policy (activation_checkpoint.py:
// matmuls saved except every second one in forward order, attention and reduce-scatter outputs
// saved).
//
// Tiny Llama: h = 256, a = 8 heads (d = 32), 2 K/V heads (K/V width 64), SwiGLU f = 512, s = 64,
// 2 blocks, bf16 (e = 2), RMSNorm, RoPE, flash attention, no biases, no dropout; b = 2, so
// T = 128 tokens per micro-batch.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "config/model_config.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig tinyLlama(bool flash = true) {
  return parseModelConfig(std::string("name: tiny-llama-op\ndtype: bf16\nhidden_size: 256\n"
                                      "num_heads: 8\nnum_query_groups: 2\nffn_hidden_size: 512\n"
                                      "seq_length: 64\nvocab_size: 1024\nnormalization: rmsnorm\n"
                                      "activation: swiglu\nposition_embedding: rope\n"
                                      "add_bias_linear: false\nflash_attention: ") +
                              (flash ? "true" : "false") +
                              "\nhidden_dropout: 0.0\nattention_dropout: 0.0\nlayers:\n"
                              "  - {type: embedding}\n"
                              "  - {type: decoder, count: 2, cross_attention: false}\n"
                              "  - {type: head}\n",
                          "tiny-llama-op");
}

IterationPlan plan(const std::string& text, Recompute rc, bool sp) {
  Strategy s = test::strategy(text, 2, 2);
  s.recompute = rc;
  s.sequence_parallel = sp;
  return buildIterationPlan(tinyLlama(), test::cluster(8), s);
}

TEST(OpCheckpoint, KeepsTheInputAndTheOddMatmulsAttentionAndReduceScatters) {
  // t = 1: input 2*128*256 = 65,536; wq 2*128*256 = 65,536; wv 2*128*64 = 16,384; attention
  // output 65,536 and its fp32 log-sum-exp 4*(2*8)*64 = 4,096; w1 2*128*512 = 131,072; w2
  // 2*128*256 = 65,536. Sum 413,696.
  EXPECT_EQ(test::blockSavedBytes(plan("1M1P1D", Recompute::kSelectiveOp, false), 0), 413696);
  // Without recomputation the same block keeps 823,296 (both norms' inputs and the QKV, FC1
  // inputs 4 x 65,536, Q 65,536, K and V 2 x 16,384, LSE 4,096, the projection's input 65,536,
  // the SwiGLU input 2*128*1024 = 262,144 and FC2's 2*128*512 = 131,072).
  EXPECT_EQ(test::blockSavedBytes(plan("1M1P1D", Recompute::kNone, false), 0), 823296);
  // t = 2 with SP (64 tokens of the sequence on each rank): input 2*64*256 = 32,768; wq
  // 2*128*128 = 32,768; wv 2*128*32 = 8,192; attention 32,768 + LSE 4*(2*4)*64 = 2,048; wo's
  // reduce-scatter 32,768; w1 2*128*256 = 65,536; w2's partial 2*128*256 = 65,536 and its
  // reduce-scatter 32,768. Sum 305,152.
  EXPECT_EQ(test::blockSavedBytes(plan("2M1P1D", Recompute::kSelectiveOp, true), 1), 305152);
}

TEST(OpCheckpoint, BackwardReRunsTheEvenMatmulsAndTheCheapOps) {
  for (bool sp : {false, true}) {
    SCOPED_TRACE(sp);
    const int t = sp ? 2 : 1;
    IterationPlan p = plan(sp ? "2M1P1D" : "1M1P1D", Recompute::kSelectiveOp, sp);
    double gemm_flops = 0;
    int gemms = 0, all_gathers = 0, reduce_scatters = 0, all_reduces = 0;
    std::vector<std::string> names;
    for (const OpInstance& op : p.stages[0].backward) {
      if (op.layer != 0 || !op.recompute) continue;
      names.emplace_back(op.name);
      const Event& e = test::eventOf(p, op);
      if (e.kind == EventKind::kCompute && e.op == "gemm") {
        ++gemms;
        gemm_flops += e.flops;
      }
      all_gathers += e.kind == EventKind::kAllGather;
      reduce_scatters += e.kind == EventKind::kReduceScatter;
      all_reduces += e.kind == EventKind::kAllReduce;
    }
    // wk 2*128*(64/t)*256, wo 2*128*256*(256/t), w3 2*128*(512/t)*256: 54,525,952 / t.
    EXPECT_EQ(gemms, 3);
    EXPECT_DOUBLE_EQ(gemm_flops, 54525952.0 / t);
    EXPECT_EQ(names.front(), "layernorm");
    EXPECT_EQ(names.back(), "mlp_residual_add");
    // SP: the two column-parallel inputs are gathered again; the reduce-scatters are not re-run.
    EXPECT_EQ(all_gathers, sp ? 2 : 0);
    EXPECT_EQ(reduce_scatters, 0);
    EXPECT_EQ(all_reduces, 0);
  }
}

TEST(OpCheckpoint, RefusedWhereThePolicyIsNotModelled) {
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.recompute = Recompute::kSelectiveOp;
  try {
    validateStrategy(tinyLlama(false), test::cluster(8), s);
    FAIL() << "accepted selective-op without flash attention";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--recompute selective-op"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("flash_attention: false"), std::string::npos);
  }
  EXPECT_EQ(parseRecompute("selective-op"), Recompute::kSelectiveOp);
  EXPECT_EQ(recomputeName(Recompute::kSelectiveOp), "selective-op");
}

}  // namespace
}  // namespace evsim

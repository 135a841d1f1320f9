// xformers' fused SwiGLU (--swiglu-kernel xformers, Strategy::swiglu_recompute_product): its
// SwiGLUFusedOp saves x, x1 and x2 (the MLP input and the two fc1 outputs) and its backward's
// silu_bw_fused recomputes the product x4 = silu(x1) * x2 that fc2's weight gradient reads, where
// Megatron's fc2 keeps x4. Bytes and ops counted by hand.
//
// Tiny Llama (as tests/ops/op_checkpoint_test): h = 256, a = 8 (d = 32), 2 K/V heads, SwiGLU
// f = 512, s = 64, 2 blocks, bf16 (e = 2), no biases, no dropout; b = 2, so T = 128 tokens per
// micro-batch.

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "config/model_config.h"
#include "modeler/memory_model.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig tinyLlama(const std::string& activation = "swiglu") {
  return parseModelConfig(
      "name: tiny-llama-swiglu\ndtype: bf16\nhidden_size: 256\n"
      "num_heads: 8\nnum_query_groups: 2\nffn_hidden_size: 512\n"
      "seq_length: 64\nvocab_size: 1024\nnormalization: rmsnorm\n"
      "activation: " +
          activation +
          "\nposition_embedding: rope\nadd_bias_linear: false\n"
          "flash_attention: true\nhidden_dropout: 0.0\n"
          "attention_dropout: 0.0\nlayers:\n"
          "  - {type: embedding}\n"
          "  - {type: decoder, count: 2, cross_attention: false}\n"
          "  - {type: head}\n",
      "tiny-llama-swiglu");
}

IterationPlan plan(const std::string& text, bool xformers, bool sp, int64_t global_batch = 2) {
  Strategy s = test::strategy(text, 2, global_batch);
  s.sequence_parallel = sp;
  s.swiglu_recompute_product = xformers;
  if (s.pp == 2) s.stage_layers = {1, 1};  // one block per stage
  return buildIterationPlan(tinyLlama(), test::cluster(8), s);
}

TEST(FusedSwiglu, KeepsTheFc1OutputsButNotTheProduct) {
  // t = 1: Megatron's block keeps 823,296 bytes (op_checkpoint_test), of which fc2's input x4 is
  // 2 * 128 * 512 = 131,072; xformers' keeps 823,296 - 131,072 = 692,224.
  EXPECT_EQ(test::blockSavedBytes(plan("1M1P1D", false, false), 0), 823296);
  EXPECT_EQ(test::blockSavedBytes(plan("1M1P1D", true, false), 0), 692224);
  // t = 2 with SP: x4 on a rank is 2 * 128 * 256 = 65,536 bytes less.
  EXPECT_EQ(test::blockSavedBytes(plan("2M1P1D", false, true), 1) -
                test::blockSavedBytes(plan("2M1P1D", true, true), 1),
            65536);
}

TEST(FusedSwiglu, BackwardRecomputesTheProductOnceAsHardwareWork) {
  const IterationPlan megatron = plan("1M1P1D", false, false);
  const IterationPlan xformers = plan("1M1P1D", true, false);
  int recomputes = 0;
  for (const OpInstance& op : xformers.stages[0].backward) {
    if (op.layer != 0 || op.name != "swiglu_product_recompute") continue;
    ++recomputes;
    EXPECT_TRUE(op.recompute);
    const Event& e = test::eventOf(xformers, op);
    EXPECT_EQ(e.op, "swiglu_fwd");
    EXPECT_EQ(e.dim("elems"), 128 * 512);  // T x f / t
  }
  EXPECT_EQ(recomputes, 1);
  // Before fc2's gradients, which read the product.
  const auto& ops = xformers.stages[0].backward;
  size_t product = ops.size(), fc2_wgrad = ops.size();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].layer != 0) continue;
    if (ops[i].name == "swiglu_product_recompute") product = i;
    if (ops[i].name == "fc2_wgrad") fc2_wgrad = i;
  }
  EXPECT_LT(product, fc2_wgrad);
  EXPECT_EQ(xformers.stages[0].backward.size(), megatron.stages[0].backward.size() + 2);
}

TEST(FusedSwiglu, HeldActivationsFallByTheProductPerMicroBatchInFlight) {
  // 1F1B, P = 2, m = 4: stage 0 (the embedding and one block) holds min(P - 0, m) = 2
  // micro-batches, so its peak activations fall by 2 x 131,072 bytes.
  const MemoryEstimate megatron = estimateMemory(plan("1M2P1D", false, false, 8));
  const MemoryEstimate xformers = estimateMemory(plan("1M2P1D", true, false, 8));
  EXPECT_EQ(megatron.stages[0].in_flight, 2);
  EXPECT_EQ(megatron.stages[0].activation_bytes - xformers.stages[0].activation_bytes, 262144);
  EXPECT_EQ(megatron.stages[0].model_state_bytes, xformers.stages[0].model_state_bytes);
}

TEST(FusedSwiglu, RefusedWhereNotModelled) {
  Strategy s = test::strategy("1M1P1D", 2, 2);
  s.swiglu_recompute_product = true;
  try {
    validateStrategy(tinyLlama("gelu"), test::cluster(8), s);
    FAIL() << "accepted xformers' SwiGLU for a GELU model";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--swiglu-kernel xformers"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no SwiGLU MLP"), std::string::npos);
  }
  s.recompute = Recompute::kSelectiveOp;
  EXPECT_THROW(validateStrategy(tinyLlama(), test::cluster(8), s), InputError);
}

}  // namespace
}  // namespace evsim

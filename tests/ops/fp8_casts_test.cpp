// FP8 recipes (ops/fp8_casts.h): the cast ops each FP8 GEMM input gets, with their bytes worked
// by hand, and the weights' casts once per iteration beside the optimizer step.
//
// Tiny model: h = 256, 8 heads, f = 1024, s = 64, vocabulary 1100, 2 blocks (GeLU, biases); b = 2,
// so T = 128 tokens per micro-batch; one rank (1M1P1D), 16-bit model dtype.
#include "ops/fp8_casts.h"

#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::eventOf;
using test::findOp;

constexpr int64_t kH = 256, kF = 1024, kT = 128;

IterationPlan fp8Plan(Fp8Recipe recipe) {
  ModelConfig model = test::model(kH, 8, kF, 64, 1100, 2, "bf16");
  model.spec.fp8 = true;
  model.spec.fp8_recipe = recipe;
  return buildIterationPlan(model, test::cluster(8), test::strategy("1M1P1D", 2, 2));
}

// The op right before the first op named `name` of layer 0 in `ops`.
const OpInstance& before(const OpList& ops, std::string_view name, int back = 1) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == name && ops[i].layer == 0) {
      EXPECT_GE(i, size_t(back));
      return ops[i - back];
    }
  }
  ADD_FAILURE() << "no op " << name;
  static const OpInstance none;
  return none;
}

TEST(Fp8Casts, DelayedScalingCastsEachForwardInputOnceWithItsTranspose) {
  IterationPlan plan = fp8Plan(Fp8Recipe::kDelayed);
  const OpList& fwd = plan.stages[0].forward;
  // QKV's input X [128 x 256] = 32768 elements: read 2 B each, write the fp8 copy and its
  // transpose (1 B each) and one 4-byte scale per copy: 65536 + 65536 + 8 = 131080 bytes.
  const OpInstance& cast = before(fwd, "qkv_gemm");
  EXPECT_EQ(cast.name, "fp8_cast_input");
  const Event& e = eventOf(plan, cast);
  EXPECT_EQ(e.signature(),
            "fp8_quantize elems=32768 copies=2 block=32768 scale_bytes=4 dtype=bf16");
  EXPECT_EQ(e.memory_bytes, 131080);
  // fc2's input is the GeLU output [128 x 1024]: 4 x 131072 + 8 bytes.
  EXPECT_EQ(eventOf(plan, before(fwd, "fc2_gemm")).memory_bytes, 4 * 131072 + 8);
  // One cast per FP8 GEMM of the forward (QKV, projection, fc1, fc2 in each of 2 blocks); the
  // attention core and the LM head stay in bf16 and get none.
  int gemms = 0;
  for (const OpInstance& op : fwd) {
    if (plan.events[op.event].event.op == "gemm" && isFp8(plan.events[op.event].event.dtype)) {
      ++gemms;
    }
  }
  EXPECT_EQ(gemms, 8);
  EXPECT_EQ(test::countOps(fwd, "fp8_cast_input"), 8);
  EXPECT_EQ(eventOf(plan, findOp(fwd, "lm_head_gemm")).dtype, DType::kBf16);
}

TEST(Fp8Casts, TensorwiseScalingReadsTheInputOnceMoreForItsAmax) {
  IterationPlan plan = fp8Plan(Fp8Recipe::kTensorwise);
  const OpList& fwd = plan.stages[0].forward;
  const Event& amax = eventOf(plan, before(fwd, "qkv_gemm", 2));
  EXPECT_EQ(amax.op, "amax");
  EXPECT_EQ(amax.memory_bytes, 2 * 32768);  // one read of X
  EXPECT_EQ(eventOf(plan, before(fwd, "qkv_gemm")).memory_bytes, 131080);
}

TEST(Fp8Casts, RowwiseCastsRowScaledForwardAndColumnScaledForTheWgrad) {
  IterationPlan plan = fp8Plan(Fp8Recipe::kRowwise);
  const OpList& fwd = plan.stages[0].forward;
  const OpList& bwd = plan.stages[0].backward;
  // Forward: X [128 x 256] row-scaled only: read 65536, write 32768 + 128 scales x 4 B.
  EXPECT_EQ(eventOf(plan, before(fwd, "qkv_gemm")).memory_bytes, 65536 + 32768 + 512);
  // QKV's backward: dY [128 x 768] row-scaled for the dgrad (196608 + 98304 + 128 x 4) and
  // column-scaled for the wgrad (196608 + 98304 + 768 x 4); the saved X column-scaled before the
  // wgrad (65536 + 32768 + 256 x 4).
  EXPECT_EQ(eventOf(plan, before(bwd, "qkv_dgrad", 2)).memory_bytes, 196608 + 98304 + 512);
  EXPECT_EQ(eventOf(plan, before(bwd, "qkv_dgrad")).memory_bytes, 196608 + 98304 + 3072);
  const OpInstance& recast = before(bwd, "qkv_wgrad");
  EXPECT_EQ(recast.name, "fp8_cast_input_t");
  EXPECT_TRUE(recast.weight_grad);
  EXPECT_EQ(eventOf(plan, recast).memory_bytes, 65536 + 32768 + 1024);
  // It keeps the bf16 input for that (2 B per element), where the others keep the fp8 copy.
  EXPECT_EQ(findOp(fwd, "qkv_gemm", 0).saved_bytes, 2 * 32768);
  EXPECT_EQ(findOp(fp8Plan(Fp8Recipe::kDelayed).stages[0].forward, "qkv_gemm", 0).saved_bytes,
            32768);
}

TEST(Fp8Casts, BlockAndMxScalesAreWrittenPerBlockOfEachCopy) {
  // blockwise: 32768 / 128 = 256 fp32 scales per copy; mxfp8: 32768 / 32 = 1024 one-byte scales.
  IterationPlan block = fp8Plan(Fp8Recipe::kBlockwise);
  EXPECT_EQ(eventOf(block, before(block.stages[0].forward, "qkv_gemm")).memory_bytes,
            4 * 32768 + 2 * 256 * 4);
  EXPECT_EQ(eventOf(block, findOp(block.stages[0].forward, "qkv_gemm", 0)).dtype, DType::kFp8Block);
  IterationPlan mx = fp8Plan(Fp8Recipe::kMxfp8);
  EXPECT_EQ(eventOf(mx, before(mx.stages[0].forward, "qkv_gemm")).memory_bytes,
            4 * 32768 + 2 * 1024);
}

TEST(Fp8Casts, WeightsAreCastOncePerIterationBesideTheOptimizerStep) {
  IterationPlan plan = fp8Plan(Fp8Recipe::kDelayed);
  // FP8 linear weights with biases, per block: QKV 768 x 256 + 768, projection 256 x 256 + 256,
  // fc1 1024 x 256 + 1024, fc2 256 x 1024 + 256 = 789760; two blocks 1579520.
  const int64_t w = 2 * (768 * 256 + 768 + 256 * 256 + 256 + 1024 * 256 + 1024 + 256 * 1024 + 256);
  const OpInstance& cast = findOp(plan.stages[0].optimizer, "fp8_cast_weight");
  // Delayed scaling: one per-tensor cast (block = elems) writing W and W^T in fp8.
  EXPECT_EQ(eventOf(plan, cast).signature(), "fp8_quantize elems=" + std::to_string(w) +
                                                 " copies=2 block=" + std::to_string(w) +
                                                 " scale_bytes=4 dtype=bf16");
  // Blockwise: 128 x 128 weight blocks.
  IterationPlan block = fp8Plan(Fp8Recipe::kBlockwise);
  EXPECT_EQ(eventOf(block, findOp(block.stages[0].optimizer, "fp8_cast_weight")).dim("block"),
            16384);
  EXPECT_EQ(test::countOps(plan.stages[0].forward, "fp8_cast_weight"), 0);
  // No FP8: no casts anywhere.
  ModelConfig bf16 = test::model(kH, 8, kF, 64, 1100, 2, "bf16");
  IterationPlan plain = buildIterationPlan(bf16, test::cluster(8), test::strategy("1M1P1D", 2, 2));
  EXPECT_EQ(test::countOps(plain.stages[0].forward, "fp8_cast_input"), 0);
  EXPECT_EQ(test::countOps(plain.stages[0].optimizer, "fp8_cast_weight"), 0);
}

TEST(Fp8Casts, RecipeNamesParseAndUnknownOnesAreOneLine) {
  EXPECT_EQ(parseFp8Recipe("rowwise", "--fp8-recipe"), Fp8Recipe::kRowwise);
  EXPECT_EQ(fp8RecipeDType(Fp8Recipe::kTensorwise), DType::kFp8);
  EXPECT_EQ(fp8RecipeDType(Fp8Recipe::kMxfp8), DType::kMxfp8);
  EXPECT_CONTAINS(test::inputErrorOf([] { parseFp8Recipe("nvfp4", "--fp8-recipe"); }),
                  "--fp8-recipe: 'nvfp4': unknown FP8 recipe");
}

}  // namespace
}  // namespace evsim

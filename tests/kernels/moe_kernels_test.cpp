// The MoE routing kernels on known inputs: softmax + top-k, its gradient, the gather and the
// weighted scatter back, each against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "events/event.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/kernel.h"

namespace evsim {
namespace {

TEST(MoeKernels, RouterSoftmaxAndTopK) {
  // Token 0: logits 0, ln 2, ln 3, 0 -> exp 1, 2, 3, 1 over 7; top-2 experts 2 then 1.
  // Token 1: all equal -> 1/4 each; ties go to the lower index: 0 then 1.
  const float l2 = std::log(2.0f), l3 = std::log(3.0f);
  std::vector<float> logits = {0, l2, l3, 0, 5, 5, 5, 5}, probs(8), top(4);
  std::vector<int32_t> index(4);
  cpu::moeRouterForward(logits.data(), probs.data(), index.data(), top.data(), 2, 4, 2);
  EXPECT_NEAR(probs[0], 1.0 / 7, 1e-6);
  EXPECT_NEAR(probs[2], 3.0 / 7, 1e-6);
  EXPECT_EQ(index[0], 2);
  EXPECT_EQ(index[1], 1);
  EXPECT_NEAR(top[0], 3.0 / 7, 1e-6);
  EXPECT_NEAR(top[1], 2.0 / 7, 1e-6);
  EXPECT_EQ(index[2], 0);
  EXPECT_EQ(index[3], 1);
  EXPECT_NEAR(top[2], 0.25, 1e-6);
}

TEST(MoeKernels, RouterBackwardIsTheSoftmaxGradient) {
  // p = (0.5, 0.25, 0.25), dp = (1, 0, 0): sum dp*p = 0.5; dlogits = p * (dp - 0.5)
  // = (0.25, -0.125, -0.125).
  std::vector<float> p = {0.5f, 0.25f, 0.25f}, dp = {1, 0, 0}, dl(3);
  cpu::moeRouterBackward(p.data(), dp.data(), dl.data(), 1, 3);
  EXPECT_NEAR(dl[0], 0.25, 1e-6);
  EXPECT_NEAR(dl[1], -0.125, 1e-6);
  EXPECT_NEAR(dl[2], -0.125, 1e-6);
}

TEST(MoeKernels, PermuteGathersAndUnpermuteSumsWeightedCopies) {
  // 2 tokens of hidden 2, top-2: rows are [t0 e_a, t0 e_b, t1 e_a, t1 e_b].
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<int32_t> source = {1, 0, 0, 1};
  std::vector<float> y(8);
  // moePermute's source indexes rows of x: rows of 2 elements, so x has 2 rows here.
  cpu::moePermute(x.data(), source.data(), y.data(), 4, 2);
  EXPECT_EQ(y, (std::vector<float>{3, 4, 1, 2, 1, 2, 3, 4}));
  std::vector<float> weight = {0.75f, 0.25f, 0.5f, 0.5f}, back(4);
  cpu::moeUnpermute(y.data(), weight.data(), back.data(), 4, 2, 2);
  // token 0: 0.75*(3,4) + 0.25*(1,2) = (2.5, 3.5); token 1: 0.5*(1,2) + 0.5*(3,4) = (2, 3).
  EXPECT_EQ(back, (std::vector<float>{2.5f, 3.5f, 2.0f, 3.0f}));
}

TEST(MoeKernels, FactoryRefusesTopKBeyondExpertsNamingTheSignature) {
  Event bad = makeCompute("moe_router_fwd", {{"tokens", 4}, {"experts", 2}, {"topk", 3}}, "",
                          DType::kBf16, "test");
  try {
    makeCpuKernel(bad);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("topk=3 is more than experts=2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace evsim

// CPU AdamW step against its closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace evsim {
namespace {

TEST(CpuAdam, FirstStepMovesEachWeightByLrTimesSignOfGrad) {
  // Step 1 from zero moments: mhat = g and vhat = g^2 after bias correction, so the update is
  // lr * g / (|g| + eps) = lr * sign(g) for |g| >> eps.
  kernel_params::AdamHyper hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = 0.0f;
  hyper.eps = 1e-10f;
  std::vector<float> w = {1.0f, -2.0f, 0.5f, 3.0f};
  std::vector<float> g = {0.3f, -0.01f, -4.0f, 1e-3f};
  std::vector<float> m(4, 0.0f), v(4, 0.0f);
  std::vector<float> w0 = w;
  cpu::adamStep(w.data(), g.data(), m.data(), v.data(), 4, 1, hyper);
  for (int i = 0; i < 4; ++i) {
    float sign = g[i] > 0 ? 1.0f : -1.0f;
    EXPECT_NEAR(w[i], w0[i] - hyper.lr * sign, 1e-6f) << i;
    EXPECT_NEAR(m[i], 0.1f * g[i], 1e-7f) << i;
    // 1 - 0.999f is 0.001 only to ~1e-5 relative in float32.
    EXPECT_NEAR(v[i], 0.001f * g[i] * g[i], 2e-5f * v[i]) << i;
  }
}

TEST(CpuAdam, SecondStepUsesBiasCorrection) {
  kernel_params::AdamHyper hyper;
  hyper.weight_decay = 0.0f;
  float w = 0.0f, m = 0.0f, v = 0.0f;
  float g1 = 1.0f, g2 = 3.0f;
  cpu::adamStep(&w, &g1, &m, &v, 1, 1, hyper);
  cpu::adamStep(&w, &g2, &m, &v, 1, 2, hyper);
  // m2 = 0.9*0.1*1 + 0.1*3 = 0.39, mhat = 0.39/0.19; v2 = 0.999*0.001 + 0.001*9 = 0.009999,
  // vhat = 0.009999/0.001999.
  double mhat = 0.39 / 0.19, vhat = 0.009999 / 0.001999;
  double expected = -hyper.lr - hyper.lr * mhat / (std::sqrt(vhat) + hyper.eps);
  EXPECT_NEAR(m, 0.39f, 1e-6f);
  EXPECT_NEAR(v, 0.009999f, 2e-5f * v);  // beta2 = 0.999 is inexact in float32
  EXPECT_NEAR(w, expected, 1e-8);
}

TEST(CpuAdam, ZeroGradientLeavesOnlyDecoupledWeightDecay) {
  kernel_params::AdamHyper hyper;
  hyper.lr = 0.1f;
  hyper.weight_decay = 0.5f;
  std::vector<float> w = {2.0f, -4.0f}, g(2, 0.0f), m(2, 0.0f), v(2, 0.0f);
  cpu::adamStep(w.data(), g.data(), m.data(), v.data(), 2, 1, hyper);
  EXPECT_FLOAT_EQ(w[0], 2.0f * (1 - 0.05f));
  EXPECT_FLOAT_EQ(w[1], -4.0f * (1 - 0.05f));
}

}  // namespace
}  // namespace evsim

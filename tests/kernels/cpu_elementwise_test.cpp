// CPU GELU, dropout and add against closed forms and finite differences.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

TEST(CpuGelu, TanhApproximationAtKnownPoints) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in double precision by hand.
  EXPECT_EQ(cpu::geluValue(0.0f), 0.0f);
  EXPECT_NEAR(cpu::geluValue(1.0f), 0.8411919906f, 1e-6f);
  EXPECT_NEAR(cpu::geluValue(-1.0f), -0.1588080094f, 1e-6f);
  EXPECT_NEAR(cpu::geluValue(2.0f), 1.9545976941f, 1e-6f);
  // gelu'(0) = 0.5 exactly (tanh(0) = 0).
  EXPECT_FLOAT_EQ(cpu::geluDerivative(0.0f), 0.5f);
}

TEST(CpuGelu, ArraysApplyTheScalarFunction) {
  std::vector<float> x = {-1.0f, 0.0f, 1.0f};
  std::vector<float> y(3), dy = {2.0f, 2.0f, 2.0f}, dx(3);
  cpu::geluForward(x.data(), y.data(), 3);
  cpu::geluBackward(x.data(), dy.data(), dx.data(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(y[i], cpu::geluValue(x[i]));
    EXPECT_FLOAT_EQ(dx[i], 2.0f * cpu::geluDerivative(x[i]));
  }
}

TEST(CpuGelu, BackwardMatchesFiniteDifference) {
  const double h = 1e-3;
  for (float x : {-3.0f, -1.0f, -0.3f, 0.0f, 0.4f, 1.0f, 2.5f}) {
    double numeric =
        (double(cpu::geluValue(float(x + h))) - cpu::geluValue(float(x - h))) / (2 * h);
    EXPECT_NEAR(cpu::geluDerivative(x), numeric, 2e-3) << "x=" << x;
  }
}

TEST(CpuDropout, KeepsAboutOneMinusPScaledAndBackwardUsesTheSameMask) {
  const int n = 100000;
  const float p = 0.1f;
  std::vector<float> x(n), y(n), dy(n), dx(n);
  for (int i = 0; i < n; ++i) {
    x[i] = rng::uniformAt(3, i, 0.5f, 1.5f);  // never zero, so kept/dropped is visible in y
    dy[i] = rng::uniformAt(4, i, 0.5f, 1.5f);
  }
  std::vector<uint8_t> mask(n);
  cpu::dropoutForward(x.data(), y.data(), mask.data(), n, p, 42);
  cpu::dropoutBackward(dy.data(), mask.data(), dx.data(), n, p);
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(mask[i] == 0 || mask[i] == 1);
    if (mask[i]) {
      ++kept;
      EXPECT_FLOAT_EQ(y[i], x[i] / (1 - p));
      EXPECT_FLOAT_EQ(dx[i], dy[i] / (1 - p));
    } else {
      EXPECT_EQ(y[i], 0.0f);
      EXPECT_EQ(dx[i], 0.0f);
    }
  }
  // Binomial(n, 0.9): standard deviation ~95 elements; 5 sigma is ~0.5%.
  EXPECT_NEAR(double(kept) / n, 1 - p, 0.005);
}

TEST(CpuDropout, MaskDependsOnSeedOnly) {
  const int n = 1000;
  std::vector<float> x(n, 1.0f), y(n);
  std::vector<uint8_t> a(n), b(n), c(n);
  cpu::dropoutForward(x.data(), y.data(), a.data(), n, 0.5f, 7);
  cpu::dropoutForward(x.data(), y.data(), b.data(), n, 0.5f, 7);
  cpu::dropoutForward(x.data(), y.data(), c.data(), n, 0.5f, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(CpuAdd, AddsElementwise) {
  std::vector<float> a = {1, 2, 3}, b = {10, -20, 0.5f}, c(3);
  cpu::add(a.data(), b.data(), c.data(), 3);
  EXPECT_EQ(c, (std::vector<float>{11, -18, 3.5f}));
}

}  // namespace
}  // namespace evsim

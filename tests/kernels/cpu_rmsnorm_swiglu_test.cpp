// CPU RMSNorm and SwiGLU: hand-computed values, naive double-precision references written here from
// the definitions, and gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

std::vector<float> randomVector(int n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = rng::uniformAt(seed, i, lo, hi);
  return out;
}

// Central difference of loss() with respect to v[i] (v is restored).
double finiteDifference(std::vector<float>& v, int i, const std::function<double()>& loss) {
  const float h = 1e-2f;
  const float saved = v[i];
  v[i] = saved + h;
  const double up = loss();
  v[i] = saved - h;
  const double down = loss();
  v[i] = saved;
  return (up - down) / (2.0 * h);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(CpuRmsNorm, HandComputedRow) {
  // x = [1,2,3,4]: mean(x^2) = 30/4 = 7.5; no mean is subtracted and there is no bias.
  std::vector<float> x = {1, 2, 3, 4}, gamma = {1, 1, 2, 0.5f};
  std::vector<float> y(4), rstd(1);
  cpu::rmsNormForward(x.data(), gamma.data(), y.data(), rstd.data(), 1, 4, 0.0f);
  const float s = 1.0f / std::sqrt(7.5f);
  EXPECT_FLOAT_EQ(rstd[0], s);
  EXPECT_NEAR(y[0], 1 * s, 1e-6f);
  EXPECT_NEAR(y[1], 2 * s, 1e-6f);
  EXPECT_NEAR(y[2], 2 * 3 * s, 1e-6f);
  EXPECT_NEAR(y[3], 0.5f * 4 * s, 1e-6f);
}

TEST(CpuRmsNorm, MatchesNaiveReferenceWithEpsilon) {
  const int rows = 5, cols = 24;
  const float eps = 1e-2f;  // large, so a missing or misplaced epsilon shows
  std::vector<float> x = randomVector(rows * cols, 1, -2.0f, 3.0f);
  std::vector<float> gamma = randomVector(cols, 2, 0.5f, 1.5f);
  std::vector<float> y(x.size()), rstd(rows);
  cpu::rmsNormForward(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols, eps);
  for (int r = 0; r < rows; ++r) {
    double sq = 0;
    for (int j = 0; j < cols; ++j) sq += double(x[r * cols + j]) * x[r * cols + j];
    const double inv = 1.0 / std::sqrt(sq / cols + eps);
    EXPECT_NEAR(rstd[r], inv, 1e-6 * inv);
    for (int j = 0; j < cols; ++j) {
      EXPECT_NEAR(y[r * cols + j], x[r * cols + j] * inv * gamma[j], 1e-5) << r << "," << j;
    }
  }
}

TEST(CpuRmsNorm, BackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 7;
  std::vector<float> x = randomVector(rows * cols, 3, -2.0f, 2.0f);
  std::vector<float> gamma = randomVector(cols, 4, 0.5f, 1.5f);
  std::vector<float> dy = randomVector(rows * cols, 5);
  std::vector<float> y(x.size()), rstd(rows), dx(x.size()), dgamma(cols);
  cpu::rmsNormForward(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols, 1e-5f);
  cpu::rmsNormBackward(x.data(), dy.data(), gamma.data(), rstd.data(), dx.data(), dgamma.data(),
                       rows, cols);
  auto loss = [&] {
    std::vector<float> out(x.size()), rs(rows);
    cpu::rmsNormForward(x.data(), gamma.data(), out.data(), rs.data(), rows, cols, 1e-5f);
    return dot(out, dy);
  };
  for (int i = 0; i < rows * cols; ++i) EXPECT_NEAR(dx[i], finiteDifference(x, i, loss), 2e-3) << i;
  for (int j = 0; j < cols; ++j)
    EXPECT_NEAR(dgamma[j], finiteDifference(gamma, j, loss), 1e-3) << j;
}

TEST(CpuSwiGlu, HandComputedValues) {
  // One row, two outputs: gates [0, 1], ups [5, 2]. silu(0) = 0; silu(1) = 1 / (1 + e^-1).
  std::vector<float> x = {0.0f, 1.0f, 5.0f, 2.0f}, y(2);
  cpu::swigluForward(x.data(), y.data(), 1, 2);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 2.0f * 0.7310585786f, 1e-6f);
}

TEST(CpuSwiGlu, RowsHoldGateThenUp) {
  const int rows = 3, cols = 5;
  std::vector<float> x = randomVector(rows * 2 * cols, 6, -4.0f, 4.0f);
  std::vector<float> y(rows * cols);
  cpu::swigluForward(x.data(), y.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; ++j) {
      const double gate = x[r * 2 * cols + j], up = x[r * 2 * cols + cols + j];
      EXPECT_NEAR(y[r * cols + j], silu(gate) * up, 1e-5) << r << "," << j;
    }
  }
}

TEST(CpuSwiGlu, BackwardMatchesFiniteDifferences) {
  const int rows = 2, cols = 6;
  std::vector<float> x = randomVector(rows * 2 * cols, 7, -4.0f, 4.0f);
  std::vector<float> dy = randomVector(rows * cols, 8);
  std::vector<float> dx(x.size());
  cpu::swigluBackward(x.data(), dy.data(), dx.data(), rows, cols);
  auto loss = [&] {
    std::vector<float> out(rows * cols);
    cpu::swigluForward(x.data(), out.data(), rows, cols);
    return dot(out, dy);
  };
  for (int i = 0; i < rows * 2 * cols; ++i) {
    EXPECT_NEAR(dx[i], finiteDifference(x, i, loss), 1e-3) << i;
  }
}

}  // namespace
}  // namespace evsim

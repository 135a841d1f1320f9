// CPU softmax and layernorm: hand-computed values, invariants, and gradients vs finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

using kernel_params::SoftmaxMask;

std::vector<float> randomVector(int n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = rng::uniformAt(seed, i, lo, hi);
  return out;
}

// Central difference of loss() with respect to v[i] (v is restored).
double finiteDifference(std::vector<float>& v, int i, const std::function<double()>& loss) {
  const float h = 1e-2f;
  float saved = v[i];
  v[i] = saved + h;
  double up = loss();
  v[i] = saved - h;
  double down = loss();
  v[i] = saved;
  return (up - down) / (2.0 * h);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

TEST(CpuSoftmax, HandComputedThreeElements) {
  // softmax([1,2,3]) = e^x / (e + e^2 + e^3); scale 0.5 on [2,4,6] gives the same row.
  std::vector<float> x = {2, 4, 6};
  std::vector<float> y(3);
  cpu::softmaxForward(x.data(), y.data(), 1, 3, 0.5f, SoftmaxMask::kNone);
  EXPECT_NEAR(y[0], 0.09003057f, 1e-6f);
  EXPECT_NEAR(y[1], 0.24472847f, 1e-6f);
  EXPECT_NEAR(y[2], 0.66524096f, 1e-6f);
}

TEST(CpuSoftmax, RowsSumToOne) {
  const int rows = 6, cols = 17;
  std::vector<float> x = randomVector(rows * cols, 1, -5.0f, 5.0f);
  std::vector<float> y(x.size());
  for (SoftmaxMask mask : {SoftmaxMask::kNone, SoftmaxMask::kCausal}) {
    cpu::softmaxForward(x.data(), y.data(), rows, cols, 0.3f, mask);
    for (int r = 0; r < rows; ++r) {
      double sum = std::accumulate(y.begin() + r * cols, y.begin() + (r + 1) * cols, 0.0);
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(CpuSoftmax, CausalMaskHidesFutureKeys) {
  // Rows 0..2 are query positions 0..2 of one 3x3 score matrix; row 3 starts the next matrix.
  std::vector<float> x(4 * 3, 0.0f);
  std::vector<float> y(x.size());
  cpu::softmaxForward(x.data(), y.data(), 4, 3, 1.0f, SoftmaxMask::kCausal);
  const std::vector<float> expected = {1,        0,        0,        0.5f, 0.5f, 0,
                                       1 / 3.0f, 1 / 3.0f, 1 / 3.0f, 1,    0,    0};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-6f) << i;
}

TEST(CpuSoftmax, BackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 5;
  const float scale = 0.7f;
  std::vector<float> x = randomVector(rows * cols, 2, -2.0f, 2.0f);
  std::vector<float> dy = randomVector(rows * cols, 3);
  std::vector<float> y(x.size()), dx(x.size());
  for (SoftmaxMask mask : {SoftmaxMask::kNone, SoftmaxMask::kCausal}) {
    cpu::softmaxForward(x.data(), y.data(), rows, cols, scale, mask);
    cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols, scale);
    auto loss = [&] {
      std::vector<float> out(x.size());
      cpu::softmaxForward(x.data(), out.data(), rows, cols, scale, mask);
      return dot(out, dy);
    };
    for (int i = 0; i < rows * cols; ++i) {
      EXPECT_NEAR(dx[i], finiteDifference(x, i, loss), 2e-4) << "element " << i;
    }
  }
}

TEST(CpuLayerNorm, HandComputedRow) {
  // x = [1,2,3,4]: mean 2.5, variance 1.25.
  std::vector<float> x = {1, 2, 3, 4}, gamma = {1, 1, 2, 1}, beta = {0, 0, 0, 10};
  std::vector<float> y(4), mean(1), rstd(1);
  cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), 1,
                        4, 0.0f);
  float s = 1.0f / std::sqrt(1.25f);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_FLOAT_EQ(rstd[0], s);
  EXPECT_NEAR(y[0], -1.5f * s, 1e-6f);
  EXPECT_NEAR(y[1], -0.5f * s, 1e-6f);
  EXPECT_NEAR(y[2], 2 * 0.5f * s, 1e-6f);
  EXPECT_NEAR(y[3], 1.5f * s + 10, 1e-5f);
}

TEST(CpuLayerNorm, OutputRowsHaveMeanZeroVarianceOne) {
  const int rows = 4, cols = 64;
  std::vector<float> x = randomVector(rows * cols, 4, -3.0f, 5.0f);
  std::vector<float> gamma(cols, 1.0f), beta(cols, 0.0f), y(x.size()), mean(rows), rstd(rows);
  cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                        rows, cols, 1e-5f);
  for (int r = 0; r < rows; ++r) {
    double sum = 0, sq = 0;
    for (int j = 0; j < cols; ++j) sum += y[r * cols + j];
    for (int j = 0; j < cols; ++j) sq += y[r * cols + j] * y[r * cols + j];
    EXPECT_NEAR(sum / cols, 0.0, 1e-6);
    EXPECT_NEAR(sq / cols, 1.0, 1e-4);  // eps shrinks it by ~eps/var
  }
}

TEST(CpuLayerNorm, BackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 6;
  std::vector<float> x = randomVector(rows * cols, 5, -2.0f, 2.0f);
  std::vector<float> gamma = randomVector(cols, 6, 0.5f, 1.5f);
  std::vector<float> beta = randomVector(cols, 7);
  std::vector<float> dy = randomVector(rows * cols, 8);
  std::vector<float> y(x.size()), mean(rows), rstd(rows), dx(x.size()), dgamma(cols), dbeta(cols);
  cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                        rows, cols, 1e-5f);
  cpu::layerNormBackward(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                         dgamma.data(), dbeta.data(), rows, cols);
  auto loss = [&] {
    std::vector<float> out(x.size()), mu(rows), rs(rows);
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), out.data(), mu.data(), rs.data(),
                          rows, cols, 1e-5f);
    return dot(out, dy);
  };
  for (int i = 0; i < rows * cols; ++i) EXPECT_NEAR(dx[i], finiteDifference(x, i, loss), 2e-3) << i;
  for (int j = 0; j < cols; ++j) {
    EXPECT_NEAR(dgamma[j], finiteDifference(gamma, j, loss), 1e-3) << j;
    EXPECT_NEAR(dbeta[j], finiteDifference(beta, j, loss), 1e-3) << j;
  }
}

}  // namespace
}  // namespace evsim

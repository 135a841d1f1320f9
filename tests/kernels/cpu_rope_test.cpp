// CPU rotary position embedding against a naive reference written from the definition (angles in
// double), and the backward pass as the forward's transpose.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

std::vector<float> randomVector(int n, uint64_t seed) {
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = rng::uniformAt(seed, i, -1.0f, 1.0f);
  return out;
}

struct Tables {
  std::vector<float> cos, sin;
};

Tables tables(int positions, int dim, float theta) {
  Tables t{std::vector<float>(positions * dim / 2), std::vector<float>(positions * dim / 2)};
  cpu::ropeTables(positions, dim, theta, t.cos.data(), t.sin.data());
  return t;
}

// Llama's rotate_half: out = x * cos + rotate_half(x) * sin with rotate_half(x) = [-x2, x1] and
// freqs = pos / theta^(2i/dim) repeated over both halves.
std::vector<double> naiveRope(const std::vector<float>& x, int tokens, int heads, int dim,
                              int positions, double theta) {
  std::vector<double> out(x.size());
  const int half = dim / 2;
  for (int t = 0; t < tokens; ++t) {
    const double pos = t % positions;
    for (int h = 0; h < heads; ++h) {
      const float* xh = x.data() + (t * heads + h) * dim;
      double* oh = out.data() + (t * heads + h) * dim;
      for (int c = 0; c < dim; ++c) {
        const double freq = pos / std::pow(theta, 2.0 * (c % half) / dim);
        const double rotated = c < half ? -double(xh[c + half]) : double(xh[c - half]);
        oh[c] = xh[c] * std::cos(freq) + rotated * std::sin(freq);
      }
    }
  }
  return out;
}

TEST(CpuRope, PositionZeroIsTheIdentity) {
  const int heads = 2, dim = 8;
  Tables tab = tables(1, dim, 10000.0f);
  std::vector<float> x = randomVector(heads * dim, 1), y(x.size());
  cpu::ropeForward(x.data(), y.data(), tab.cos.data(), tab.sin.data(), 1, heads, dim, 1);
  EXPECT_EQ(y, x);
}

TEST(CpuRope, MatchesNaiveReferenceAndWrapsPositions) {
  // 11 tokens over 7 positions: tokens 7..10 reuse positions 0..3.
  const int tokens = 11, heads = 3, dim = 16, positions = 7;
  Tables tab = tables(positions, dim, 10000.0f);
  std::vector<float> x = randomVector(tokens * heads * dim, 2), y(x.size());
  cpu::ropeForward(x.data(), y.data(), tab.cos.data(), tab.sin.data(), tokens, heads, dim,
                   positions);
  std::vector<double> want = naiveRope(x, tokens, heads, dim, positions, 10000.0);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << i;
}

TEST(CpuRope, LargePositionsKeepTheirAngles) {
  // Position 4095, pair 1 of a 128-channel head: 4095 * 10000^(-2/128) = 3546.2 rad. A float
  // frequency (relative error ~3e-8) would put that angle off by ~1e-4 rad.
  const int positions = 4096, dim = 128;
  Tables tab = tables(positions, dim, 10000.0f);
  const double angle = 4095.0 * std::pow(10000.0, -2.0 / 128.0);
  EXPECT_NEAR(tab.cos[4095 * 64 + 1], std::cos(angle), 1e-6);
  EXPECT_NEAR(tab.sin[4095 * 64 + 1], std::sin(angle), 1e-6);
}

TEST(CpuRope, InPlaceEqualsOutOfPlace) {
  const int tokens = 5, heads = 2, dim = 6;
  Tables tab = tables(tokens, dim, 500.0f);
  std::vector<float> x = randomVector(tokens * heads * dim, 3), y(x.size());
  cpu::ropeForward(x.data(), y.data(), tab.cos.data(), tab.sin.data(), tokens, heads, dim, tokens);
  cpu::ropeForward(x.data(), x.data(), tab.cos.data(), tab.sin.data(), tokens, heads, dim, tokens);
  EXPECT_EQ(x, y);
}

TEST(CpuRope, BackwardIsTheTransposeAndTheInverse) {
  // For the linear map y = R x the gradient is R^T dy: <R x, dy> = <x, R^T dy>. A rotation's
  // transpose is its inverse, so backward(forward(x)) = x too.
  const int tokens = 9, heads = 2, dim = 10;
  Tables tab = tables(tokens, dim, 10000.0f);
  std::vector<float> x = randomVector(tokens * heads * dim, 4);
  std::vector<float> dy = randomVector(tokens * heads * dim, 5);
  std::vector<float> y(x.size()), dx(x.size()), back(x.size());
  cpu::ropeForward(x.data(), y.data(), tab.cos.data(), tab.sin.data(), tokens, heads, dim, tokens);
  cpu::ropeBackward(dy.data(), dx.data(), tab.cos.data(), tab.sin.data(), tokens, heads, dim,
                    tokens);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    lhs += double(y[i]) * dy[i];
    rhs += double(x[i]) * dx[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-5);
  cpu::ropeBackward(y.data(), back.data(), tab.cos.data(), tab.sin.data(), tokens, heads, dim,
                    tokens);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-6) << i;
}

}  // namespace
}  // namespace evsim

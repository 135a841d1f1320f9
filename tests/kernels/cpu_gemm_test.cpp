// CPU GEMMs against hand-computed products and a naive triple loop, for every operand layout.
#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

std::vector<float> transposed(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> out(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
  }
  return out;
}

// Written from the layout definition, independently of gemm.cpp's BLAS arguments.
std::vector<float> naiveGemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
                             const float* b) {
  std::vector<float> c(m * n, 0.0f);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        float av = trans_a ? a[p * m + i] : a[i * k + p];
        float bv = trans_b ? b[j * k + p] : b[p * n + j];
        sum += double(av) * bv;
      }
      c[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

std::vector<float> randomVector(int n, uint64_t seed) {
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = rng::uniformAt(seed, i, -1.0f, 1.0f);
  return out;
}

TEST(CpuGemm, HandComputed2x2InEveryLayout) {
  // [[1,2],[3,4]] * [[5,6],[7,8]] = [[19,22],[43,50]]
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<float> b = {5, 6, 7, 8};
  std::vector<float> at = {1, 3, 2, 4};  // A stored [k,m]
  std::vector<float> bt = {5, 7, 6, 8};  // B stored [n,k]
  const std::vector<float> expected = {19, 22, 43, 50};
  struct Case {
    const char* layout;
    const std::vector<float>& a;
    const std::vector<float>& b;
  };
  for (const Case& c :
       {Case{"nn", a, b}, Case{"nt", a, bt}, Case{"tn", at, b}, Case{"tt", at, bt}}) {
    std::vector<float> out(4, -1.0f);
    cpu::gemm(c.layout, 2, 2, 2, c.a.data(), c.b.data(), out.data());
    EXPECT_EQ(out, expected) << c.layout;
  }
}

TEST(CpuGemm, NonSquareMatchesNaiveLoopInEveryLayout) {
  const int m = 5, n = 7, k = 3;
  std::vector<float> a = randomVector(m * k, 11);
  std::vector<float> b = randomVector(k * n, 12);
  for (const char* layout : {"nn", "nt", "tn", "tt"}) {
    bool ta = layout[0] == 't';
    bool tb = layout[1] == 't';
    // Store the same logical A[m,k] and B[k,n] the way the layout says.
    std::vector<float> as = ta ? transposed(a, m, k) : a;
    std::vector<float> bs = tb ? transposed(b, k, n) : b;
    std::vector<float> out(m * n);
    cpu::gemm(layout, m, n, k, as.data(), bs.data(), out.data());
    std::vector<float> want = naiveGemm(ta, tb, m, n, k, as.data(), bs.data());
    std::vector<float> logical = naiveGemm(false, false, m, n, k, a.data(), b.data());
    for (int i = 0; i < m * n; ++i) {
      EXPECT_NEAR(out[i], want[i], 1e-5f) << layout << " element " << i;
      EXPECT_NEAR(out[i], logical[i], 1e-5f) << layout << " element " << i;
    }
  }
}

TEST(CpuGemm, ScaledGemmScalesAndAccumulates) {
  const int m = 3, n = 4, k = 6;
  std::vector<float> a = randomVector(m * k, 13);
  std::vector<float> b = randomVector(n * k, 14);
  std::vector<float> c = randomVector(m * n, 15);
  const std::vector<float> c0 = c;
  cpu::gemmScaled("nt", m, n, k, 0.5f, a.data(), b.data(), 2.0f, c.data());
  std::vector<float> product = naiveGemm(false, true, m, n, k, a.data(), b.data());
  for (int i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], 0.5f * product[i] + 2.0f * c0[i], 1e-5f) << i;
}

TEST(CpuGemm, RejectsUnknownLayout) {
  float a = 1, b = 1, c = 0;
  EXPECT_THROW(cpu::gemm("xn", 1, 1, 1, &a, &b, &c), InputError);
}

TEST(CpuBatchedGemm, EachBatchIsAnIndependentGemm) {
  const int batch = 3, m = 4, n = 2, k = 5;
  std::vector<float> a = randomVector(batch * m * k, 21);
  std::vector<float> b = randomVector(batch * k * n, 22);
  std::vector<float> out(batch * m * n);
  cpu::batchedGemm("nt", batch, m, n, k, a.data(), b.data(), out.data());
  for (int i = 0; i < batch; ++i) {
    std::vector<float> want =
        naiveGemm(false, true, m, n, k, a.data() + i * m * k, b.data() + i * k * n);
    for (int j = 0; j < m * n; ++j) EXPECT_NEAR(out[i * m * n + j], want[j], 1e-5f);
  }
  // Changing batch 1's inputs changes batch 1's output only.
  std::vector<float> before = out;
  for (int j = 0; j < m * k; ++j) a[m * k + j] += 1.0f;
  cpu::batchedGemm("nt", batch, m, n, k, a.data(), b.data(), out.data());
  for (int j = 0; j < m * n; ++j) {
    EXPECT_EQ(out[j], before[j]);
    EXPECT_EQ(out[2 * m * n + j], before[2 * m * n + j]);
  }
  EXPECT_NE(std::vector<float>(out.begin() + m * n, out.begin() + 2 * m * n),
            std::vector<float>(before.begin() + m * n, before.begin() + 2 * m * n));
}

}  // namespace
}  // namespace evsim

// GEMMs through CBLAS (OpenBLAS on Debian), row-major.
#include <cblas.h>

#include <climits>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

namespace {

// CBLAS takes `int` sizes (Debian's OpenBLAS is not built with 64-bit integers).
int blasInt(int64_t value, const char* what) {
  if (value <= 0 || value > INT_MAX) {
    EVSIM_THROW(Error, "GEMM {}={} outside the BLAS integer range (1..{})", what, value, INT_MAX);
  }
  return static_cast<int>(value);
}

struct BlasCall {
  CBLAS_TRANSPOSE trans_a;
  CBLAS_TRANSPOSE trans_b;
  int m, n, k, lda, ldb, ldc;
};

BlasCall blasCall(std::string_view layout, int64_t m, int64_t n, int64_t k) {
  kernel_params::GemmLayout l = kernel_params::parseGemmLayout(layout);
  BlasCall call{};
  call.m = blasInt(m, "m");
  call.n = blasInt(n, "n");
  call.k = blasInt(k, "k");
  call.trans_a = l.trans_a ? CblasTrans : CblasNoTrans;
  call.trans_b = l.trans_b ? CblasTrans : CblasNoTrans;
  // Leading dimension = row length of the operand as stored.
  call.lda = l.trans_a ? call.m : call.k;
  call.ldb = l.trans_b ? call.k : call.n;
  call.ldc = call.n;
  return call;
}

void run(const BlasCall& c, const float* a, const float* b, float* out, float alpha = 1.0f,
         float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, c.trans_a, c.trans_b, c.m, c.n, c.k, alpha, a, c.lda, b, c.ldb, beta,
              out, c.ldc);
}

}  // namespace

void gemm(std::string_view layout, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
          float* c) {
  run(blasCall(layout, m, n, k), a, b, c);
}

void gemmScaled(std::string_view layout, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, const float* b, float beta, float* c) {
  run(blasCall(layout, m, n, k), a, b, c, alpha, beta);
}

void batchedGemm(std::string_view layout, int64_t batch, int64_t m, int64_t n, int64_t k,
                 const float* a, const float* b, float* c) {
  BlasCall call = blasCall(layout, m, n, k);
  // Debian's OpenBLAS 0.3.21 has no cblas_sgemm_batch; a loop of strided calls is what it would
  // do for equal shapes anyway.
  for (int64_t i = 0; i < batch; ++i) {
    run(call, a + i * m * k, b + i * k * n, c + i * m * n);
  }
}

}  // namespace evsim::cpu

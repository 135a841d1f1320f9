// RMSNorm (Llama's norm) and its gradient. Row sums in double, as the other row-wise kernels, so
// the tests' finite differences see float32 rounding only.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

void rmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                    int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sq = 0;
    for (int64_t j = 0; j < cols; ++j) sq += double(xr[j]) * xr[j];
    const double inv_rms = 1.0 / std::sqrt(sq / double(cols) + eps);
    rstd[r] = static_cast<float>(inv_rms);
    for (int64_t j = 0; j < cols; ++j) yr[j] = static_cast<float>(xr[j] * inv_rms) * gamma[j];
  }
}

void rmsNormBackward(const float* x, const float* dy, const float* gamma, const float* rstd,
                     float* dx, float* dgamma, int64_t rows, int64_t cols) {
  std::fill(dgamma, dgamma + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    // With xhat = x * rstd and g = dy * gamma (LayerNorm's formula without the mean terms):
    //   dx = rstd * (g - xhat * mean(g * xhat))
    double sum_g_xhat = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const float xhat = xr[j] * rstd[r];
      sum_g_xhat += double(dyr[j]) * gamma[j] * xhat;
      dgamma[j] += dyr[j] * xhat;
    }
    const float mean_g_xhat = static_cast<float>(sum_g_xhat / double(cols));
    for (int64_t j = 0; j < cols; ++j) {
      const float xhat = xr[j] * rstd[r];
      dxr[j] = rstd[r] * (dyr[j] * gamma[j] - xhat * mean_g_xhat);
    }
  }
}

}  // namespace evsim::cpu

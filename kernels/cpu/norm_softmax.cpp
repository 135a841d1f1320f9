// Row-wise kernels: fused scale + mask + softmax, layernorm, and their gradients. Row sums are
// accumulated in double so the tests' finite differences see float32 rounding only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

void softmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                    kernel_params::SoftmaxMask mask) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Keys [0, valid) take part; causal rows see keys up to and including their own position.
    int64_t valid = mask == kernel_params::SoftmaxMask::kCausal ? (r % cols) + 1 : cols;
    float max_value = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < valid; ++j) max_value = std::max(max_value, scale * xr[j]);
    double sum = 0;
    for (int64_t j = 0; j < valid; ++j) {
      yr[j] = std::exp(scale * xr[j] - max_value);
      sum += yr[j];
    }
    float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < valid; ++j) yr[j] *= inv;
    for (int64_t j = valid; j < cols; ++j) yr[j] = 0.0f;
  }
}

void softmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                     float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    double dot = 0;
    for (int64_t j = 0; j < cols; ++j) dot += double(dyr[j]) * yr[j];
    float dotf = static_cast<float>(dot);
    for (int64_t j = 0; j < cols; ++j) dxr[j] = scale * yr[j] * (dyr[j] - dotf);
  }
}

void layerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                      float* rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += xr[j];
    double mu = sum / double(cols);
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
    double sq = 0;
    for (int64_t j = 0; j < cols; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
    double inv_std = 1.0 / std::sqrt(sq / double(cols) + eps);
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(inv_std);
    for (int64_t j = 0; j < cols; ++j) {
      yr[j] = static_cast<float>((xr[j] - mu) * inv_std) * gamma[j] + beta[j];
    }
  }
}

void layerNormBackward(const float* x, const float* dy, const float* gamma, const float* mean,
                       const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t cols) {
  std::fill(dgamma, dgamma + cols, 0.0f);
  std::fill(dbeta, dbeta + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    // With xhat = (x - mean) * rstd and g = dy * gamma:
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    double sum_g = 0;
    double sum_g_xhat = 0;
    for (int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - mean[r]) * rstd[r];
      float g = dyr[j] * gamma[j];
      sum_g += g;
      sum_g_xhat += double(g) * xhat;
      dgamma[j] += dyr[j] * xhat;
      dbeta[j] += dyr[j];
    }
    float mean_g = static_cast<float>(sum_g / double(cols));
    float mean_g_xhat = static_cast<float>(sum_g_xhat / double(cols));
    for (int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - mean[r]) * rstd[r];
      dxr[j] = rstd[r] * (dyr[j] * gamma[j] - mean_g - xhat * mean_g_xhat);
    }
  }
}

}  // namespace evsim::cpu

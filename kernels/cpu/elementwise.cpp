// Element-wise kernels: GELU (tanh approximation, as Megatron's bias_gelu), dropout, add.
#include <cmath>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
}  // namespace

float geluValue(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

float geluDerivative(float x) {
  float t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

void geluForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = geluValue(x[i]);
}

void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * geluDerivative(x[i]);
}

void dropoutForward(const float* x, float* y, uint8_t* mask, int64_t n, float p, uint64_t seed) {
  EVSIM_CHECK(p >= 0.0f && p < 1.0f, "dropout probability {} outside [0, 1)", p);
  float scale = 1.0f / (1.0f - p);
  // Branch-free in the data (as a GPU's fused dropout): a branch on random keep bits would run at
  // the speed of the CPU's branch predictor, which learns a mask that repeats across timed runs.
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t keep = rng::keepAt(seed, static_cast<uint64_t>(i), p) ? 1 : 0;
    mask[i] = keep;
    y[i] = x[i] * (scale * static_cast<float>(keep));
  }
}

void dropoutBackward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float p) {
  EVSIM_CHECK(p >= 0.0f && p < 1.0f, "dropout probability {} outside [0, 1)", p);
  float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (scale * static_cast<float>(mask[i]));
}

void add(const float* a, const float* b, float* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

}  // namespace evsim::cpu

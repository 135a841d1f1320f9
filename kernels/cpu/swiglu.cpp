// SwiGLU, the gated activation of Llama's MLP, and its gradient.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

namespace {

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

void swigluForward(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * cols;
    const float* up = gate + cols;
    float* yr = y + r * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
}

void swigluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * cols;
    const float* up = gate + cols;
    const float* dyr = dy + r * cols;
    float* dgate = dx + r * 2 * cols;
    float* dup = dgate + cols;
    for (int64_t j = 0; j < cols; ++j) {
      const float s = sigmoid(gate[j]);
      // silu'(g) = s + g s (1 - s)
      dgate[j] = dyr[j] * up[j] * s * (1.0f + gate[j] * (1.0f - s));
      dup[j] = dyr[j] * gate[j] * s;
    }
  }
}

}  // namespace evsim::cpu

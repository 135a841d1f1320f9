// Rotary position embedding, rotate-half form, from precomputed cos/sin tables (as Megatron and
// Transformer Engine precompute the angles once per sequence length): the timed pass is the
// memory-bound rotation, not a sin/cos per element.
#include <cmath>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

namespace {

// y = R(sign * angle) x for every pair; sign -1 is the inverse rotation.
void rotate(const float* x, float* y, const float* cos, const float* sin, int64_t tokens,
            int64_t heads, int64_t dim, int64_t positions, float sign) {
  EVSIM_CHECK(dim % 2 == 0 && positions > 0, "rope dim={} positions={}", dim, positions);
  const int64_t half = dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + (t % positions) * half;
    const float* s = sin + (t % positions) * half;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t offset = (t * heads + h) * dim;
      for (int64_t i = 0; i < half; ++i) {
        // Read both before writing: y may be x.
        const float lo = x[offset + i];
        const float hi = x[offset + i + half];
        const float sn = sign * s[i];
        y[offset + i] = lo * c[i] - hi * sn;
        y[offset + i + half] = hi * c[i] + lo * sn;
      }
    }
  }
}

}  // namespace

void ropeTables(int64_t positions, int64_t dim, float theta, float* cos, float* sin) {
  const int64_t half = dim / 2;
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      // In double: p * inv_freq reaches thousands of radians, where float angles lose digits.
      const double angle = double(p) * std::pow(double(theta), -2.0 * double(i) / double(dim));
      cos[p * half + i] = static_cast<float>(std::cos(angle));
      sin[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void ropeForward(const float* x, float* y, const float* cos, const float* sin, int64_t tokens,
                 int64_t heads, int64_t dim, int64_t positions) {
  rotate(x, y, cos, sin, tokens, heads, dim, positions, 1.0f);
}

void ropeBackward(const float* dy, float* dx, const float* cos, const float* sin, int64_t tokens,
                  int64_t heads, int64_t dim, int64_t positions) {
  rotate(dy, dx, cos, sin, tokens, heads, dim, positions, -1.0f);
}

}  // namespace evsim::cpu

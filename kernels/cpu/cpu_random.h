#pragma once
// Random input buffers of the CPU ComputeKernel wrappers (cpu_kernels.cpp, cpu_llama_kernels.cpp):
// buffer number `stream` of a kernel seeded with `seed`, the same values the CUDA backend's buffer
// `stream` holds in fp32.

#include <cstdint>
#include <vector>

#include "kernels/hash_rng.h"

namespace evsim::cpu {

using Floats = std::vector<float>;
using Ints = std::vector<int32_t>;

inline Floats randomFloats(int64_t n, uint64_t seed, uint64_t stream, float lo = -1.0f,
                           float hi = 1.0f) {
  Floats out(static_cast<size_t>(n));
  uint64_t s = rng::hashAt(seed, stream);
  for (int64_t i = 0; i < n; ++i) out[i] = rng::uniformAt(s, uint64_t(i), lo, hi);
  return out;
}

inline Ints randomIndices(int64_t n, int64_t bound, uint64_t seed, uint64_t stream) {
  Ints out(static_cast<size_t>(n));
  uint64_t s = rng::hashAt(seed, stream);
  for (int64_t i = 0; i < n; ++i) out[i] = rng::indexAt(s, uint64_t(i), bound);
  return out;
}

}  // namespace evsim::cpu

#pragma once
// Counter-based random numbers: value i of stream `seed` is a pure function of (seed, i). Both
// backends use it, so the CPU and GPU draw identical dropout masks and inputs for the same seed,
// and a GPU fill needs no curand state. Header-only; compiles under nvcc as host+device code.

#include <cstdint>

#if defined(__CUDACC__)
#define EVSIM_HOST_DEVICE __host__ __device__
#else
#define EVSIM_HOST_DEVICE
#endif

namespace evsim::rng {

// splitmix64 finaliser: a cheap, well-mixed 64-bit hash.
EVSIM_HOST_DEVICE inline uint64_t hash64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

EVSIM_HOST_DEVICE inline uint64_t hashAt(uint64_t seed, uint64_t index) {
  return hash64(hash64(seed) ^ index);
}

// Uniform in [0, 1) with 24 random bits (exact in float).
EVSIM_HOST_DEVICE inline float uniformAt(uint64_t seed, uint64_t index) {
  return static_cast<float>(hashAt(seed, index) >> 40) * (1.0f / 16777216.0f);
}

// Uniform in [lo, hi).
EVSIM_HOST_DEVICE inline float uniformAt(uint64_t seed, uint64_t index, float lo, float hi) {
  return lo + (hi - lo) * uniformAt(seed, index);
}

// Integer uniform in [0, bound) (bound > 0; modulo bias is irrelevant here).
EVSIM_HOST_DEVICE inline int32_t indexAt(uint64_t seed, uint64_t index, int64_t bound) {
  return static_cast<int32_t>(hashAt(seed, index) % static_cast<uint64_t>(bound));
}

// Dropout keep decision for element `index`: kept with probability 1 - p.
EVSIM_HOST_DEVICE inline bool keepAt(uint64_t seed, uint64_t index, float p) {
  return uniformAt(seed, index) >= p;
}

}  // namespace evsim::rng

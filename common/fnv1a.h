#pragma once
// FNV-1a (Fowler-Noll-Vo, 64-bit) over words: the one hash behind the hash maps keyed by short
// integer vectors (pipeline memory states, stretched-task questions). Each word is XORed in whole,
// then multiplied by the prime; a word below 256 therefore mixes exactly as one byte does, so the
// published byte test vectors check it.

#include <cstddef>
#include <cstdint>
#include <span>

namespace evsim {

class Fnv1a {
 public:
  static constexpr uint64_t kOffsetBasis = 14695981039346656037ull;
  static constexpr uint64_t kPrime = 1099511628211ull;

  constexpr void mix(uint64_t word) {
    hash_ ^= word;
    hash_ *= kPrime;
  }
  constexpr uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = kOffsetBasis;
};

// The hash of a vector of ints, each mixed as its 32-bit pattern (a hasher for unordered
// containers keyed by std::vector<int>).
struct IntVectorHash {
  size_t operator()(std::span<const int> ints) const {
    Fnv1a h;
    for (int x : ints) h.mix(static_cast<uint32_t>(x));
    return static_cast<size_t>(h.value());
  }
};

}  // namespace evsim

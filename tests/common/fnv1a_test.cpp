// common/fnv1a.h: FNV-1a with the published 64-bit offset basis and prime. Words below 256 mix
// as single bytes, so the reference byte-string vectors of FNV-1a 64 apply.
#include "common/fnv1a.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace evsim {
namespace {

uint64_t ofBytes(std::string_view s) {
  Fnv1a h;
  for (unsigned char c : s) h.mix(c);
  return h.value();
}

TEST(Fnv1a, MatchesTheReferenceVectors) {
  // The empty string hashes to the offset basis; "a" and "foobar" are from the FNV test suite.
  EXPECT_EQ(ofBytes(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(ofBytes("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(ofBytes("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a, OneStepByHand) {
  // (basis ^ 1) * prime, modulo 2^64: the basis is odd, so ^1 clears its low bit.
  Fnv1a h;
  h.mix(1);
  EXPECT_EQ(h.value(), (Fnv1a::kOffsetBasis - 1) * Fnv1a::kPrime);
}

TEST(IntVectorHash, MixesEachIntAsItsThirtyTwoBitPattern) {
  // -1 mixes as 0xffffffff (not sign-extended to 64 bits); order matters.
  Fnv1a h;
  h.mix(0xffffffffull);
  h.mix(2);
  EXPECT_EQ(IntVectorHash{}(std::vector<int>{-1, 2}), h.value());
  EXPECT_NE(IntVectorHash{}(std::vector<int>{2, -1}), h.value());
  EXPECT_EQ(IntVectorHash{}(std::vector<int>{}), Fnv1a::kOffsetBasis);
}

}  // namespace
}  // namespace evsim

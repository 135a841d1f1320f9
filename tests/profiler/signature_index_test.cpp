// The profile database's signature index (io/signature_index.h): positions found by key through
// growth, a second insert of a key reports the first position and changes nothing, and keys that
// share a home slot (forced by a small table) are told apart by content.
#include "io/signature_index.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace evsim {
namespace {

TEST(SignatureIndex, FindsEveryKeyThroughGrowth) {
  std::vector<std::string> keys;
  SignatureIndex index;
  auto key_of = [&](size_t i) -> std::string_view { return keys[i]; };
  for (int i = 0; i < 5000; ++i) {
    keys.push_back("gemm m=" + std::to_string(i) + " n=64 k=64 layout=nn dtype=bf16");
    ASSERT_EQ(index.insert(keys.back(), keys.size() - 1, key_of), SignatureIndex::kAbsent);
  }
  EXPECT_EQ(index.size(), 5000u);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(index.find(keys[i], key_of), i);
  EXPECT_EQ(index.find("gemm m=5000 n=64 k=64 layout=nn dtype=bf16", key_of),
            SignatureIndex::kAbsent);
  // A key already there: its first position comes back, nothing is stored.
  EXPECT_EQ(index.insert(keys[1234], 99999, key_of), 1234u);
  EXPECT_EQ(index.size(), 5000u);
  EXPECT_EQ(index.find(keys[1234], key_of), 1234u);
}

TEST(SignatureIndex, InsertAllStoresEveryPositionAndNamesTheFirstRepeat) {
  // More keys than insertAll fetches ahead (16), so the prefetched tags are used past the first
  // round; the repeat sits late (position 40 repeats position 7).
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) keys.push_back("allreduce bytes=" + std::to_string(1 << (i % 30)));
  for (int i = 0; i < 50; ++i) keys[i] += " group=" + std::to_string(2 + i);
  auto key_of = [&](size_t i) -> std::string_view { return keys[i]; };
  SignatureIndex index;
  ASSERT_EQ(index.insertAll(keys.size(), key_of), SignatureIndex::kAbsent);
  EXPECT_EQ(index.size(), 50u);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(index.find(keys[i], key_of), i);
  keys[40] = keys[7];
  SignatureIndex repeated;
  EXPECT_EQ(repeated.insertAll(keys.size(), key_of), 40u);
  EXPECT_EQ(repeated.find(keys[7], key_of), 7u);  // the first stays
}

TEST(SignatureIndex, EmptyIndexFindsNothing) {
  const SignatureIndex index;
  EXPECT_EQ(index.find("x", [](size_t) { return std::string_view("x"); }),
            SignatureIndex::kAbsent);
}

TEST(SignatureIndex, ReserveKeepsPositions) {
  std::vector<std::string> keys = {"a", "b", "c"};
  auto key_of = [&](size_t i) -> std::string_view { return keys[i]; };
  SignatureIndex index;
  for (size_t i = 0; i < keys.size(); ++i) index.insert(keys[i], i, key_of);
  index.reserve(100000);  // moves every slot into a larger table
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(index.find(keys[i], key_of), i);
}

}  // namespace
}  // namespace evsim

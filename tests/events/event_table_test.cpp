// EventTable: reorder() moves events to new indices without copying them, and the table finds,
// interns and appends by the new indices afterwards as a table built in that order would; a
// cleared table is a new one but for its storage; the compute ops' table fits makeCompute's fixed
// value array.
#include "events/event_table.h"

#include <gtest/gtest.h>

#include <vector>

#include "events/compute_op_rules.h"

namespace evsim {
namespace {

TEST(EventTable, ReorderMovesEventsAndKeepsLookupsRight) {
  const Event a = makeGemm(8, 16, 32, "nt", DType::kBf16);
  const Event b = makeCompute("add", {{"elems", 64}}, "", DType::kBf16);
  const Event c = makeCommunication(EventKind::kAllReduce, 4096, Placement{4, 1, 4}, DType::kBf16);
  EventTable table;
  ASSERT_EQ(table.intern(a), 0);
  ASSERT_EQ(table.intern(b), 1);
  ASSERT_EQ(table.intern(c), 2);
  table.addCount(0, 3);  // a runs 3 times, b 5, c 7
  table.addCount(1, 5);
  table.addCount(2, 7);
  const uint64_t hash_a = table.hashAt(0), hash_c = table.hashAt(2);

  table.reorder({2, 0, 1});  // new index -> old index: c, a, b

  ASSERT_EQ(table.size(), 3);
  EXPECT_EQ(table[0].signature, c.signature());
  EXPECT_EQ(table[1].signature, a.signature());
  EXPECT_EQ(table[2].signature, b.signature());
  EXPECT_EQ(table[0].count, 7);  // counts travel with their events
  EXPECT_EQ(table[1].count, 3);
  EXPECT_EQ(table[2].count, 5);
  EXPECT_EQ(table.hashAt(0), hash_c);
  EXPECT_EQ(table.hashAt(1), hash_a);
  // Found at their new indices; an event already there is not added again, a new one comes last.
  EXPECT_EQ(table.find(a, eventKeyHash(a)), 1);
  EXPECT_EQ(table.intern(b), 2);
  EXPECT_EQ(table.intern(c), 0);
  const Event d = makeGemm(8, 16, 64, "nt", DType::kBf16);
  EXPECT_EQ(table.intern(d), 3);
  EXPECT_EQ(table.size(), 4);

  // Not a permutation of every index: refused before anything moves.
  EXPECT_THROW(table.reorder({0, 1, 2}), Error);
  EXPECT_THROW(table.reorder({0, 1, 2, 2}), Error);
  EXPECT_EQ(table[0].signature, c.signature());
  EXPECT_EQ(table[3].signature, d.signature());
}

// clear() empties the table but keeps its storage for the next events: after it, a table
// interning other events (more of them than its first index held: the index grows past 16 slots)
// numbers, finds and counts them as a new table does, and finds none of the events it held.
TEST(EventTable, AClearedTableNumbersFindsAndCountsLikeANewOne) {
  auto gemm = [](int64_t n) { return makeGemm(8, n, 32, "nt", DType::kBf16); };
  EventTable table;
  for (int64_t n = 1; n <= 5; ++n) ASSERT_EQ(table.intern(gemm(n)), n - 1);
  // Every kept event carries a count, so whichever of them intern() reuses must be reset.
  for (int i = 0; i < 5; ++i) table.addCount(i, 9 + i);
  table.clear();
  EXPECT_EQ(table.size(), 0);
  EXPECT_EQ(table.find(gemm(1), eventKeyHash(gemm(1))), -1);

  // appendNew of a copy (into a kept event's storage) keeps the count it is given.
  const Event sum = makeCompute("add", {{"elems", 64}}, "", DType::kBf16);
  const UniqueEvent add{sum, sum.signature(), 4};
  EXPECT_EQ(table.appendNew(add, eventKeyHash(sum)), 0);
  // 40 events (the first into kept storage, then past the index's first 16 slots), each
  // interned twice: the second time found, as a new table numbers them.
  EventTable fresh;
  fresh.appendNew(add, eventKeyHash(sum));
  for (int64_t n = 100; n < 140; ++n) {
    const int index = table.intern(gemm(n));
    EXPECT_EQ(index, fresh.intern(gemm(n)));
    EXPECT_EQ(index, n - 99);
    EXPECT_EQ(table.intern(gemm(n)), index);
  }
  ASSERT_EQ(table.size(), 41);
  EXPECT_EQ(table[0].signature, sum.signature());
  EXPECT_EQ(table[0].count, 4);
  EXPECT_EQ(table.find(sum, eventKeyHash(sum)), 0);
  for (int64_t n = 100; n < 140; ++n) {
    const int i = static_cast<int>(n - 99);
    EXPECT_EQ(table[i].signature, gemm(n).signature());
    EXPECT_EQ(table[i].event.dims, gemm(n).dims);
    EXPECT_EQ(table[i].count, 0);
    EXPECT_EQ(table.find(gemm(n), eventKeyHash(gemm(n))), i);
  }
  for (int64_t n = 1; n <= 5; ++n) EXPECT_EQ(table.find(gemm(n), eventKeyHash(gemm(n))), -1);
}

TEST(EventTable, EveryComputeOpFitsTheFixedValueArray) {
  // makeCompute keeps an event's dim values in an array of kMaxComputeDims.
  for (const auto& [name, rule] : computeRules()) {
    EXPECT_LE(rule.dims.size() + rule.optional_dims.size(), kMaxComputeDims) << name;
  }
  // The longest: flash attention's five dims, and a GEMM with its optional SM margin.
  const Event flash = makeCompute(
      "flash_attn_fwd",
      {{"batch", 4}, {"groups", 2}, {"seq", 128}, {"dim", 64}, {"causal", 1}}, "", DType::kBf16);
  EXPECT_EQ(flash.dims.size(), 5u);
  const Event margin = makeCompute("gemm", {{"m", 8}, {"n", 16}, {"k", 32}, {"sm_margin", 4}},
                                   "nt", DType::kBf16);
  // 2 m n k flops, whatever the margin: 2 x 8 x 16 x 32 = 8192.
  EXPECT_DOUBLE_EQ(margin.flops, 8192.0);
  // m k + k n + m n = 256 + 512 + 128 = 896 elements of 2 bytes.
  EXPECT_EQ(margin.memory_bytes, 1792);
}

}  // namespace
}  // namespace evsim

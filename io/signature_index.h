#pragma once
// The profile database's index from an event signature to its record's position: an
// open-addressing hash table (linear probing) of positions and hash tags.
//
// Why not std::unordered_map<std::string, size_t>: that copies every signature into a node of its
// own (a key string on the heap and a node per record). For a 400,000-entry profile those copies
// were a third of the loaded database's memory and the lookups 15% of its load time
// (bench/RESULTS.md, issue 33). Here the keys stay in the records, a slot is 8 bytes, and a probe
// compares the 32-bit tag before it touches a key.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace evsim {

class SignatureIndex {
 public:
  static constexpr size_t kAbsent = static_cast<size_t>(-1);

  // Room for `entries` keys without growing.
  void reserve(size_t entries) {
    if (entries * 2 > slots_.size()) rehash(entries * 2);
  }
  size_t size() const { return size_; }

  // The position stored under `key`, or kAbsent. `key_of(position)` returns a stored key.
  template <class KeyOf>
  size_t find(std::string_view key, const KeyOf& key_of) const {
    if (slots_.empty()) return kAbsent;
    const uint32_t tag = tagOf(key);
    for (size_t i = tag & mask(); slots_[i].position_plus_one != 0; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.tag == tag && key_of(s.position_plus_one - 1) == key) return s.position_plus_one - 1;
    }
    return kAbsent;
  }

  // Stores `position` under `key` unless the key is there; returns kAbsent when stored, else the
  // position already stored (nothing changed).
  template <class KeyOf>
  size_t insert(std::string_view key, size_t position, const KeyOf& key_of) {
    // At most half full: linear probing's expected probe count stays below ~2.5.
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    return insertTagged(key, tagOf(key), position, key_of);
  }

  // Stores positions 0..n-1 under key_of(0..n-1) into an empty index; returns kAbsent, or the
  // first position whose key was stored before it. Why not n insert() calls: each lands on a
  // random slot of a table larger than the cache, and that miss is most of a binary profile's load
  // (io/profile_rows.h); here the home slot of the key kAhead positions on is fetched early.
  template <class KeyOf>
  size_t insertAll(size_t n, const KeyOf& key_of) {
    reserve(n);
    constexpr size_t kAhead = 16;
    uint32_t tags[kAhead];
    auto fetch = [&](size_t p) {
      tags[p % kAhead] = tagOf(key_of(p));
      __builtin_prefetch(&slots_[tags[p % kAhead] & mask()], /*rw=*/1);
    };
    for (size_t p = 0; p < std::min(n, kAhead); ++p) fetch(p);
    for (size_t p = 0; p < n; ++p) {
      const uint32_t tag = tags[p % kAhead];
      if (insertTagged(key_of(p), tag, p, key_of) != kAbsent) return p;
      if (p + kAhead < n) fetch(p + kAhead);
    }
    return kAbsent;
  }

 private:
  // insert() once the table has room, with the key's tag known.
  template <class KeyOf>
  size_t insertTagged(std::string_view key, uint32_t tag, size_t position, const KeyOf& key_of) {
    size_t i = tag & mask();
    for (; slots_[i].position_plus_one != 0; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.tag == tag && key_of(s.position_plus_one - 1) == key) return s.position_plus_one - 1;
    }
    slots_[i] = Slot{static_cast<uint32_t>(position + 1), tag};
    ++size_;
    return kAbsent;
  }

  struct Slot {
    uint32_t position_plus_one = 0;  // 0: empty
    uint32_t tag = 0;                // the key's hash, low 32 bits; also its home slot
  };

  static uint32_t tagOf(std::string_view key) {
    return static_cast<uint32_t>(std::hash<std::string_view>{}(key));
  }
  size_t mask() const { return slots_.size() - 1; }

  // Moves every slot into a table of at least `min_slots` slots (a power of two). The tags give
  // the home slots, so no key is read again.
  void rehash(size_t min_slots) {
    size_t n = 16;
    while (n < min_slots) n *= 2;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    for (const Slot& s : old) {
      if (s.position_plus_one == 0) continue;
      size_t i = s.tag & mask();
      while (slots_[i].position_plus_one != 0) i = (i + 1) & mask();
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace evsim

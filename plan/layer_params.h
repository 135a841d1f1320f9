#pragma once
// A count per layer of one model chunk on one rank (its parameters, or their routed experts'
// share), in one sorted array: kHeadLayer, kEmbeddingLayer, then the blocks in order (the order a
// std::map<int, int64_t> would iterate them in, which the plan's DDP buckets and FSDP units
// follow). A plan core holds two per chunk and every search simulation builds a core: a map
// allocated a node per layer, freed with the core, most of them under the search heap's lock
// (bench/RESULTS.md, session 29, alloc29); this allocates once per chunk.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "common/error.h"

namespace evsim {

class LayerParams {
 public:
  using Entry = std::pair<int, int64_t>;  // {layer, count}

  LayerParams() = default;
  // In any order; a layer given twice keeps its last count.
  LayerParams(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) set(e.first, e.second);
  }

  void reserve(size_t layers) { entries_.reserve(layers); }
  void clear() { entries_.clear(); }  // keeps the storage
  // Sets `layer`'s count (appended at once when past the last layer: a chunk's blocks come in
  // order).
  void set(int layer, int64_t count) {
    if (entries_.empty() || entries_.back().first < layer) {
      entries_.emplace_back(layer, count);
      return;
    }
    const auto at = lowerBound(layer);
    if (at != entries_.end() && at->first == layer) {
      at->second = count;
    } else {
      entries_.insert(at, Entry{layer, count});
    }
  }
  // `layer`'s count, or nullptr when it has none.
  const int64_t* find(int layer) const {
    const auto at = lowerBound(layer);
    return at != entries_.end() && at->first == layer ? &at->second : nullptr;
  }
  int64_t* find(int layer) {
    const auto at = lowerBound(layer);
    return at != entries_.end() && at->first == layer ? &at->second : nullptr;
  }
  bool contains(int layer) const { return find(layer) != nullptr; }
  // `layer`'s count; an Error when it has none (a plan's bug, as std::map::at's throw was).
  int64_t at(int layer) const {
    const int64_t* count = find(layer);
    EVSIM_CHECK(count != nullptr, "no count for layer {} of a chunk", layer);
    return *count;
  }
  int64_t valueOr(int layer, int64_t fallback) const {
    const int64_t* count = find(layer);
    return count != nullptr ? *count : fallback;
  }

  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<Entry>::const_iterator lowerBound(int layer) const {
    return std::lower_bound(entries_.begin(), entries_.end(), layer,
                            [](const Entry& e, int l) { return e.first < l; });
  }
  std::vector<Entry>::iterator lowerBound(int layer) {
    return std::lower_bound(entries_.begin(), entries_.end(), layer,
                            [](const Entry& e, int l) { return e.first < l; });
  }

  std::vector<Entry> entries_;
};

}  // namespace evsim

#pragma once
// The pruned search's candidates waiting to be simulated (pruned_search.h), and the two pools
// that hold them in one array each rather than one tree node each: a pass leaves ~16,000 of them
// (~200 bytes each) beside its simulations, and as nodes they lay one every ~1.4 KB over the ~22
// MB the closed-form tier had used, so none of its freed space could take a simulation's arrays
// of megabytes: a two-thread search of Llama 3.1 405B on 1,024 GPUs grew its heap to ~50 MiB for
// ~38 MiB in use (issue 34 item 2; bench/RESULTS.md, session 28, mem28).

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "modeler/closed_form_tier.h"
#include "plan/strategy.h"

namespace evsim::pruned {

// A fitting candidate waiting to be simulated, ordered by bound, then enumeration order.
struct Pending {
  double bound_us = 0;
  size_t index = 0;
  Strategy strategy;
  ClosedFormResult closed;
  // Waiting for its sharing pass (unshared_pool_): the flows that pass lists (sharingFlowCount,
  // from its first pass), for its memory estimate.
  size_t sharing_flows = 0;
};
// A candidate's place in the pool's order: (bound, enumeration index), unique per candidate.
struct PoolKey {
  double bound_us = std::numeric_limits<double>::infinity();
  size_t index = std::numeric_limits<size_t>::max();
};
inline bool operator<(const PoolKey& a, const PoolKey& b) {
  if (a.bound_us != b.bound_us) return a.bound_us < b.bound_us;
  return a.index < b.index;
}
inline PoolKey keyOf(const Pending& p) { return PoolKey{p.bound_us, p.index}; }
struct ByBound {
  bool operator()(const Pending& a, const Pending& b) const { return keyOf(a) < keyOf(b); }
};

// One worker's pool during a pass: the candidates it keeps, the worst key on top (a max-heap by
// ByBound), so that the worst leaves when the pool is over its capacity. Grows to at most
// `capacity` + 1 entries (no doubling past it).
class WorkerPool {
 public:
  explicit WorkerPool(size_t capacity = 0) : capacity_(capacity) {}
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  void push(Pending candidate) {
    if (items_.size() == items_.capacity()) {
      items_.reserve(std::min(std::max<size_t>(2 * items_.capacity(), 64), capacity_ + 1));
    }
    items_.push_back(std::move(candidate));
    std::push_heap(items_.begin(), items_.end(), ByBound{});
  }
  const Pending& worst() const { return items_.front(); }
  void popWorst() {
    std::pop_heap(items_.begin(), items_.end(), ByBound{});
    items_.pop_back();
  }
  // Its candidates, in no order; the pool is left empty, its memory freed.
  std::vector<Pending> take() {
    std::vector<Pending> out = std::move(items_);
    items_ = {};
    return out;
  }

 private:
  size_t capacity_;
  std::vector<Pending> items_;
};

// The search's pool over the simulation rounds: sorted by ByBound, taken best first, pruned worst
// first. Its array is freed once it is empty.
class PendingQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  const Pending& best() const { return items_[head_]; }
  const Pending& worst() const { return items_.back(); }
  Pending takeBest() {
    Pending out = std::move(items_[head_++]);
    if (empty()) clear();
    return out;
  }
  void dropWorst() {
    items_.pop_back();
    if (empty()) clear();
  }
  // The queue's candidates and `pools`' together, sorted, the best `capacity` of them kept (each
  // moved once: the keys are sorted, not the ~200-byte candidates); the pools are left empty.
  // Returns how many were left out, and the least key of those (PoolKey{} if none).
  std::pair<size_t, PoolKey> merge(std::vector<WorkerPool>& pools, size_t capacity);
  void clear() {
    items_ = {};
    head_ = 0;
  }

 private:
  std::vector<Pending> items_;
  size_t head_ = 0;  // items_[0, head_) were taken
};

inline std::pair<size_t, PoolKey> PendingQueue::merge(std::vector<WorkerPool>& pools,
                                                       size_t capacity) {
  std::vector<std::vector<Pending>> parts;
  parts.reserve(pools.size() + 1);
  if (!empty()) {
    items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
    parts.push_back(std::move(items_));
  }
  for (WorkerPool& pool : pools) parts.push_back(pool.take());
  struct Ref {
    PoolKey key;
    unsigned part;
    unsigned at;
  };
  std::vector<Ref> order;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (size_t i = 0; i < parts[p].size(); ++i) {
      order.push_back({keyOf(parts[p][i]), static_cast<unsigned>(p), static_cast<unsigned>(i)});
    }
  }
  std::sort(order.begin(), order.end(), [](const Ref& a, const Ref& b) { return a.key < b.key; });
  const size_t kept = std::min(capacity, order.size());
  std::vector<Pending> sorted;
  sorted.reserve(kept);
  for (size_t i = 0; i < kept; ++i) sorted.push_back(std::move(parts[order[i].part][order[i].at]));
  items_ = std::move(sorted);
  head_ = 0;
  return {order.size() - kept, kept < order.size() ? order[kept].key : PoolKey{}};
}

}  // namespace evsim::pruned

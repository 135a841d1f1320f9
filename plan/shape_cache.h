#pragma once
// A small, thread-safe cache of values computed once per pipeline shape (schedule, P, v, m) and
// shared: the schedules' orders and activation states (schedules/registry.cpp) and the task graphs
// (task_graph.cpp).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace evsim {

using ShapeKey = std::tuple<int, int, int, int64_t, int>;  // (schedule, P, v, m, N)

// Empties every ShapeCache of the process (the values in use stay alive with their users). A
// search calls it when its closed-form pass ends and after each simulation: the orders, states and
// graphs of shapes already done would otherwise sit beside the next simulations, whose peak is the
// search's (issue 34 item 2). Thread-safe; only costs recomputing a shape asked for again.
void releaseShapeCaches();

namespace detail {
// The caches releaseShapeCaches() empties: each ShapeCache registers its clear() while it lives.
struct ShapeCacheRegistry {
  std::mutex mutex;
  std::vector<std::pair<const void*, std::function<void()>>> clears;
  static ShapeCacheRegistry& instance() {
    static ShapeCacheRegistry registry;
    return registry;
  }
};
}  // namespace detail

inline void releaseShapeCaches() {
  detail::ShapeCacheRegistry& registry = detail::ShapeCacheRegistry::instance();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (auto& [cache, clear] : registry.clears) clear();
}

// Values computed once per (schedule, shape) and shared, thread-safe: the most recently used are
// kept up to `capacity` units of size (what `size` says a value weighs); larger ones not at all.
template <typename T>
class ShapeCache {
 public:
  explicit ShapeCache(size_t capacity) : capacity_(capacity) {
    detail::ShapeCacheRegistry& registry = detail::ShapeCacheRegistry::instance();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.clears.emplace_back(this, [this] { clear(); });
  }
  ~ShapeCache() {
    detail::ShapeCacheRegistry& registry = detail::ShapeCacheRegistry::instance();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.clears.erase(std::remove_if(registry.clears.begin(), registry.clears.end(),
                                         [this](const auto& c) { return c.first == this; }),
                          registry.clears.end());
  }
  ShapeCache(const ShapeCache&) = delete;
  ShapeCache& operator=(const ShapeCache&) = delete;

  // Forgets every value (their users keep theirs).
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.clear();
    ages_.clear();
    cached_ = 0;
  }

  template <typename Compute, typename Size>
  std::shared_ptr<const T> get(const ShapeKey& key, Compute compute, Size size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        ages_.splice(ages_.end(), ages_, it->second.age);
        return it->second.value;
      }
    }
    // Computed outside the lock; two threads racing on a miss compute the same value.
    auto value = std::make_shared<const T>(compute());
    const size_t units = size(*value);
    if (units > capacity_ / 4) return value;  // too large to keep
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = cache_.try_emplace(key, Entry{value, units, ages_.end()});
    if (!inserted) return it->second.value;
    it->second.age = ages_.insert(ages_.end(), key);
    cached_ += units;
    while (cached_ > capacity_) {
      auto oldest = cache_.find(ages_.front());
      cached_ -= oldest->second.units;
      cache_.erase(oldest);
      ages_.pop_front();
    }
    return value;
  }

 private:
  struct Entry {
    std::shared_ptr<const T> value;
    size_t units = 0;
    std::list<ShapeKey>::iterator age;
  };
  const size_t capacity_;
  std::mutex mutex_;
  std::map<ShapeKey, Entry> cache_;
  std::list<ShapeKey> ages_;  // least recently used first
  size_t cached_ = 0;
};

}  // namespace evsim

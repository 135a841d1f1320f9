#pragma once
// A small, thread-safe cache of values computed once per pipeline shape (schedule, P, v, m) and
// shared: the schedules' orders and activation states (schedules/registry.cpp) and the task graphs
// (task_graph.cpp).

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace evsim {

using ShapeKey = std::tuple<int, int, int, int64_t, int>;  // (schedule, P, v, m, N)

// Values computed once per (schedule, shape) and shared, thread-safe: the most recently used are
// kept up to `capacity` units of size (what `size` says a value weighs); larger ones not at all.
template <typename T>
class ShapeCache {
 public:
  explicit ShapeCache(size_t capacity) : capacity_(capacity) {}

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

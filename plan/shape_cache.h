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
// kept up to `capacity` units of size (what `size` says a value weighs). A value larger than a
// quarter of that is not kept, only remembered weakly (the last one): while its user still holds
// it (a simulation's task graph holds its orders), the next request for its shape gets it again
// instead of computing it twice (issue 34 item 3: above 131,072 tasks a simulate built the device
// orders once for its task graph and again for its memory estimate).
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
      if (large_key_ == key) {
        if (std::shared_ptr<const T> held = large_.lock()) return held;
      }
    }
    // Computed outside the lock; two threads racing on a miss compute the same value.
    auto value = std::make_shared<const T>(compute());
    const size_t units = size(*value);
    std::lock_guard<std::mutex> lock(mutex_);
    if (units > capacity_ / 4) {  // too large to keep: remembered while someone holds it
      large_key_ = key;
      large_ = value;
      return value;
    }
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
  ShapeKey large_key_{-1, 0, 0, 0, 0};  // the last value too large to keep, held weakly
  std::weak_ptr<const T> large_;
};

}  // namespace evsim

#pragma once
// A small, thread-safe cache of values computed once per pipeline shape (schedule, P, v, m) and
// shared: the schedules' orders and activation states (schedules/registry.cpp) and the task graphs
// (task_graph.cpp).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

namespace evsim {

using ShapeKey = std::tuple<int, int, int, int64_t, int>;  // (schedule, P, v, m, N)

// Empties every ShapeCache of the process (the values in use stay alive with their users, and
// are handed out again while they are). A
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
// A value some caller still holds is handed out again whether kept or not (released or too large
// to keep): it costs no memory, where computing it again would cost a second copy beside the
// first (issue 34: the two threads of a search simulating two candidates of one shape built two
// 131,072-task graphs, 8 MB each). A key being computed is computed once: another thread asking
// for it waits for that result.
// The task graphs' and the schedules' orders' caches (task_graph.cpp, schedules/registry.cpp)
// keep values of up to this many tasks after their last user lets them go (a quarter of their
// capacity, as every ShapeCache; fused graphs up to a quarter of this): a simulation that lets
// its graph and orders go frees them only above this size (the search's memory estimate,
// modeler/pruned_search.cpp simulationBytes).
inline constexpr size_t kKeptShapeTasks = size_t{1} << 16;

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

  // Forgets every value kept (those their users hold stay theirs, and are handed out while held).
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.clear();
    ages_.clear();
    cached_ = 0;
    forgetExpired();
  }

  template <typename Compute, typename Size>
  std::shared_ptr<const T> get(const ShapeKey& key, Compute compute, Size size) {
    std::optional<std::promise<Value>> promise;  // only on a miss
    std::shared_future<Value> computing;         // another thread's computation of the key
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        ages_.splice(ages_.end(), ages_, it->second.age);
        return it->second.value;
      }
      if (auto held = held_.find(key); held != held_.end()) {
        if (Value value = held->second.lock()) return value;
        held_.erase(held);
      }
      if (auto other = computing_.find(key); other != computing_.end()) {
        computing = other->second;
      } else {
        computing_.emplace(key, promise.emplace().get_future().share());
      }
    }
    if (!promise) return computing.get();  // rethrows what its computation threw
    // Computed outside the lock.
    Value value;
    try {
      value = std::make_shared<const T>(compute());
    } catch (...) {
      promise->set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mutex_);
      computing_.erase(key);
      throw;
    }
    promise->set_value(value);
    const size_t units = size(*value);
    std::lock_guard<std::mutex> lock(mutex_);
    computing_.erase(key);
    forgetExpired();
    held_[key] = value;
    if (units > capacity_ / 4) return value;  // too large to keep
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
  using Value = std::shared_ptr<const T>;
  struct Entry {
    Value value;
    size_t units = 0;
    std::list<ShapeKey>::iterator age;
  };
  // Under the lock: drops the entries of values no one holds any more.
  void forgetExpired() {
    std::erase_if(held_, [](const auto& entry) { return entry.second.expired(); });
  }

  const size_t capacity_;
  std::mutex mutex_;
  std::map<ShapeKey, Entry> cache_;
  std::list<ShapeKey> ages_;  // least recently used first
  size_t cached_ = 0;
  // Every value handed out, while someone holds it (kept or not); the keys being computed.
  std::map<ShapeKey, std::weak_ptr<const T>> held_;
  std::map<ShapeKey, std::shared_future<Value>> computing_;
};

}  // namespace evsim

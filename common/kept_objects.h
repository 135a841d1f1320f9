#pragma once
// Objects let go by one user and kept, storage and all, for the next to fill anew: a stack of
// owned objects behind a mutex, at most `capacity` kept (one more put is freed). Threads take and
// put concurrently. The plan cores a search builds into (plan/core_bin.h) and the search workers'
// scratch simulations (modeler/pruned_search_state.h) are kept this way.

#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace evsim {

template <typename T>
class KeptObjects {
 public:
  explicit KeptObjects(size_t capacity = std::numeric_limits<size_t>::max())
      : capacity_(capacity) {}

  // The object put last (its contents a previous user's), or nullptr when none is kept.
  std::unique_ptr<T> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.empty()) return nullptr;
    std::unique_ptr<T> object = std::move(kept_.back());
    kept_.pop_back();
    return object;
  }

  // Keeps `object` while fewer than the capacity are kept, else frees it (once the lock is let go).
  void put(std::unique_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.size() < capacity_) kept_.push_back(std::move(object));
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return kept_.size();
  }

  // Frees every kept object.
  void clear() {
    std::vector<std::unique_ptr<T>> freed;  // freed after the lock is let go
    std::lock_guard<std::mutex> lock(mutex_);
    freed.swap(kept_);
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> kept_;
};

}  // namespace evsim

#pragma once
// A memo shared by threads: a key's value is computed once, by the first thread to miss it;
// another thread missing it meanwhile waits for that result instead of computing it too. Used for
// the closed-form tier's layer times (closed_form_layer_times.cpp).
//
// A computation that throws is not kept: its waiters rethrow the exception and a later look
// computes the key again (a transient failure does not stick). Only the entry that call inserted is
// dropped: the memo is emptied when it would grow past its capacity, and after such a clear another
// thread may have inserted (and be computing, or have finished) the same key; erasing by key alone
// would drop that thread's entry. Each insertion carries a ticket, and the failing call erases the
// key only while its own ticket is there.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <utility>

namespace evsim {

template <typename Key, typename Value>
class SharedMemo {
 public:
  explicit SharedMemo(size_t capacity) : capacity_(capacity) {}

  // The value of `key`, computed by `compute()` (a callable returning Value) when no thread has
  // (or is computing) it; rethrows what that computation threw.
  template <typename Compute>
  Value get(const Key& key, Compute&& compute) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (auto known = entries_.find(key); known != entries_.end()) {
      const std::shared_future<Value> result = known->second.value;
      lock.unlock();  // wait for its computation (if still running) without holding the others up
      return result.get();
    }
    if (entries_.size() >= capacity_) entries_.clear();
    std::promise<Value> computed;
    const uint64_t ticket = next_ticket_++;
    entries_.emplace(key, Entry{computed.get_future().share(), ticket});
    lock.unlock();
    Value value;
    try {
      value = std::forward<Compute>(compute)();
    } catch (...) {
      computed.set_exception(std::current_exception());  // a waiter rethrows it too
      const std::lock_guard<std::mutex> relock(mutex_);
      auto mine = entries_.find(key);
      if (mine != entries_.end() && mine->second.ticket == ticket) entries_.erase(mine);
      throw;
    }
    computed.set_value(value);
    return value;
  }

  // Forgets every entry (a computation under way still completes for its waiters).
  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

  size_t size() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

 private:
  struct Entry {
    std::shared_future<Value> value;
    uint64_t ticket = 0;  // which insertion this is (see above)
  };
  const size_t capacity_;
  mutable std::mutex mutex_;
  uint64_t next_ticket_ = 0;
  std::map<Key, Entry> entries_;
};

}  // namespace evsim

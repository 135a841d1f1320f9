#pragma once
// A minimal work-sharing loop for the search: f(0) ... f(n-1) on up to `threads` std::threads
// (0: hardware_concurrency), each taking the next index. The first exception stops the remaining
// work and is rethrown on the caller's thread. Results must not depend on which thread ran what:
// callers write to per-index slots and combine them in index order afterwards.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cancel.h"

namespace evsim {

inline unsigned resolveThreads(unsigned threads) {
  return threads ? threads : std::max(1u, std::thread::hardware_concurrency());
}

template <class F>
void parallelFor(size_t n, unsigned threads, F&& f) {
  if (n == 0) return;
  unsigned count = static_cast<unsigned>(std::min<size_t>(resolveThreads(threads), n));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        throwIfCancelled();  // common/cancel.h: a Python caller's Ctrl-C
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  if (count <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(count);
    for (unsigned t = 0; t < count; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace evsim

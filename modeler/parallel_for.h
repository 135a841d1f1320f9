#pragma once
// A minimal work-sharing loop for the search: f(0) ... f(n-1) on up to `threads` workers
// (0: hardware_concurrency), each taking the next index; the workers are the calling thread's
// team (worker_team.h) when it has one, else threads started for the call. The first exception
// stops the remaining work and is rethrown on the caller's thread. Results must not depend on which
// thread ran what: callers write to per-index slots and combine them in index order afterwards.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cancel.h"
#include "modeler/worker_team.h"

namespace evsim {

inline unsigned resolveThreads(unsigned threads) {
  return threads ? threads : std::max(1u, std::thread::hardware_concurrency());
}

// f(i, w) for i in 0..n-1 on up to `threads` workers, w in 0..workers-1 the worker that runs it
// (for per-worker scratch that needs no lock); each worker takes the next `block` consecutive
// indices at a time, so neighbouring indices tend to share a worker (and its memo).
template <class F>
void parallelForWorkers(size_t n, unsigned threads, size_t block, F&& f) {
  if (n == 0) return;
  block = std::max<size_t>(block, 1);
  const size_t blocks = (n + block - 1) / block;
  unsigned count = static_cast<unsigned>(std::min<size_t>(resolveThreads(threads), blocks));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&](unsigned w) {
    for (;;) {
      const size_t begin = next.fetch_add(block);
      if (begin >= n) return;
      try {
        throwIfCancelled();  // common/cancel.h: a Python caller's Ctrl-C
        for (size_t i = begin; i < std::min(n, begin + block); ++i) f(i, w);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  runOnThreads(count, std::ref(worker));  // worker_team.h: the search's team when it has one
  if (error) std::rethrow_exception(error);
}

// f(w) once for each worker w in 0..workers-1, each on a thread of its own (one worker, or worker 0
// of the calling thread's team: on the caller's), all running at once: unlike parallelForWorkers,
// no thread runs two workers' calls one after the other when another thread starts late, so every
// worker's call is under way beside the others' (the shared enumeration's walks,
// candidate_stream.h). The first exception is rethrown on the caller's thread once every worker has
// returned.
template <class F>
void runWorkers(unsigned workers, F&& f) {
  runOnThreads(workers, std::ref(f));
}

template <class F>
void parallelFor(size_t n, unsigned threads, F&& f) {
  parallelForWorkers(n, threads, 1, [&](size_t i, unsigned) { f(i); });
}

}  // namespace evsim

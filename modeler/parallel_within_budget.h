#pragma once
// A work-sharing loop whose items run side by side only while their memory fits a budget: the
// pruned search's simulations (issue 34 item 2). Two threads each simulating one of Llama 3.1
// 405B's largest candidates (~10^6 link-sharing flows and a 131,072-task graph each) held twice
// what one does, 94 MB against one thread's 58; while one runs, the other thread takes the
// smaller simulations of the round instead of a second large one.
//
// f(i) for every i in 0..n-1, on up to `threads` workers (0: hardware_concurrency; parallel_for.h's
// threads: the calling thread's team or threads of the call's own), each
// worker taking the first item not yet taken, in index order (the caller's order of preference,
// largest first), that fits: the weights of the items running at once never sum past `budget`,
// but an item alone always runs (one heavier than the budget then runs alone). So that the first
// item left waiting is not passed over until the end (it would then run alone while the other
// workers have nothing left to do), an item is taken past it only if it would also fit beside it
// (weight + min(its weight, budget) <= budget): the first starts as soon as the items before it
// are done. A worker with nothing that fits waits for an item to end. The first exception stops
// the items not yet started and is rethrown on the caller's thread. As parallel_for.h: results
// must not depend on which thread ran what (callers write to per-index slots). With
// EVSIM_PARALLEL_PROFILE=1 each worker's busy, waiting and idle time is recorded
// (parallel_profile.h).

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cancel.h"
#include "modeler/parallel_for.h"
#include "modeler/parallel_profile.h"

namespace evsim {

template <class F>
void parallelForWithinBudget(const std::vector<size_t>& weights, size_t budget, unsigned threads,
                             F&& f) {
  const size_t n = weights.size();
  if (n == 0) return;
  const unsigned count = static_cast<unsigned>(std::min<size_t>(resolveThreads(threads), n));
  std::mutex mutex;
  std::condition_variable item_ended;
  std::vector<char> taken(n, 0);
  size_t first_left = 0;  // the first item not taken (n: none)
  size_t running = 0, weight_running = 0;
  std::exception_ptr error;
  parallel_profile::Region profile("parallelForWithinBudget", count);
  // Under the lock: the item to run next, or n when none fits now.
  auto choose = [&]() -> size_t {
    auto fits = [&](size_t i) { return running == 0 || weight_running + weights[i] <= budget; };
    if (fits(first_left)) return first_left;
    const size_t beside_first = budget - std::min(weights[first_left], budget);
    for (size_t i = first_left + 1; i < n; ++i) {
      if (!taken[i] && fits(i) && weights[i] <= beside_first) return i;
    }
    return n;
  };
  auto worker = [&](unsigned w) {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (error || first_left == n) return;
      const size_t i = choose();
      if (i == n) {
        const parallel_profile::Stamp waiting = profile.stamp();
        item_ended.wait(lock);
        profile.waited(w, waiting);
        continue;
      }
      taken[i] = 1;
      while (first_left < n && taken[first_left]) ++first_left;
      ++running;
      weight_running += weights[i];
      lock.unlock();
      std::exception_ptr thrown;
      const parallel_profile::Stamp started = profile.stamp();
      try {
        throwIfCancelled();  // common/cancel.h: a Python caller's Ctrl-C
        f(i);
      } catch (...) {
        thrown = std::current_exception();
      }
      profile.busy(w, started);
      lock.lock();
      if (thrown && !error) error = thrown;
      --running;
      weight_running -= weights[i];
      item_ended.notify_all();
    }
  };
  runOnThreads(count, std::ref(worker));  // worker_team.h: the search's team when it has one
  if (error) std::rethrow_exception(error);
}

}  // namespace evsim

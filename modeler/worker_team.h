#pragma once
// Threads kept for a search's parallel regions (issue 34 item 2). A pruned search runs ~50
// parallel regions (its simulation rounds, each a few milliseconds on Llama 3 70B over 1,024
// GPUs); with fresh std::threads for each, the caller's thread only waited and a new thread
// started on its creator's core: two workers shared one core until the scheduler moved one, while
// the other core idled (bench/RESULTS.md, session 30, sim30: the two-thread rounds were as slow as
// one thread's, their workers off a core ~40% of their busy time with no lock to sleep on).
// A team keeps workers - 1 threads waiting between regions, and the caller's thread works as
// worker 0.
//
// The loops of parallel_for.h and parallel_within_budget.h take the team of the thread that calls
// them (WorkerTeam::Use, installed by the search around its passes), so no signature between the
// search and its loops carries it; where there is none, where it is already running a region (a
// nested loop: inside a worker the calling thread has none), or where it has fewer workers than a
// region asks, they start threads of their own as before.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"

namespace evsim {

// How many threads the team and the loops have started in this process: a search's team starts
// workers - 1 however many regions the search runs (pruned_search_test.cpp counts them).
inline std::atomic<uint64_t>& threadsStarted() {
  static std::atomic<uint64_t> started{0};
  return started;
}

// The message when the system refuses the threads a search asked for (EAGAIN: its thread or
// memory limit): which count failed, and the flag that lowers it.
inline std::string threadStartFailure(unsigned threads, const std::system_error& e) {
  return fmt::format(
      "starting {} worker threads failed ({}): the system's limit; use fewer "
      "--threads",
      threads, e.what());
}

class WorkerTeam {
 public:
  // `workers` >= 1 workers: the caller's thread and workers - 1 threads started now.
  explicit WorkerTeam(unsigned workers) {
    threads_.reserve(workers > 0 ? workers - 1 : 0);
    try {
      for (unsigned w = 1; w < workers; ++w) {
        threads_.emplace_back([this, w] { serve(w); });
        ++threadsStarted();
      }
    } catch (const std::system_error& e) {  // a thread the system would not start
      stop();  // end those started, then say so: the machine's limit, not a bug (was exit 3)
      EVSIM_THROW(EnvironmentError, "{}", threadStartFailure(workers, e));
    } catch (...) {
      stop();
      throw;
    }
  }
  ~WorkerTeam() { stop(); }
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  unsigned workers() const { return static_cast<unsigned>(threads_.size()) + 1; }

  // f(w) for each w in 0..n-1 (n <= workers()), all under way at once: w = 0 on the caller's
  // thread, the others on the team's threads 1..n-1. Returns once every call has returned; the
  // first exception thrown (in time) is then rethrown on the caller's thread. Calling it with
  // n > workers() or while a region is under way (from inside one, or from another thread) is a
  // bug: an Error, not a region that would wait forever for threads that do not exist or
  // overwrite the running region's task.
  void run(unsigned n, const std::function<void(unsigned)>& f) {
    std::unique_lock<std::mutex> lock(mutex_);
    EVSIM_CHECK(n <= workers(), "a region of {} workers on a team of {}", n, workers());
    EVSIM_CHECK(!running_, "a region started while another is under way on the team");
    runClaimed(lock, n, f);
  }

  // run(n, f) if the team can take it now (n fits and no region is under way), checked and
  // claimed under one lock, so that two threads cannot both see it free; false (nothing run)
  // otherwise.
  bool tryRun(unsigned n, const std::function<void(unsigned)>& f) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (n > workers() || running_) return false;
    runClaimed(lock, n, f);
    return true;
  }

  // The team the calling thread's parallel loops use while this object lives (the previous one
  // after). Install it on the thread that owns the team.
  class Use {
   public:
    explicit Use(WorkerTeam& team) : previous_(current_) { current_ = &team; }
    ~Use() { current_ = previous_; }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    WorkerTeam* previous_;
  };
  // The calling thread's team (nullptr: none; a team's own threads have none).
  static WorkerTeam* current() { return current_; }

 private:
  // Runs the region with `lock` (on mutex_) held on entry, n and running_ checked by the caller.
  void runClaimed(std::unique_lock<std::mutex>& lock, unsigned n,
                  const std::function<void(unsigned)>& f) {
    task_ = &f;
    task_workers_ = n;
    remaining_ = n > 0 ? n - 1 : 0;
    error_ = nullptr;
    running_ = true;
    ++generation_;
    lock.unlock();
    if (n > 1) start_.notify_all();
    if (n > 0) call(0);
    lock.lock();
    ended_.wait(lock, [&] { return remaining_ == 0; });
    running_ = false;
    task_ = nullptr;
    std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    if (error) std::rethrow_exception(error);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void call(unsigned w) {
    try {
      (*task_)(w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
  void serve(unsigned w) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (w >= task_workers_) continue;  // this region needs fewer workers
      lock.unlock();
      call(w);
      lock.lock();
      if (--remaining_ == 0) ended_.notify_one();
    }
  }

  static inline thread_local WorkerTeam* current_ = nullptr;

  mutable std::mutex mutex_;
  std::condition_variable start_, ended_;
  const std::function<void(unsigned)>* task_ = nullptr;
  unsigned task_workers_ = 0, remaining_ = 0;
  uint64_t generation_ = 0;  // one more per region: a thread runs each region once at most
  bool running_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

// f(w) for each w in 0..n-1 on threads of their own, all under way at once (one worker: on the
// caller's thread), on the calling thread's team when it can take them, else on fresh threads.
// Every call is made; the first exception is rethrown on the caller's thread once all have
// returned.
inline void runOnThreads(unsigned n, const std::function<void(unsigned)>& f) {
  if (n <= 1) {
    if (n == 1) f(0);
    return;
  }
  if (WorkerTeam* team = WorkerTeam::current(); team != nullptr && team->tryRun(n, f)) return;
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  pool.reserve(n);
  // No f(w) starts before every thread has: a thread the system will not start (its thread or
  // memory limit) fails the region before any of its work, not after the started workers' share
  // of a whole search. The gate is opened (or closed for good) on every path below, so no thread
  // waits on it forever; those started are joined either way (a joinable std::thread destroyed is
  // std::terminate).
  enum class Gate { kWait, kGo, kAbort };
  Gate gate = Gate::kWait;
  std::mutex gate_mutex;
  std::condition_variable gate_opened;
  std::optional<std::string> refused;
  std::exception_ptr start_error;
  for (unsigned w = 0; w < n; ++w) {
    try {
      pool.emplace_back([&, w] {
        {
          std::unique_lock<std::mutex> lock(gate_mutex);
          gate_opened.wait(lock, [&] { return gate != Gate::kWait; });
          if (gate == Gate::kAbort) return;
        }
        try {
          f(w);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      });
    } catch (const std::system_error& e) {
      refused = threadStartFailure(n, e);
      break;
    } catch (...) {
      start_error = std::current_exception();
      break;
    }
    ++threadsStarted();
  }
  {
    std::lock_guard<std::mutex> lock(gate_mutex);
    gate = refused || start_error ? Gate::kAbort : Gate::kGo;
  }
  gate_opened.notify_all();
  for (std::thread& t : pool) t.join();
  if (refused) EVSIM_THROW(EnvironmentError, "{}", *refused);
  if (start_error) std::rethrow_exception(start_error);
  if (error) std::rethrow_exception(error);
}

}  // namespace evsim

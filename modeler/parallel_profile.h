#pragma once
// Where a multi-threaded search's wall time goes (issue 34 item 2; bench/RESULTS.md, session 26,
// par34). With EVSIM_PARALLEL_PROFILE=1 in the environment, the pruned search's serial phases
// record their wall time and the CPU time of the thread that ran them, and its parallel regions
// (shareCandidates, parallelForWithinBudget) each worker's time running items (wall and its
// thread's CPU), waiting for an item that fits the memory budget, and idle (the rest of the
// region: starting late, nothing left while another worker finishes); runPrunedSearch prints the
// sums to stderr when it ends. A busy worker's wall beyond its CPU time is time it was runnable
// but off a core (other processes, page faults): on a shared machine that, not the code, is what
// a two-thread wall time loses. Off (the default) each region and item costs a test of a flag read
// once; nothing is recorded.

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace evsim::parallel_profile {

inline bool on() {
  static const bool enabled = [] {
    const char* v = std::getenv("EVSIM_PARALLEL_PROFILE");
    return v != nullptr && v[0] == '1';
  }();
  return enabled;
}

struct Stamp {
  double wall = 0, cpu = 0;  // seconds: the steady clock, the calling thread's CPU time
};

inline Stamp now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return Stamp{wall, static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec)};
}

// A phase's sums over the search. `wall` and `cpu`: the calling thread's, start to end; for a
// parallel region, over its workers: `busy_*` running items, `wait` blocked for an item that fits,
// `idle` the rest of the region's wall (workers x wall - busy - wait).
struct Phase {
  int calls = 0;
  double wall = 0, cpu = 0;
  double busy_wall = 0, busy_cpu = 0, wait = 0, idle = 0;
  bool parallel = false;
};

class Recorder {
 public:
  static Recorder& get() {
    static Recorder r;
    return r;
  }
  void add(const std::string& phase, const Phase& p) {
    std::lock_guard<std::mutex> lock(mutex_);
    Phase& sum = phases_[phase];
    sum.calls += p.calls;
    sum.wall += p.wall;
    sum.cpu += p.cpu;
    sum.busy_wall += p.busy_wall;
    sum.busy_cpu += p.busy_cpu;
    sum.wait += p.wait;
    sum.idle += p.idle;
    sum.parallel = sum.parallel || p.parallel;
  }
  // Prints the phases and their totals against `total_wall`, then forgets them.
  void print(double total_wall) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fprintf(stderr,
                 "parallel profile (s)         calls     wall  thr cpu |  busy wall  busy cpu  "
                 "off-core      wait      idle\n");
    double serial = 0, parallel = 0, busy_cpu = 0, lost = 0;
    for (const auto& [name, p] : phases_) {
      if (p.parallel) {
        std::fprintf(stderr, "  %-24s %7d %8.4f %8s | %10.4f %9.4f %9.4f %9.4f %9.4f\n",
                     name.c_str(), p.calls, p.wall, "-", p.busy_wall, p.busy_cpu,
                     p.busy_wall - p.busy_cpu, p.wait, p.idle);
        parallel += p.wall;
        busy_cpu += p.busy_cpu;
        lost += p.wait + p.idle;
      } else {
        std::fprintf(stderr, "  %-24s %7d %8.4f %8.4f |\n", name.c_str(), p.calls, p.wall, p.cpu);
        serial += p.wall;
        busy_cpu += p.cpu;
      }
    }
    std::fprintf(stderr,
                 "  search %.4f s wall: serial phases %.4f, parallel regions %.4f (their workers "
                 "waiting or idle %.4f worker-s); CPU in phases %.4f s\n",
                 total_wall, serial, parallel, lost, busy_cpu);
    phases_.clear();
  }
  // Forgets what was recorded (what another search, which prints nothing, left).
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    phases_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Phase> phases_;
};

// Records the enclosing scope as a serial phase.
class Scope {
 public:
  explicit Scope(const char* phase) : phase_(on() ? phase : nullptr) {
    if (phase_ != nullptr) from_ = now();
  }
  ~Scope() {
    if (phase_ == nullptr) return;
    const Stamp to = now();
    Recorder::get().add(phase_, Phase{1, to.wall - from_.wall, to.cpu - from_.cpu});
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* phase_;
  Stamp from_;
};

// A parallel region's accounts, one per worker (each on cache lines of its own: the workers write
// them as they go). Constructed and destroyed on the caller's thread around the region; a worker
// w calls busy(w, from) after each item it ran since stamp() gave `from`, waited(w, from) after
// each wait.
class Region {
 public:
  Region(const char* phase, unsigned workers)
      : phase_(on() ? phase : nullptr), workers_(phase_ != nullptr ? workers : 0) {
    if (phase_ != nullptr) start_ = now();
  }
  ~Region() {
    if (phase_ == nullptr) return;
    const Stamp end = now();
    Phase p{1, end.wall - start_.wall, end.cpu - start_.cpu};
    p.parallel = true;
    for (const Worker& w : workers_) {
      p.busy_wall += w.busy_wall;
      p.busy_cpu += w.busy_cpu;
      p.wait += w.wait;
    }
    p.idle = static_cast<double>(workers_.size()) * p.wall - p.busy_wall - p.wait;
    Recorder::get().add(phase_, p);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  Stamp stamp() const { return phase_ != nullptr ? now() : Stamp{}; }
  void busy(unsigned w, Stamp from) {
    if (phase_ == nullptr) return;
    const Stamp to = now();
    workers_[w].busy_wall += to.wall - from.wall;
    workers_[w].busy_cpu += to.cpu - from.cpu;
  }
  void waited(unsigned w, Stamp from) {
    if (phase_ != nullptr) workers_[w].wait += now().wall - from.wall;
  }

 private:
  struct alignas(64) Worker {
    double busy_wall = 0, busy_cpu = 0, wait = 0;
  };
  const char* phase_;
  std::vector<Worker> workers_;
  Stamp start_;
};

}  // namespace evsim::parallel_profile

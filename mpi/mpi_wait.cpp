#include "mpi/mpi_wait.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "mpi/mpi_check.h"
#include "mpi/peers.h"

namespace evsim {

namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks: the deadline is met within this.
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);

double g_timeout_s = kDefaultCommTimeoutS;

// The armed watch: deadline on the steady clock in ns (0: none) and what it guards.
std::mutex g_mutex;
long long g_deadline_ns = 0;
std::string_view g_what;
bool g_watchdog_started = false;

long long nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Names the silent rank when it runs on this node (peers.h); a peer elsewhere cannot be seen.
std::string stalledMessage(std::string_view what) {
  std::string silent = silentPeersOnThisNode();
  if (silent.empty()) {
    silent = allPeersOnThisNode()
                 ? "a peer rank stalled or died"
                 : "a peer rank stalled or died (none on this node is stopped or gone)";
  }
  return fmt::format("rank {}: {} not complete after {:g} s (--comm-timeout {:g}): {}", worldRank(),
                     what, g_timeout_s, g_timeout_s, silent);
}

// How long this process itself was stopped since `last_ns` (updated to now): a gap between two
// looks far longer than a second means SIGSTOP or a frozen host, and its peers were not late, so
// that time does not count against a deadline. 0 otherwise.
long long selfStoppedNs(long long& last_ns) {
  constexpr long long kStoppedGapNs = 1'000'000'000;
  const long long now = nowNs();
  const long long gap = now - last_ns;
  last_ns = now;
  return gap > kStoppedGapNs ? gap : 0;
}

[[noreturn]] void watchdog() {
  long long last_ns = nowNs();
  for (;;) {
    std::this_thread::sleep_for(kWatchdogPeriod);
    std::lock_guard<std::mutex> lock(g_mutex);
    const long long now = nowNs();
    const long long stopped = selfStoppedNs(last_ns);
    if (g_deadline_ns != 0) g_deadline_ns += stopped;
    if (g_deadline_ns != 0 && now > g_deadline_ns) {
      // MPI_Comm_rank is a local query, safe while the main thread waits inside MPI in practice;
      // the message is all this rank can still say.
      const std::string line = stalledMessage(g_what);
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
      std::_Exit(kEnvironmentErrorExitCode);
    }
  }
}

}  // namespace

void setCommTimeout(double seconds) {
  EVSIM_CHECK(std::isfinite(seconds) && seconds > 0, "comm timeout {}", seconds);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_timeout_s = seconds;
  if (!g_watchdog_started) {
    std::thread(watchdog).detach();
    g_watchdog_started = true;
  }
}

double commTimeout() { return g_timeout_s; }

void waitRequest(MPI_Request& request, std::string_view what, WaitStyle style,
                 std::chrono::microseconds sleep_poll) {
  long long deadline = nowNs() + static_cast<long long>(g_timeout_s * 1e9);
  long long last_ns = nowNs();
  for (;;) {
    int done = 0;
    EVSIM_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    deadline += selfStoppedNs(last_ns);
    // The request stays pending: the caller ends the process (MPI_Abort), which frees it.
    if (nowNs() > deadline) EVSIM_THROW(EnvironmentError, "{}", stalledMessage(what));
    if (style == WaitStyle::kSleep) std::this_thread::sleep_for(sleep_poll);
  }
}

CommWatch::CommWatch(std::string_view what) : what_(what) {
  std::lock_guard<std::mutex> lock(g_mutex);
  outer_what_ = g_what;
  outer_deadline_ns_ = g_deadline_ns;
  g_what = what_;
  g_deadline_ns = nowNs() + static_cast<long long>(g_timeout_s * 1e9);
}

CommWatch::~CommWatch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_what = outer_what_;
  g_deadline_ns = outer_deadline_ns_;
}

}  // namespace evsim

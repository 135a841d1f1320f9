#pragma once
// Every wait of eventprof and eventrun on another rank has a deadline: a rank that stops (SIGSTOP,
// a hung node, a deadlock) ends the run after --comm-timeout seconds with one line naming what
// this rank waited for, instead of hanging it. (mpirun notices a rank that dies; nothing notices
// one that stops.)
//
// Two forms. waitRequest polls a non-blocking request against the deadline. CommWatch guards a
// blocking MPI call (the tuned blocking collectives eventprof measures stay what they are): a
// watchdog thread sees the deadline pass while the call has not returned, prints the line and ends
// the process with exit code 1 (std::_Exit: the main thread is inside MPI, so MPI_Abort from
// another thread is not an option without MPI_THREAD_MULTIPLE); mpirun then ends the other ranks.
// A rank that dies is noticed by mpirun, which ends the others with SIGTERM: peers.h's handler
// names it.

#include <mpi.h>

#include <chrono>
#include <string_view>

namespace evsim {

// How a rank waits for MPI: kSpin calls MPI_Wait (Open MPI busy-polls a core); kSleep polls
// MPI_Test and sleeps between polls, leaving the core to ranks that compute when there are more
// ranks than cores.
enum class WaitMode { kSpin, kSleep };

inline constexpr double kDefaultCommTimeoutS = 300;

// Process-wide, set once by main() from --comm-timeout (seconds, > 0); starts the watchdog.
void setCommTimeout(double seconds);
double commTimeout();

enum class WaitStyle {
  kSpin,   // poll without pause, as MPI's blocking calls do (for timed communication)
  kSleep,  // sleep between polls: leaves the core to ranks that compute on a shared host
};

// 50 us between polls of a sleeping wait by default: well under any event's measurement, long
// enough that a waiter costs no CPU.
inline constexpr std::chrono::microseconds kDefaultSleepPoll{50};

// Completes `request`. Throws EnvironmentError "rank R: <what> not complete after T s
// (--comm-timeout T): rank K (pid P) is stopped" when the deadline passes (the silent rank named
// when it runs on this node, peers.h; else "a peer rank stalled or died").
void waitRequest(MPI_Request& request, std::string_view what, WaitStyle style = WaitStyle::kSpin,
                 std::chrono::microseconds sleep_poll = kDefaultSleepPoll);

// Arms the watchdog for the blocking MPI call(s) made during its lifetime. `what` must outlive the
// watch. Watches nest (the innermost one is reported). Costs two uncontended lock operations.
class CommWatch {
 public:
  explicit CommWatch(std::string_view what);
  ~CommWatch();
  CommWatch(const CommWatch&) = delete;
  CommWatch& operator=(const CommWatch&) = delete;

 private:
  std::string_view what_;
  std::string_view outer_what_;
  long long outer_deadline_ns_;
};

}  // namespace evsim

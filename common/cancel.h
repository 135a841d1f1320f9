#pragma once
// Cooperative cancellation of a long computation run for a caller that cannot kill it: the Python
// module runs a command on a worker thread and, on Ctrl-C, asks it to stop (issue 33); the long
// loops (the search's candidates, sampled iterations, timeline rows) look at the flag. The CLI
// never sets it (SIGINT ends the process).

#include <atomic>

#include "common/error.h"

namespace evsim {

// Thrown by throwIfCancelled; the caller that asked for it catches it.
class Cancelled : public Error {
 public:
  using Error::Error;
};

inline std::atomic<bool>& cancelFlag() {
  static std::atomic<bool> flag{false};
  return flag;
}

inline void requestCancel(bool on) { cancelFlag().store(on, std::memory_order_relaxed); }

inline void throwIfCancelled() {
  if (cancelFlag().load(std::memory_order_relaxed)) EVSIM_THROW(Cancelled, "interrupted");
}

}  // namespace evsim

#pragma once
// Progress lines on rank 0's stderr: events done/total, the current event, time elapsed and a
// remaining-time estimate (elapsed / done * left: events differ in cost, so it is rough).

#include <chrono>
#include <cstdio>
#include <string>

namespace evsim {

class Progress {
 public:
  Progress(size_t total, std::FILE* out);

  // Prints "[eventprof] 3/12 done | now: <what> | 1.2 s elapsed, ~3.6 s left".
  void starting(size_t done, const std::string& what);
  double elapsedSeconds() const;

 private:
  size_t total_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_;
};

// Remaining seconds after `done` of `total` events took `elapsed_s`; negative when unknown.
double remainingSecondsEstimate(size_t done, size_t total, double elapsed_s);

}  // namespace evsim

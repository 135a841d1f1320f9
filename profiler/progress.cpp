#include "profiler/progress.h"

#include <fmt/format.h>

namespace evsim {

Progress::Progress(size_t total, std::FILE* out)
    : total_(total), out_(out), start_(std::chrono::steady_clock::now()) {}

double Progress::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double remainingSecondsEstimate(size_t done, size_t total, double elapsed_s) {
  if (done == 0 || done > total) return -1;
  return elapsed_s / double(done) * double(total - done);
}

void Progress::starting(size_t done, const std::string& what) {
  if (out_ == nullptr) return;
  double elapsed = elapsedSeconds();
  double left = remainingSecondsEstimate(done, total_, elapsed);
  std::string eta = left < 0 ? "remaining unknown" : fmt::format("~{:.1f} s left", left);
  fmt::print(out_, "[eventprof] {}/{} done | now: {} | {:.1f} s elapsed, {}\n", done, total_, what,
             elapsed, eta);
  std::fflush(out_);
}

}  // namespace evsim

#include "runner/eventrun_backend_timing.h"

#include "common/error.h"

namespace evsim {

ResolvedTimes resolveGpuTimes(const ReferenceWindow& window, const std::vector<GpuElapsed>& elapsed,
                              const std::vector<bool>& recorded) {
  EVSIM_CHECK(window.after_us >= window.before_us, "reference window [{}, {}] us is reversed",
              window.before_us, window.after_us);
  EVSIM_CHECK(elapsed.size() == recorded.size(), "{} elapsed times for {} actions", elapsed.size(),
              recorded.size());
  const double reference_us = (window.before_us + window.after_us) / 2;
  const double tolerance_ms = kCudaEventResolutionUs / 1000;
  ResolvedTimes out;
  out.times.assign(elapsed.size(), ActionTime{});
  out.error_us = (window.after_us - window.before_us) / 2 + kCudaEventResolutionUs;
  for (size_t a = 0; a < elapsed.size(); ++a) {
    if (!recorded[a]) continue;
    const GpuElapsed& e = elapsed[a];
    EVSIM_CHECK(e.start_ms >= -tolerance_ms && e.end_ms >= e.start_ms - tolerance_ms,
                "action {}: CUDA events at {} .. {} ms from the reference", a, e.start_ms,
                e.end_ms);
    out.times[a] = ActionTime{reference_us + 1000 * e.start_ms, reference_us + 1000 * e.end_ms};
  }
  return out;
}

}  // namespace evsim

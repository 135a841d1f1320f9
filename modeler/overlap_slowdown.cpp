#include "modeler/overlap_slowdown.h"

#include <algorithm>
#include <limits>

namespace evsim {

double slowedEndUs(double start_us, double work_us, std::span<const SlowInterval> transfers) {
  double t = start_us, left = work_us;
  // Walk the op's time from breakpoint to breakpoint (a transfer starting or ending): between two,
  // one factor holds (the largest of the transfers in flight). Few transfers are in flight beside
  // one op, so the quadratic walk is cheap.
  while (left > 0) {
    double factor = 1, next = std::numeric_limits<double>::infinity();
    for (const SlowInterval& s : transfers) {
      if (s.factor <= 1 || s.end_us <= t) continue;
      if (s.start_us <= t) {
        factor = std::max(factor, s.factor);
        next = std::min(next, s.end_us);
      } else {
        next = std::min(next, s.start_us);
      }
    }
    const double reach = left * factor;  // wall time to finish at this rate
    if (t + reach <= next) return t + reach;
    left -= (next - t) / factor;
    t = next;
  }
  return t;
}

}  // namespace evsim

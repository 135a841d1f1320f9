#include "modeler/accumulated_gradients.h"

#include <algorithm>
#include <limits>

#include "common/checked.h"
#include "common/error.h"

namespace evsim {

int64_t AccumulatedGradientPeak::total() const {
  return saturatingAdd(activation_bytes, gradient_bytes);
}

AccumulatedGradientPeak peakWithAccumulatedGradients(
    const std::vector<StageTask>& order, const std::vector<int64_t>& chunk_bytes,
    const std::vector<int64_t>& chunk_held_bytes,
    const std::vector<int64_t>& chunk_gradient_bytes) {
  const size_t chunks = chunk_bytes.size();
  EVSIM_CHECK(chunk_held_bytes.size() == chunks && chunk_gradient_bytes.size() == chunks,
              "{} / {} / {} chunk sizes", chunks, chunk_held_bytes.size(),
              chunk_gradient_bytes.size());
  const bool split = std::any_of(order.begin(), order.end(),
                                 [](const StageTask& t) { return t.phase == Phase::kWeightGrad; });
  // The task whose first run allocates a chunk's gradients: W when split, else B.
  const Phase grads_at = split ? Phase::kWeightGrad : Phase::kBackward;
  std::vector<char> allocated(chunks, 0);
  // In 128 bits, clamped to int64 at the end, as peakActivations does.
  __int128 held = 0, grads = 0, best = -1;
  int in_flight = 0;
  AccumulatedGradientPeak peak;
  auto clamp = [](__int128 x) {
    return static_cast<int64_t>(std::min<__int128>(x, std::numeric_limits<int64_t>::max()));
  };
  for (const StageTask& t : order) {
    EVSIM_CHECK(t.chunk >= 0 && static_cast<size_t>(t.chunk) < chunks, "chunk {} of {}", t.chunk,
                chunks);
    const size_t c = static_cast<size_t>(t.chunk);
    const int64_t kept = split ? chunk_held_bytes[c] : 0;
    switch (t.phase) {
      case Phase::kForward:
        held += chunk_bytes[c];
        ++in_flight;
        break;
      case Phase::kBackward:
        held += kept - chunk_bytes[c];
        if (!split) --in_flight;
        break;
      default:
        held -= kept;
        --in_flight;
        break;
    }
    if (t.phase == grads_at && !allocated[c]) {
      allocated[c] = 1;
      grads += chunk_gradient_bytes[c];
    }
    if (held + grads > best) {
      best = held + grads;
      peak.activation_bytes = clamp(held);
      peak.gradient_bytes = clamp(grads);
      peak.in_flight = in_flight;
    }
  }
  return peak;
}

}  // namespace evsim

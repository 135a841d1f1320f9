#include "modeler/accumulated_gradients.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "common/checked.h"
#include "common/error.h"
#include "common/fnv1a.h"
#include "plan/shape_cache.h"

namespace evsim {

int64_t AccumulatedGradientPeak::total() const {
  return saturatingAdd(activation_bytes, gradient_bytes);
}

namespace {

bool covers(const int* a, const int* b, size_t width) {  // a >= b everywhere
  for (size_t i = 0; i < width; ++i) {
    if (a[i] < b[i]) return false;
  }
  return true;
}

}  // namespace

AccumulationStates accumulationStates(const std::vector<StageTask>& order, int chunks) {
  const bool split = std::any_of(order.begin(), order.end(),
                                 [](const StageTask& t) { return t.phase == Phase::kWeightGrad; });
  const Phase grads_at = split ? Phase::kWeightGrad : Phase::kBackward;
  const size_t v = static_cast<size_t>(chunks), width = 3 * v;
  std::vector<int> now(width, 0);  // held, W inputs held, gradients allocated
  std::unordered_set<std::vector<int>, IntVectorHash> seen;
  std::vector<std::vector<int>> frontier;
  std::vector<int> frontier_in_flight;
  int in_flight = 0;
  for (size_t at = 0; at < order.size(); ++at) {
    const StageTask& t = order[at];
    EVSIM_CHECK(t.chunk >= 0 && t.chunk < chunks, "chunk {} of {}", t.chunk, chunks);
    const size_t c = static_cast<size_t>(t.chunk);
    bool frees = true;  // the task only frees (B without a split, W): below the state before it
    switch (t.phase) {
      case Phase::kForward:
        ++now[c];
        ++in_flight;
        frees = false;
        break;
      case Phase::kBackward:
        --now[c];
        if (split) {
          ++now[v + c];
          frees = false;
        } else {
          --in_flight;
        }
        break;
      default:
        --now[v + c];
        --in_flight;
        break;
    }
    if (t.phase == grads_at && now[2 * v + c] == 0) {
      now[2 * v + c] = 1;
      frees = false;  // it allocates: not below the state before it
    }
    // The state before a forward is below the one after it.
    if (frees || (at + 1 < order.size() && order[at + 1].phase == Phase::kForward)) continue;
    if (!seen.insert(now).second) continue;  // seen: in the frontier or below one of it
    auto covers_now = [&](const std::vector<int>& f) {
      return covers(f.data(), now.data(), width);
    };
    if (std::any_of(frontier.begin(), frontier.end(), covers_now)) continue;
    for (size_t i = frontier.size(); i-- > 0;) {
      if (covers(now.data(), frontier[i].data(), width)) {
        frontier.erase(frontier.begin() + static_cast<std::ptrdiff_t>(i));
        frontier_in_flight.erase(frontier_in_flight.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    frontier.push_back(now);
    frontier_in_flight.push_back(in_flight);
  }
  AccumulationStates out;
  out.chunks = chunks;
  out.in_flight = std::move(frontier_in_flight);
  for (const std::vector<int>& f : frontier) {
    out.counts.insert(out.counts.end(), f.begin(), f.end());
  }
  return out;
}

AccumulatedGradientPeak peakWithAccumulatedGradients(
    const AccumulationStates& states, const std::vector<int64_t>& chunk_bytes,
    const std::vector<int64_t>& chunk_held_bytes,
    const std::vector<int64_t>& chunk_gradient_bytes) {
  const size_t v = static_cast<size_t>(states.chunks);
  EVSIM_CHECK(chunk_bytes.size() == v && chunk_held_bytes.size() == v &&
                  chunk_gradient_bytes.size() == v,
              "{} / {} / {} chunk sizes for {} chunks", chunk_bytes.size(),
              chunk_held_bytes.size(), chunk_gradient_bytes.size(), v);
  auto clamp = [](__int128 x) {
    return static_cast<int64_t>(std::min<__int128>(x, std::numeric_limits<int64_t>::max()));
  };
  __int128 best = -1;
  AccumulatedGradientPeak peak;
  for (size_t s = 0; s < states.in_flight.size(); ++s) {
    const int* counts = states.counts.data() + s * 3 * v;
    __int128 held = 0, grads = 0;
    for (size_t c = 0; c < v; ++c) {
      held += static_cast<__int128>(counts[c]) * chunk_bytes[c] +
              static_cast<__int128>(counts[v + c]) * chunk_held_bytes[c];
      grads += static_cast<__int128>(counts[2 * v + c]) * chunk_gradient_bytes[c];
    }
    if (held + grads > best) {
      best = held + grads;
      peak.activation_bytes = clamp(held);
      peak.gradient_bytes = clamp(grads);
      peak.in_flight = states.in_flight[s];
    }
  }
  return peak;
}

std::shared_ptr<const std::vector<AccumulationStates>> scheduleAccumulationStates(
    Schedule schedule, const PipelineShape& shape) {
  auto compute = [&] {
    const std::shared_ptr<const DeviceOrders> orders = scheduleOrders(schedule, shape);
    std::vector<AccumulationStates> out;
    for (const std::vector<StageTask>& order : *orders) {
      out.push_back(accumulationStates(order, shape.chunks));
    }
    return out;
  };
  if (schedule == Schedule::kFile) {
    return std::make_shared<const std::vector<AccumulationStates>>(compute());
  }
  static ShapeCache<std::vector<AccumulationStates>> cache(size_t{1} << 20);  // counts
  const ShapeKey key{static_cast<int>(schedule), shape.stages, shape.chunks, shape.micro_batches,
                     schedule == Schedule::kInterleaved && shape.group > 0 ? shape.group : 0};
  return cache.get(key, compute, [](const std::vector<AccumulationStates>& states) {
    size_t counts = 0;
    for (const AccumulationStates& s : states) counts += s.counts.size();
    return counts;
  });
}

}  // namespace evsim

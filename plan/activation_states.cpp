// The activation walks of a device's task order (plan/task_graph.h): the peak of saved activations
// over an order, and the states (per chunk, the micro-batches whose activations are held) the
// order passes through, which the memory model and the closed-form tier read per candidate.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/fnv1a.h"
#include "plan/task_graph.h"

namespace evsim {

ActivationPeak peakActivations(const std::vector<StageTask>& order,
                               const std::vector<int64_t>& chunk_bytes,
                               const std::vector<int64_t>& chunk_held_bytes) {
  const bool split = std::any_of(order.begin(), order.end(),
                                 [](const StageTask& t) { return t.phase == Phase::kWeightGrad; });
  int in_flight = 0;
  // In 128 bits, clamped to int64 (memory_model.cpp saturates likewise): a peak beyond int64 is
  // out of memory on any device, and the running sum must not wrap.
  __int128 held = 0, peak_bytes = 0;
  ActivationPeak peak;
  for (const StageTask& t : order) {
    EVSIM_CHECK(t.chunk >= 0 && t.chunk < static_cast<int>(chunk_bytes.size()), "chunk {} of {}",
                t.chunk, chunk_bytes.size());
    const int64_t kept = split ? chunk_held_bytes.at(t.chunk) : 0;
    switch (t.phase) {
      case Phase::kForward:
        held += chunk_bytes[t.chunk];
        ++in_flight;
        break;
      case Phase::kBackward:
        held += kept - chunk_bytes[t.chunk];
        if (!split) --in_flight;
        break;
      default:
        held -= kept;
        --in_flight;
        break;
    }
    peak.in_flight = std::max(peak.in_flight, in_flight);
    peak_bytes = std::max(peak_bytes, held);
  }
  peak.bytes =
      static_cast<int64_t>(std::min<__int128>(peak_bytes, std::numeric_limits<int64_t>::max()));
  return peak;
}

ActivationStates oneChunkStates(int peak) {
  ActivationStates out;
  out.chunks = 1;
  out.in_flight = peak;
  if (peak > 0) out.counts = {peak, 0};  // no forward: no state
  return out;
}

namespace {

// activationStates' set of states: each state (`width` counts) once, numbered in order of
// insertion, with the walk position of its last check. Flat arrays and open addressing: a walk
// allocates O(log states) times, where a hash map of vectors allocated twice a state.
class StateSet {
 public:
  explicit StateSet(size_t width) : width_(width), slots_(16, 0) {}
  // The state equal to counts[0, width), added (checked at `at`) when new; true when added.
  std::pair<uint32_t, bool> insert(const int* counts, size_t at) {
    if (2 * (checked_at_.size() + 1) > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t slot = hash(counts) & mask;; slot = (slot + 1) & mask) {
      const uint32_t id = slots_[slot];
      if (id == 0) {
        const auto added = static_cast<uint32_t>(checked_at_.size());
        slots_[slot] = added + 1;
        counts_.insert(counts_.end(), counts, counts + width_);
        checked_at_.push_back(at);
        return {added, true};
      }
      if (std::equal(counts, counts + width_, this->counts(id - 1))) return {id - 1, false};
    }
  }
  const int* counts(uint32_t state) const { return counts_.data() + state * width_; }
  size_t checkedAt(uint32_t state) const { return checked_at_[state]; }
  void setCheckedAt(uint32_t state, size_t at) { checked_at_[state] = at; }

 private:
  size_t hash(const int* counts) const {
    return IntVectorHash{}(std::span<const int>(counts, width_));
  }
  void grow() {
    std::vector<uint32_t> slots(2 * slots_.size(), 0);
    const size_t mask = slots.size() - 1;
    for (uint32_t state = 0; state < checked_at_.size(); ++state) {
      size_t slot = hash(counts(state)) & mask;
      while (slots[slot] != 0) slot = (slot + 1) & mask;
      slots[slot] = state + 1;
    }
    slots_ = std::move(slots);
  }

  size_t width_;
  std::vector<uint32_t> slots_;   // power-of-two size, at most half full
  std::vector<int> counts_;        // the states' counts, one after another
  std::vector<size_t> checked_at_;  // per state
};

// activationStates' jump: from `at`, whose state was also `before`'s, past every whole period of
// tasks that repeats the phases and chunks of (before, at] (the walk reads nothing else of a
// task). Where a period breaks off, `no_jump_before` is set past the first task that differs.
// Out of the walk's loop (not inlined), which it would otherwise slow on orders without repeats.
[[gnu::noinline]] size_t skipRepeatedPeriods(const std::vector<StageTask>& order, size_t before,
                                             size_t at, size_t& no_jump_before) {
  const StageTask* const tasks = order.data();
  const size_t period = at - before;
  auto walksAlike = [](const StageTask& a, const StageTask& b) {
    return a.phase == b.phase && a.chunk == b.chunk;
  };
  while (at + period < order.size()) {
    const StageTask* const last_period = tasks + before + 1;
    const auto [mismatch, next] =
        std::mismatch(last_period, last_period + period, tasks + at + 1, walksAlike);
    if (mismatch != last_period + period) {
      no_jump_before = static_cast<size_t>(next - tasks) + 1;
      break;
    }
    at += period;
  }
  return at;
}

}  // namespace

ActivationStates activationStates(const std::vector<StageTask>& order, int chunks) {
  ActivationStates out;
  out.chunks = chunks;
  if (chunks == 1) {
    // One chunk, whole backwards (1F1B, GPipe without interleaving): a state is (in flight, 0),
    // so the frontier is the one state at the walk's peak (the state after the forward that
    // reaches it, which no forward follows: the walk below checks it). Counted alone, at a few
    // instructions a task instead of the walk's ~50 (issue 34 item 3); a W (a split backward)
    // sends the order to the walk.
    int in_flight = 0, peak = 0;
    int chunk_bits = 0;   // nonzero: a task of another chunk
    bool has_w = false;   // a W (a split backward)
    for (const StageTask& t : order) {
      chunk_bits |= t.chunk;
      if (t.phase == Phase::kForward) {
        peak = std::max(peak, ++in_flight);
      } else {
        --in_flight;
        has_w |= t.phase == Phase::kWeightGrad;
      }
    }
    if (chunk_bits == 0 && !has_w) return oneChunkStates(peak);
  }
  const bool split = std::any_of(order.begin(), order.end(),
                                 [](const StageTask& t) { return t.phase == Phase::kWeightGrad; });
  const size_t width = 2 * static_cast<size_t>(chunks);
  std::vector<int> now(width, 0);
  // Each state checked, once, in `states` (state i at [i * width, (i + 1) * width)), with the
  // position of its last check (for the jump below); found by its hash in `slots` (open
  // addressing, state + 1, 0 empty). Flat, so a walk allocates a few growing arrays instead of a
  // map node and a vector per state (~13% of Llama 3 70B's search's heap allocations on 1,024
  // GPUs, session 26). The frontier holds state numbers.
  StateSet seen(width);
  std::vector<uint32_t> frontier;
  auto covers = [&](const int* a, const int* b) {  // a >= b everywhere
    for (size_t i = 0; i < width; ++i) {
      if (a[i] < b[i]) return false;
    }
    return true;
  };
  // The state checked last, and the counts changed since (at most a few: the tasks between two
  // checks are one forward and what frees before it): a state equal to the last differs from it
  // nowhere among those, so the common case compares two ints instead of 2 v (issue 34 item 3).
  std::vector<int> last;  // empty: none yet
  std::array<size_t, 8> touched{};
  size_t touched_count = 0;
  int in_flight = 0;
  const StageTask* const tasks = order.data();
  const size_t size = order.size();
  int* const counts = now.data();
  size_t no_jump_before = 0;  // bounds the compares that found no repeat: < 2 per task in all
  for (size_t at = 0; at < size; ++at) {
    const StageTask& t = tasks[at];
    EVSIM_CHECK(t.chunk >= 0 && t.chunk < chunks, "chunk {} of {}", t.chunk, chunks);
    const size_t live = static_cast<size_t>(t.chunk), kept = live + static_cast<size_t>(chunks);
    // Which counts this task moves (recorded below while there is room; past that, the whole
    // state is compared).
    size_t moved = live;
    bool frees = true;  // whether the task only frees (B without a split, W)
    switch (t.phase) {
      case Phase::kForward:
        ++counts[live];
        out.in_flight = std::max(out.in_flight, ++in_flight);
        frees = false;
        break;
      case Phase::kBackward:
        --counts[live];
        if (split) {
          ++counts[kept];
          if (touched_count < touched.size()) touched[touched_count++] = kept;
          frees = false;
        } else {
          --in_flight;
        }
        break;
      default:
        --counts[kept];
        moved = kept;
        --in_flight;
        break;
    }
    if (touched_count < touched.size()) {
      touched[touched_count++] = moved;
    } else {
      touched_count = touched.size() + 1;  // too many: compare every count
    }
    // A state below a neighbour in every count is in no frontier: the one after a task that only
    // frees (B without a split, W) is below the one before it, and the one before a forward below
    // the one after it. The frontier is the walk's largest states in order of first appearance,
    // so leaving those out changes nothing and saves the comparisons on most tasks.
    if (frees || (at + 1 < size && tasks[at + 1].phase == Phase::kForward)) continue;
    // The state checked last again (a steady state: F B F B ... returns to it after every F):
    // already in `seen`, so skipped below too.
    if (!last.empty()) {
      bool same = true;
      if (touched_count <= touched.size()) {
        for (size_t i = 0; i < touched_count && same; ++i) {
          same = counts[touched[i]] == last[touched[i]];
        }
      } else {
        same = std::equal(now.begin(), now.end(), last.begin());
      }
      touched_count = 0;
      if (same) continue;
    }
    touched_count = 0;
    last.assign(now.begin(), now.end());
    // A state seen before is in the frontier or below one of it (a frontier entry leaves only
    // for one that covers it): a schedule's steady state repeats a few states m times, and
    // comparing each with the whole frontier made this walk most of a search's memory checks.
    const auto [state, inserted] = seen.insert(counts, at);
    if (!inserted) {
      // The steady state: the state at `at` was also the state at `before`. Where the tasks after
      // `at` repeat the phases and chunks of (before, at] for a whole period, the walk there goes
      // through the same states as over that period (each already checked here, or below a
      // neighbour that was: no new frontier entry), the same in_flight (the sum of the counts)
      // and ends in the same state: it is skipped, period after period (issue 34: the walk of a
      // long interleaved order hashed a state per task, 13% of a search's instructions).
      const size_t before = seen.checkedAt(state);
      if (at >= no_jump_before) at = skipRepeatedPeriods(order, before, at, no_jump_before);
      seen.setCheckedAt(state, at);
      continue;
    }
    if (std::any_of(frontier.begin(), frontier.end(),
                    [&](uint32_t f) { return covers(seen.counts(f), counts); })) {
      continue;
    }
    frontier.erase(std::remove_if(frontier.begin(), frontier.end(),
                                  [&](uint32_t f) { return covers(counts, seen.counts(f)); }),
                   frontier.end());
    frontier.push_back(state);
  }
  out.counts.reserve(frontier.size() * width);
  for (uint32_t f : frontier) out.counts.insert(out.counts.end(), seen.counts(f), seen.counts(f) + width);
  return out;
}

ActivationPeak peakActivations(const ActivationStates& states,
                               const std::vector<int64_t>& chunk_bytes,
                               const std::vector<int64_t>& chunk_held_bytes) {
  const size_t chunks = static_cast<size_t>(states.chunks);
  EVSIM_CHECK(chunk_bytes.size() == chunks && chunk_held_bytes.size() == chunks,
              "{} chunk sizes for {} chunks", chunk_bytes.size(), chunks);
  // In 128 bits, clamped to int64, as the walk does.
  __int128 peak_bytes = 0;
  for (size_t at = 0; at < states.counts.size(); at += 2 * chunks) {
    __int128 held = 0;
    for (size_t c = 0; c < chunks; ++c) {
      held += static_cast<__int128>(states.counts[at + c]) * chunk_bytes[c] +
              static_cast<__int128>(states.counts[at + chunks + c]) * chunk_held_bytes[c];
    }
    peak_bytes = std::max(peak_bytes, held);
  }
  ActivationPeak peak;
  peak.in_flight = states.in_flight;
  peak.bytes =
      static_cast<int64_t>(std::min<__int128>(peak_bytes, std::numeric_limits<int64_t>::max()));
  return peak;
}

}  // namespace evsim

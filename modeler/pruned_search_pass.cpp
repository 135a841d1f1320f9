// The pruned search's passes over the enumeration (pruned_search_state.h): each valid candidate
// through the closed-form tier, the fitting ones into the workers' pools, the pools and counts
// merged. Apart from pruned_search.cpp, which simulates the pool in rounds and ranks the results.
#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "modeler/parallel_profile.h"
#include "modeler/pruned_search_state.h"
#include "plan/shape_cache.h"

namespace evsim::pruned {

namespace {

// least = min(least, value), whatever the other workers store meanwhile.
template <typename T>
void lowerTo(std::atomic<T>& least, T value) {
  T seen = least.load(std::memory_order_relaxed);
  while (value < seen && !least.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

// One pass over the enumeration, shared among the workers (candidate_stream.h): the closed-form
// tier for every valid candidate; the fitting ones of this pass's range whose bound does not
// exceed the threshold join the pool, which keeps the best `pool_capacity` bounds and sets the
// others aside (pruned_search.h). Each worker keeps a pool of its own (no lock per candidate);
// merged, they hold exactly what one pool fed in enumeration order would: the best
// `pool_capacity` keys, the least key left out as the ceiling. What the pass kept for the closed
// forms is freed at its end (endPass's simulations, whose peak is the search's, would find it
// there; a further pass computes it again).
void PrunedSearch::runPass() {
  const double bound_limit = limit();
  std::optional<parallel_profile::Scope> starting(std::in_place, "search.pass.start");
  for (Share& share : shares_) share.startPass(pool_capacity_);
  shared_.least_ceiling_bound.store(std::numeric_limits<double>::infinity());
  starting.reset();
  shareCandidates(
      model_, cluster_, options_.base, options_.space, workers_,
      [&](unsigned w, size_t index, const Candidate& c) {
        visit(shares_[w], index, c, bound_limit);
      },
      [&](unsigned w) {
        // On the worker's own thread while the others finish their groups: its last few
        // candidates, then its workspace's memos (activation states, layer times) freed.
        evaluateWaiting(shares_[w], bound_limit);
        shares_[w].workspace.release();
      });
  // The serial end of the pass (EVSIM_PARALLEL_PROFILE=1, parallel_profile.h): the pools merged,
  // and the tier's shared states and layer times, the plan cache's look-ups and the shapes'
  // schedules freed (no thread is in the enumeration now). Neither touches the other's data, so
  // with two threads or more they run side by side: with the workspaces freed by their workers,
  // the serial end of a two-thread pass of Llama 3 70B on 1,024 GPUs went from 0.054 s of CPU to
  // two halves of ~0.02 s each (bench/RESULTS.md, session 26, par34).
  auto merge = [&] {
    std::vector<WorkerPool> pools;
    pools.reserve(shares_.size());
    for (Share& share : shares_) {
      pools.push_back(std::move(share.pool));
      mergeShare(share);
    }
    const auto [left_out, least_left_out] = pool_.merge(pools, pool_capacity_);
    ceiling_ = std::min(ceiling_, least_left_out);
    set_aside_ += left_out;
  };
  auto release = [&] {
    tier_.releaseShared();
    // The workspaces' class facts point into the cache's look-ups: each worker released its own
    // above, before its walk ended.
    cache_.releaseLookups();
    releaseShapeCaches();  // shape_cache.h
  };
  if (workers_ > 1) {
    parallel_profile::Region profile("search.pass.end", 2);
    runWorkers(2, [&](unsigned w) {
      const parallel_profile::Stamp started = profile.stamp();
      if (w == 0) {
        merge();
      } else {
        release();
      }
      profile.busy(w, started);
    });
  } else {
    parallel_profile::Scope profile("search.pass.end");
    merge();
    release();
  }
}

// One candidate on the worker of `share`: an invalid one noted, a valid one left waiting.
void PrunedSearch::visit(Share& share, size_t index, const Candidate& c,
                         double bound_limit) const {
  if (!c.violation) {
    share.waiting.push_back(Waiting{index, c.strategy});
    if (share.waiting.size() == kClosedFormBlock) evaluateWaiting(share, bound_limit);
    return;
  }
  if (pass_ > 0) return;  // counted in the first pass
  share.invalid.add(model_, cluster_, c.strategy, *c.violation, index);
}

// The closed-form tier over the worker's waiting candidates, each then as the pass's single
// pool would take it.
void PrunedSearch::evaluateWaiting(Share& share, double bound_limit) const {
  for (Waiting& w : share.waiting) evaluateOne(share, w.index, std::move(w.strategy), bound_limit);
  share.waiting.clear();
}

void PrunedSearch::evaluateOne(Share& share, size_t index, Strategy&& strategy,
                               double bound_limit) const {
  // An OOM candidate's peak matters only while it could be the closest (none after the first
  // pass): strictly below this worker's closest so far (its later candidates come after it in
  // index order, so a tie loses), and up to the least any worker found (an earlier index ties it
  // and wins; at one thread the two are the same). Above that a lower bound decides it.
  int64_t exact_peak_below = 0;
  if (pass_ == 0) {
    const int64_t least = shared_.least_oom_peak.load(std::memory_order_relaxed);
    exact_peak_below = least == std::numeric_limits<int64_t>::max() ? least : least + 1;
    if (share.closest_oom) {
      exact_peak_below = std::min(exact_peak_below, share.closest_oom->peak_memory_bytes);
    }
  }
  const ClosedFormResult closed = tier_.evaluate(strategy, share.workspace, exact_peak_below);
  if (pass_ == 0) {  // counted once, in the first pass
    ++share.closed_form;
    if (!closed.fits) {
      ++share.oom;
      // Strictly closer, as SearchReport::noteOom: the first in index order among ties. A peak
      // that is only a lower bound is above some worker's closest, which is closer.
      if (closed.peak_exact &&
          (!share.closest_oom || closed.peak_memory_bytes < share.closest_oom->peak_memory_bytes)) {
        share.closest_oom = oomRow(strategy, closed);
        share.closest_oom_index = index;
        lowerTo(shared_.least_oom_peak, closed.peak_memory_bytes);
      }
      return;
    }
    ++share.ok;
  } else if (!closed.fits) {
    return;
  }
  const PoolKey key{closed.lower_bound_us, index};
  if (key < floor_) return;  // an earlier pass's: simulated or pruned there
  if (closed.lower_bound_us > bound_limit) {
    ++share.pruned;
    return;
  }
  // Worse than one set aside already, by this worker or (by its bound) another: set aside too.
  if (!(key < share.ceiling) ||
      key.bound_us > shared_.least_ceiling_bound.load(std::memory_order_relaxed)) {
    ++share.set_aside;
    return;
  }
  share.pool.push(Pending{key.bound_us, key.index, std::move(strategy), closed});
  if (share.pool.size() > pool_capacity_) {
    // The worst bound leaves; everything at or above it waits for the next pass.
    share.ceiling = keyOf(share.pool.worst());
    share.pool.popWorst();
    ++share.set_aside;
    lowerTo(shared_.least_ceiling_bound, share.ceiling.bound_us);
  }
}

// Adds a worker's pass to the search's counts (its pool was taken for the search's: runPass).
// Counts are sums; the invalid candidates' examples and the closest OOM candidate are the first in
// enumeration order, as one enumeration gives.
void PrunedSearch::mergeShare(Share& share) {
  ceiling_ = std::min(ceiling_, share.ceiling);
  set_aside_ += share.set_aside;
  pruned_in_pass_ += share.pruned;
  if (pass_ > 0) return;
  report_.closed_form += share.closed_form;
  report_.oom += share.oom;
  report_.ok += share.ok;
  if (share.closest_oom &&
      (!report_.closest_oom ||
       share.closest_oom->peak_memory_bytes < report_.closest_oom->peak_memory_bytes ||
       (share.closest_oom->peak_memory_bytes == report_.closest_oom->peak_memory_bytes &&
        share.closest_oom_index < closest_oom_index_))) {
    report_.closest_oom = std::move(share.closest_oom);
    closest_oom_index_ = share.closest_oom_index;
  }
  invalid_.merge(share.invalid);
  share.invalid = InvalidTally{};
  share.closest_oom.reset();
}

}  // namespace evsim::pruned

#include "modeler/candidate_stream.h"

#include <atomic>
#include <limits>
#include <optional>

#include "common/cancel.h"
#include "common/error.h"
#include "modeler/parallel_for.h"
#include "modeler/parallel_profile.h"

namespace evsim {

namespace {

// Unwinds a worker's walk once another worker has failed.
struct Stopped {};

// Units of one group share (M, C, P, E, ETP, micro-batch); forEachUnit gives them one after another.
bool sameGroup(const Strategy& a, const Strategy& b) {
  return a.tp == b.tp && a.cp == b.cp && a.pp == b.pp && a.dp == b.dp && a.ep == b.ep &&
         a.etp == b.etp && a.micro_batch == b.micro_batch;
}

}  // namespace

void shareCandidates(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                     const StrategySpace& space, unsigned workers,
                     const std::function<void(unsigned, size_t, const Candidate&)>& visit,
                     const std::function<void(unsigned)>& walked) {
  const unsigned count = resolveThreads(workers);
  std::atomic<size_t> next_group{0};
  std::atomic<bool> stop{false};
  // EVSIM_PARALLEL_PROFILE=1: each worker's walk as busy (parallel_profile.h).
  parallel_profile::Region profile("shareCandidates", count);
  runWorkers(count, [&](unsigned w) {
    const parallel_profile::Stamp started = profile.stamp();
    size_t mine = std::numeric_limits<size_t>::max();  // the group this worker enumerates
    size_t group = 0, unit = 0;
    std::optional<Strategy> previous;
    try {
      forEachUnit(model, base, space, [&](const Strategy& u) {
        if (previous && !sameGroup(*previous, u)) ++group;
        if (!previous || !sameGroup(*previous, u)) previous = u;
        const size_t this_unit = unit++;
        if (mine == std::numeric_limits<size_t>::max() || group > mine) {
          // Every group below the one returned is claimed already (this worker claims on
          // reaching the group after its own), so the claim is this group or a later one.
          if (stop.load(std::memory_order_relaxed)) throw Stopped{};
          throwIfCancelled();  // common/cancel.h: a Python caller's Ctrl-C
          mine = next_group.fetch_add(1);
        }
        if (group != mine) return;
        size_t variant = 0;
        forEachVariant(model, cluster, space, u, [&](const Candidate& c) {
          EVSIM_CHECK(variant < (size_t{1} << kVariantBits), "unit {}: over {} variants", this_unit,
                      size_t{1} << kVariantBits);
          visit(w, (this_unit << kVariantBits) | variant++, c);
        });
      });
      // Every group is claimed by now (claims rise, and this worker's last is the last group or
      // past it) and this worker's are enumerated.
      if (walked && !stop.load(std::memory_order_relaxed)) walked(w);
    } catch (const Stopped&) {
    } catch (...) {
      stop = true;
      throw;
    }
    profile.busy(w, started);
  });
}

}  // namespace evsim

#pragma once
// The cost of each event, with where it came from:
//   measured  — the profile database has the event's signature, measured directly (a record the
//               profiler scaled from a smaller group is reported as derived);
//   derived   — computed from measured records: an all-reduce (reduce-scatter, all-gather) over a
//               group larger than any measured one, scaled from the largest measured group with the
//               same placement shape (ranks per node, and intra vs inter) and the same bytes by the
//               ring volume factor t(N) = t(n) * ((N-1)/N) / ((n-1)/n); a message size between two
//               measured sizes of the same collective and placement, interpolated log-log (both at
//               once when needed: interpolate at the measured group, then scale);
//   estimated — only with the analytic fallback: compute from the device spec
//               (max(flops / peak, bytes / memory bandwidth)), communication by alpha-beta from the
//               cluster's links with the nccl-tests volume factors.
// Without the fallback, a missing event is an InputError listing every missing signature and the
// eventprof command that would measure them.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/cluster_config.h"
#include "events/comm_factors.h"
#include "events/event.h"
#include "events/event_table.h"
#include "modeler/profile_db.h"

namespace evsim {

enum class Provenance { kMeasured, kDerived, kEstimated };
inline constexpr int kProvenanceCount = 3;
std::string_view provenanceName(Provenance p);  // "measured", "derived", "estimated"

struct EventCost {
  double time_us = 0;
  Provenance provenance = Provenance::kMeasured;
};

class CostModel {
 public:
  // `db` may be null (analytic only); `analytic_fallback` enables estimates. At least one source.
  CostModel(const ClusterConfig& cluster, const ProfileDb* db, bool analytic_fallback);

  // The cost of one event, or nullopt when no source covers it.
  std::optional<EventCost> cost(const Event& event) const;

  // Costs of every event of `table`, by index. Throws InputError listing all missing signatures,
  // followed by `eventprof_hint` (the command that would measure them).
  std::vector<EventCost> costAll(const EventTable& table, std::string_view eventprof_hint) const;

  // Analytic estimate alone (used by cost() under the fallback, and by tests).
  double estimateUs(const Event& event) const;

 private:
  std::optional<EventCost> derive(const Event& event) const;

  const ClusterConfig& cluster_;
  const ProfileDb* db_;
  bool analytic_fallback_;
};

}  // namespace evsim

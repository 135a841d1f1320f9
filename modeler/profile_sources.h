#pragma once
// The cost sources backed by a profile database (eventprof, or imported nccl-tests logs):
//   MeasuredSource — the event's signature is in the database, measured directly (a record the
//     profiler scaled from a smaller group is reported as derived);
//   DerivedSource — computed from measured records: a ring collective (all-reduce,
//     reduce-scatter, all-gather: events/collective.h's ring_scalable) over a group larger than any
//     measured one, scaled from the largest measured group with the same placement shape (ranks per
//     node, and intra vs inter) and the same bytes by the ring volume factor t(N) = t(n) *
//     ((N-1)/N) / ((n-1)/n); a message size between two measured sizes of the same collective and
//     placement, interpolated log-log (both at once when needed: interpolate at the measured group,
//     then scale). Compute events are never derived: another shape may run another kernel.

#include "io/profile_db.h"
#include "modeler/cost_source.h"

namespace evsim {

class MeasuredSource : public CostSource {
 public:
  explicit MeasuredSource(const ProfileDb& db) : db_(db) {}
  std::optional<EventCost> cost(const Event& event) const override;

 private:
  const ProfileDb& db_;
};

class DerivedSource : public CostSource {
 public:
  explicit DerivedSource(const ProfileDb& db) : db_(db) {}
  std::optional<EventCost> cost(const Event& event) const override;

 private:
  const ProfileDb& db_;
};

}  // namespace evsim

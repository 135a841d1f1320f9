#pragma once
// The cost sources backed by a profile database (eventprof, or imported nccl-tests logs):
//   MeasuredSource — the event's signature is in the database, measured directly (a record the
//     profiler scaled from a smaller group is reported as derived);
//   DerivedSource — computed from measured records: a ring collective (all-reduce,
//     reduce-scatter, all-gather: events/collective.h's ring_scalable) over a group larger than any
//     measured one, scaled from the largest measured group with the same placement shape (ranks per
//     node, and intra vs inter) and the same bytes by the network model's ratio
//     t(N) = t(n) * model(N) / model(n) (modeler/network/nccl_tuner.h: the algorithm NCCL picks at
//     each size, its latency growing with the node count); a message size between two measured
//     sizes of the same collective and placement, interpolated log-log (both at once when needed:
//     interpolate at the measured group, then scale). Compute events are never derived: another
//     shape may run another kernel.

#include "io/profile_db.h"
#include "modeler/cost_source.h"
#include "modeler/network/nccl_tuner.h"

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
  DerivedSource(const ProfileDb& db, const ClusterConfig& cluster)
      : communication_(db.communicationRecords()), network_(cluster) {}
  std::optional<EventCost> cost(const Event& event) const override;

 private:
  // The database's communication records, taken once (a binary profile decodes only these rows;
  // compute records are never a base for a derived cost).
  std::vector<const ProfileRecord*> communication_;
  NcclTuner network_;
};

}  // namespace evsim

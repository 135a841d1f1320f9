// Measured and derived costs from a profile database; profile_sources.h states the rules.
#include "modeler/profile_sources.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "events/collective.h"

namespace evsim {

namespace {

bool sameShapeForScaling(const Placement& a, const Placement& b) {
  // Ring scaling keeps what decides the per-rank link: intra-node groups all use the GPU's own link
  // (ranks_per_node == group_size there, so it cannot be compared); inter-node groups must keep the
  // ranks per node, which decides both the intra/inter traffic split and the NIC share per rank.
  if (a.interNode() != b.interNode()) return false;
  return !a.interNode() || a.ranks_per_node == b.ranks_per_node;
}

bool sameCollective(const Event& a, const Event& b) {
  return a.kind == b.kind && a.dtype == b.dtype;
}

// Time at `bytes` from records of one collective at one placement: the exact size, or log-log
// interpolation between the nearest measured sizes below and above. Never extrapolates: outside
// the measured range there is no data to trust (protocol and algorithm switches happen there).
std::optional<double> timeAtBytes(const std::vector<const ProfileRecord*>& records, int64_t bytes) {
  const ProfileRecord* below = nullptr;
  const ProfileRecord* above = nullptr;
  for (const ProfileRecord* r : records) {
    int64_t b = r->event.message_bytes;
    if (b == bytes) return r->time.median_us;
    if (b < bytes && (below == nullptr || b > below->event.message_bytes)) below = r;
    if (b > bytes && (above == nullptr || b < above->event.message_bytes)) above = r;
  }
  if (below == nullptr || above == nullptr) return std::nullopt;
  double x0 = std::log(double(below->event.message_bytes));
  double x1 = std::log(double(above->event.message_bytes));
  double y0 = std::log(below->time.median_us);
  double y1 = std::log(above->time.median_us);
  double fraction = (std::log(double(bytes)) - x0) / (x1 - x0);
  return std::exp(y0 + fraction * (y1 - y0));
}

}  // namespace

std::optional<EventCost> MeasuredSource::cost(const Event& event) const {
  const ProfileRecord* r = db_.find(event.signature());
  if (r == nullptr) return std::nullopt;
  // A record the profiler scaled from a smaller group holds a computed time, not a measured one:
  // it is reported as derived so that provenance counts what was really measured.
  return EventCost{r->time.median_us, r->scaled ? Provenance::kDerived : Provenance::kMeasured};
}

std::optional<EventCost> DerivedSource::cost(const Event& event) const {
  if (!isCommunication(event.kind)) return std::nullopt;
  const Placement& target = event.placement;

  // Message size between two measured sizes at the same placement (p2p included).
  std::vector<const ProfileRecord*> same_placement;
  for (const ProfileRecord* r : communication_) {
    if (sameCollective(r->event, event) && r->event.placement == target) same_placement.push_back(r);
  }
  if (!same_placement.empty()) {
    std::optional<double> t = timeAtBytes(same_placement, event.message_bytes);
    if (!t) return std::nullopt;
    return EventCost{*t, Provenance::kDerived};
  }
  // Only ring collectives scale with the group (p2p has no group to grow; all-to-all and
  // broadcast do not follow the ring volume factor).
  if (!collectiveOf(event.kind).ring_scalable) return std::nullopt;

  // A group larger than every measured group of the same shape: scale from the largest one (after
  // interpolating in size there if needed). Only the largest is used, so every derived size of a
  // group comes from one base series. A target that is not larger than every measured group is a
  // gap in the profile, left for eventprof (or the device model) to fill. Records the profiler
  // itself scaled count as bases too: ring scaling composes, so scaling a scaled record equals
  // scaling its measurement directly.
  int largest = 0;
  for (const ProfileRecord* r : communication_) {
    if (sameCollective(r->event, event) && sameShapeForScaling(r->event.placement, target)) {
      largest = std::max(largest, r->event.placement.group_size);
    }
  }
  if (largest < 2 || largest >= target.group_size) return std::nullopt;
  // Inter-node groups of one size and ranks per node may still sit on different node counts
  // (uneven placements); each is a separate series, tried fewest nodes first for determinism.
  std::map<int, std::vector<const ProfileRecord*>> by_nodes;
  for (const ProfileRecord* r : communication_) {
    if (sameCollective(r->event, event) && sameShapeForScaling(r->event.placement, target) &&
        r->event.placement.group_size == largest) {
      by_nodes[r->event.placement.nodes].push_back(r);
    }
  }
  for (const auto& [nodes, series] : by_nodes) {
    if (std::optional<double> t = timeAtBytes(series, event.message_bytes)) {
      const Placement& measured = series.front()->event.placement;
      const double scale = network_.timeUs(event.kind, target, event.message_bytes) /
                           network_.timeUs(event.kind, measured, event.message_bytes);
      return EventCost{*t * scale, Provenance::kDerived};
    }
  }
  return std::nullopt;
}

}  // namespace evsim

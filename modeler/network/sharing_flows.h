#pragma once
// The flows of one shareLinks call as its event loop reads them (link_sharing.cpp): numbered in
// order of start time, each read through the caller's FlowList. Internal to link sharing.

#include <algorithm>
#include <limits>
#include <span>
#include <vector>

#include "modeler/network/link_sharing.h"

namespace evsim::sharing {

constexpr double kInf = std::numeric_limits<double>::infinity();

inline bool shares(const FlowList::Shape& s) {
  return s.use_count > 0 && s.bytes > 0 && s.duration_us > 0;
}

// The flows that share, numbered in order of start time (ties in the callers' order: a stable
// sort's order). Each is read through the caller's list (its start, its shape), and what flows of
// one shape share (time alone, demand, resources) through the shape: ~10^6 flows of a few hundred
// shapes (FlowList), and no copy per flow (issue 34: memory).
struct Flows {
  const FlowList* list = nullptr;
  std::vector<int> index;                               // the caller's index of each
  std::vector<double> shape_duration_us, shape_demand;  // per shape
  std::vector<int> follower;  // the flow that starts when this one ends (SharedFlow::after), or -1
  bool chained = false;
  double startUs(int f) const { return list->startUs(static_cast<size_t>(index[f])); }
  int shape(int f) const { return list->shapeOf(static_cast<size_t>(index[f])); }
  std::span<const LinkUse> usesOf(int f) const { return list->uses(shape(f)); }
  double durationUs(int f) const { return shape_duration_us[shape(f)]; }
  double demand(int f) const { return shape_demand[shape(f)]; }
  // A follower's standalone gap after the flow `p` it follows.
  double gapUs(int g, int p) const {
    return std::max(0.0, startUs(g) - startUs(p) - durationUs(p));
  }
  size_t size() const { return index.size(); }
};

// The order of start times without a full sort: callers list flows as runs already in time
// order (a device's sends, its DP stream), so the maximal runs are merged pairwise (each merge
// stable, left first on ties: a stable sort's order, ties in the callers' order). The same walk
// over the callers' flows sets every flow's standalone end in `end_us`.
std::vector<int> startOrder(const FlowList& flows, std::vector<double>& end_us);

}  // namespace evsim::sharing

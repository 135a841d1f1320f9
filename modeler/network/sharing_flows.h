#pragma once
// The flows of one shareLinks call as its event loop reads them (link_sharing.cpp): each named by
// its index in the caller's FlowList and read through it, visited in order of start time by a
// cursor over the list. Internal to link sharing.

#include <algorithm>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "modeler/network/link_sharing.h"

namespace evsim::sharing {

constexpr double kInf = std::numeric_limits<double>::infinity();

inline bool shares(const FlowList::Shape& s) {
  return s.use_count > 0 && s.bytes > 0 && s.duration_us > 0;
}

// The flows that share, each by its index in the caller's list, read through the list (its start,
// its shape), and what flows of one shape share (time alone, demand, resources) through the
// shape: ~10^6 flows of a few hundred shapes (FlowList), and nothing held per flow (issue 34:
// memory). Flows are ordered by start time, ties in the list's order (a stable sort's order):
// `earlier`.
struct Flows {
  const FlowList* list = nullptr;
  std::vector<double> shape_duration_us, shape_demand;  // per shape
  std::vector<char> shape_shares;                       // per shape: shares(shape)
  double startUs(int f) const { return list->startUs(static_cast<size_t>(f)); }
  int shape(int f) const { return list->shapeOf(static_cast<size_t>(f)); }
  bool sharing(int f) const { return shape_shares[static_cast<size_t>(shape(f))] != 0; }
  std::span<const LinkUse> usesOf(int f) const { return list->uses(shape(f)); }
  double durationUs(int f) const { return shape_duration_us[shape(f)]; }
  double demand(int f) const { return shape_demand[shape(f)]; }
  bool earlier(int a, int b) const {
    const double sa = startUs(a), sb = startUs(b);
    return sa < sb || (sa == sb && a < b);
  }
  // The sharing flow that starts when `p` ends (SharedFlow::after), or -1 (a flow that does not
  // share neither follows nor is followed: its follower starts on its own start).
  int follower(int p) const {
    const int g = list->follower(static_cast<size_t>(p));
    return g >= 0 && sharing(p) && sharing(g) ? g : -1;
  }
  // Whether sharing flow `g` follows another sharing flow.
  bool follows(int g) const {
    const int p = list->after(static_cast<size_t>(g));
    return p >= 0 && sharing(p);
  }
  // A follower's standalone gap after the flow `p` it follows; none for a queued one (it starts at
  // the later of its own start and p's end: SharedFlow::queued).
  double gapUs(int g, int p) const {
    if (list->shape(shape(g)).queued) return 0;
    return std::max(0.0, startUs(g) - startUs(p) - durationUs(p));
  }
};

// The sharing flows in order of start time (`forward`) or its reverse, without a sort or a list of
// them: callers list flows as a few runs already in time order (a device's flows, its DP stream),
// and the cursor merges the runs' heads (dozens of runs, not 10^6 flows). The runs interleave
// finely (each pop most often moves to another run), so the merge is a tournament tree of losers:
// a pop replays one path of log2(runs) matches, each one comparison (issue 34: a binary heap took
// about three sift steps of two comparisons and a swap each).
class StartOrder {
 public:
  StartOrder(const Flows& flows, bool forward);
  bool done() const { return left_ == 0; }
  int peek() const { return heads_[static_cast<size_t>(tree_[0])].flow; }
  int pop();

 private:
  // A run's next flow and its place in the cursor's order: (key, rank) ascending, where forward
  // key = start and rank = flow (Flows::earlier), reverse both negated; a spent run sorts last.
  struct Head {
    double key;
    int rank;
    int flow;
    int end;  // the run's end (forward: one past its last flow; reverse: one before its first)
  };
  bool before(int a, int b) const {
    const Head& x = heads_[static_cast<size_t>(a)];
    const Head& y = heads_[static_cast<size_t>(b)];
    return x.key < y.key || (x.key == y.key && x.rank < y.rank);
  }
  void place(Head& head, int flow) const;  // `head` at `flow`, or spent at its run's end

  const Flows& flows_;
  bool forward_;
  size_t left_ = 0;          // sharing flows not yet popped
  std::vector<Head> heads_;  // per run
  // tree_[0]: the run whose head comes first; tree_[i], 0 < i < runs: the run that lost the match
  // at node i (leaf of run r: node runs + r, its parent (runs + r) / 2).
  std::vector<int> tree_;
};

}  // namespace evsim::sharing

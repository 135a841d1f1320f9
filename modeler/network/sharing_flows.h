#pragma once
// The flows of one shareLinks call as its event loop reads them (sharing_pass.h): each named by
// its index in the caller's FlowList and read through it, visited in order of start time by a
// cursor over the list. Internal to link sharing.

#include <algorithm>
#include <cstdint>
#include <cstring>
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
  // follower(p) for a `p` that shares.
  int followerOfSharing(int p) const {
    const int g = list->follower(static_cast<size_t>(p));
    return g >= 0 && sharing(g) ? g : -1;
  }
  // Whether flow `g` follows as a queue does (SharedFlow::queued).
  bool queued(int g) const { return list->shape(shape(g)).queued; }
  // Whether sharing flow `g` follows another sharing flow.
  bool follows(int g) const {
    const int p = list->after(static_cast<size_t>(g));
    return p >= 0 && sharing(p);
  }
  // Where follower `g` starts, released by the end `p_end_us` of the flow `p` it follows
  // (releaseUs, below).
  double releaseUs(int g, int p, double p_end_us) const;
};

// Where a follower starts (its own start `start_us`, queued or not) when the flow it follows
// (started on its own at `prev_start_us`, `prev_duration_us` alone) ends at `prev_end_us`: the
// later of its own start and that end plus the gap their standalone times leave, none for a
// queued one (SharedFlow::queued). The one copy of this arithmetic: a chain taken at once and a
// chain flow by flow give the same ends to the bit only while both compute it so.
inline double releaseUs(bool queued, double start_us, double prev_start_us, double prev_duration_us,
                        double prev_end_us) {
  const double gap = queued ? 0 : std::max(0.0, start_us - prev_start_us - prev_duration_us);
  return std::max(start_us, prev_end_us + gap);
}

inline double Flows::releaseUs(int g, int p, double p_end_us) const {
  return sharing::releaseUs(queued(g), startUs(g), startUs(p), durationUs(p), p_end_us);
}

// Flow `f`, alone from `at_us` to `end_us`, its own start `start_us`: its end is kept only where it
// started late (on time it ends on its standalone end, which FlowEnds does not keep; the check
// spares computing that). The one copy of this rule for every flow found alone.
inline void endAlone(FlowEnds& ends, int f, double start_us, double at_us, double end_us) {
  if (at_us != start_us) ends.set(f, end_us);
}

// The sharing flows in order of start time, read twice by link sharing: latest first (the walk
// that finds each flow's next flow on its resources) and then earliest first (the event loop).
// Callers list flows as a few runs already in time order (a device's flows, its DP stream), so
// the order is a merge of the runs' heads, not a sort. The runs interleave finely (each pop most
// often moves to another run), so the merge is a tournament tree of losers: a pop replays one path
// of log2(runs) matches, each one comparison. It is merged once, latest first, recording which
// run each pop came from (a byte a sharing flow while there are at most 256 runs, two up to
// 65,536, else four); the earliest-first read replays that record from its end, one read and the
// run's step to its next sharing flow a pop (issue 34: the second merge was about half of the
// order's ~1.1 G instructions in the 405B search on 1,024 GPUs).
class StartOrder {
 public:
  explicit StartOrder(const Flows& flows);
  // Latest first (ties: the later listed first), all of it before the first earliest-first read.
  bool latestDone() const { return merged_ == total_; }
  int popLatest();
  // Then earliest first (Flows::earlier): turn() once the latest-first read is done.
  void turn();
  bool done() const { return left_ == 0; }
  int peek() const { return next_; }
  int pop();

 private:
  // A run's next flow and its place in the merge's order: (key, rank) ascending, key = -start,
  // rank = -flow (Flows::earlier reversed); a spent run sorts last. Earliest first, only `flow`.
  struct Head {
    double key;
    int rank;
    int flow;
    int first, last;  // the run's first and last sharing flows
  };
  bool before(int a, int b) const {
    const Head& x = heads_[static_cast<size_t>(a)];
    const Head& y = heads_[static_cast<size_t>(b)];
    return x.key < y.key || (x.key == y.key && x.rank < y.rank);
  }
  void place(Head& head, int flow) const;  // `head` at `flow`, or spent before its run's first
  // The run of the merge's pop `i` (0: the latest flow's), and its record.
  size_t recorded(size_t i) const {
    if (width_ == 1) return record_[i];
    if (width_ == 2) return readAs<uint16_t>(i);
    return readAs<uint32_t>(i);
  }
  void record(size_t i, int run);
  template <typename T>
  T readAs(size_t i) const {
    T run;
    std::memcpy(&run, record_.data() + i * sizeof(T), sizeof(T));
    return run;
  }

  const Flows& flows_;
  size_t total_ = 0;   // sharing flows
  size_t merged_ = 0;  // popped latest first
  size_t left_ = 0;    // not yet popped earliest first
  int next_ = -1;      // the earliest flow left (-1: none), read by every peek
  std::vector<Head> heads_;  // per run
  // tree_[0]: the run whose head comes first; tree_[i], 0 < i < runs: the run that lost the match
  // at node i (leaf of run r: node runs + r, its parent (runs + r) / 2).
  std::vector<int> tree_;
  size_t width_ = 1;              // bytes a recorded run: 1, 2 or 4
  std::vector<uint8_t> record_;   // per merge pop, its run as `width_` bytes
};

}  // namespace evsim::sharing

#pragma once
// A chain's followers taken at once by link sharing (issue 34): what the walk of the start order
// finds for each chain head, and the run of a chain's followers that nothing foreign touches.
// Internal to link sharing; its event loop (sharing_pass.h) calls these (SharingPass::alone,
// ResourceHolds::hold).

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "modeler/network/link_sharing.h"
#include "modeler/network/sharing_flows.h"

namespace evsim::sharing {

// What taking a chain head's followers at once needs.
struct HeadFacts {
  // The first head after this one in start order whose chain uses any of its resources (n: none;
  // -1: the head and its tail are not all on one resource set, never taken at once).
  int next_foreign;
  // Every follower on one resource set, each resource once (link sharing's hold).
  bool uniform_tail;
};

// The walk of `order` latest first (the caller turns it after). Each sharing flow's entry of
// `next_start` gets the next flow in start order on any of its resources (n, the list's size:
// none), and each chain head (a flow that follows none and has a follower), latest first, its
// HeadFacts: the result, read back in start order as a stack (latest head on top). `chained`:
// whether some sharing flow follows another (else no head has facts).
std::vector<HeadFacts> walkLatestFirst(const Flows& flows, StartOrder& order, size_t resources,
                                       bool chained, std::span<int> next_start);

// When the next flow on `f`'s resources starts (kInf: none), from the walk's `next_start`, while
// `f` has not started (then link sharing reuses its entry).
inline double nextStartUs(const Flows& flows, std::span<const int> next_start, int f) {
  const int until = next_start[static_cast<size_t>(f)];
  return static_cast<size_t>(until) < flows.list->size() ? flows.startUs(until) : kInf;
}

// A chain's followers at once: flow `f` of a chain all on one resource set (its head's and every
// follower's), found alone by link sharing as it starts, ending at `end_us`; `g` its follower,
// `next_foreign` its head's (HeadFacts). Each follower that ends on its release's times with no
// release, check or event gets its end in `ends` and counts in `taken`; returns the first that
// does not (flow -1: the chain is done) and where it starts: link sharing releases it there.
std::pair<int, double> runAlong(const Flows& flows, std::span<const int> next_start, FlowEnds& ends,
                                size_t& taken, int f, int g, double end_us, int next_foreign);

}  // namespace evsim::sharing

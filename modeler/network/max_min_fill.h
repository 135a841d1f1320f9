#pragma once
// Max-min fair rates by progressive filling (link_sharing.h states the model), and the per-flow
// state of flows in flight. Internal to link sharing.

#include <algorithm>
#include <span>
#include <vector>

#include "modeler/network/sharing_flows.h"

namespace evsim::sharing {

// Per-resource and per-flow scratch of the fill, kept across calls (zero between them).
struct Scratch {
  std::vector<double> used, users;
  std::vector<char> frozen;
};

// What the event loop keeps of a flow in flight, in a slot the flow holds from its start to its
// end and then hands on (issue 34: ~10^6 flows of which a few dozen are in flight at once; the
// loop's arrays per flow were most of a simulation's memory). Indexed by the flow's number.
template <typename T>
class InFlight {
 public:
  InFlight(const std::vector<int>& slot_of, T initial) : slot_of_(slot_of), initial_(initial) {}
  // Slot `slot` taken by a flow: its value starts over (kept: counters that must keep rising).
  void reset(int slot, bool keep = false) {
    if (static_cast<size_t>(slot) >= at_.size())
      at_.resize(static_cast<size_t>(slot) + 1, initial_);
    if (!keep) at_[static_cast<size_t>(slot)] = initial_;
  }
  T& operator[](int f) { return at_[static_cast<size_t>(slot_of_[static_cast<size_t>(f)])]; }

 private:
  const std::vector<int>& slot_of_;
  T initial_;
  std::vector<T> at_;
};

// The max-min fair rates (bytes/us) of the `active` flows into `rate`.
template <typename Rate>
void fill(const Flows& flows, std::span<const double> capacity, const std::vector<int>& active,
          Rate& rate, Scratch& scratch) {
  auto demand = [&](int f) { return flows.demand(f); };
  if (active.size() == 1) {  // alone: its demand (the capacity is at least that)
    rate[active[0]] = demand(active[0]);
    return;
  }
  std::vector<double>& used = scratch.used;
  std::vector<double>& users = scratch.users;
  std::vector<char>& frozen = scratch.frozen;
  frozen.assign(active.size(), 0);
  for (int f : active) {
    rate[f] = 0;
    for (const LinkUse& u : flows.usesOf(f)) users[u.resource] += u.copies;
  }
  double level = 0;
  size_t left = active.size();
  while (left > 0) {
    // The next step: the first unfrozen flow to reach its demand, or resource to fill up.
    double step = kInf;
    for (size_t i = 0; i < active.size(); ++i) {
      if (frozen[i]) continue;
      const int f = active[i];
      step = std::min(step, demand(f) - level);
      for (const LinkUse& u : flows.usesOf(f)) {
        step = std::min(step, (capacity[u.resource] - used[u.resource]) / users[u.resource]);
      }
    }
    step = std::max(step, 0.0);
    level += step;
    for (size_t i = 0; i < active.size(); ++i) {
      if (frozen[i]) continue;
      for (const LinkUse& u : flows.usesOf(active[i])) used[u.resource] += step * u.copies;
    }
    // Freeze flows at their demand or on a full resource (relative tolerance: rounding).
    for (size_t i = 0; i < active.size(); ++i) {
      if (frozen[i]) continue;
      const int f = active[i];
      bool stop = level >= demand(f) * (1 - 1e-12);
      for (const LinkUse& u : flows.usesOf(f)) {
        stop = stop || used[u.resource] >= capacity[u.resource] * (1 - 1e-12);
      }
      if (!stop) continue;
      frozen[i] = 1;
      --left;
      rate[f] = std::min(level, demand(f));
      for (const LinkUse& u : flows.usesOf(f)) users[u.resource] -= u.copies;
    }
  }
  for (int f : active) {
    for (const LinkUse& u : flows.usesOf(f)) used[u.resource] = users[u.resource] = 0;
  }
}

}  // namespace evsim::sharing

// Progressive filling over flows in flight; link_sharing.h states the model.
#include "modeler/network/link_sharing.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>

#include "common/error.h"
#include "modeler/network/max_min_fill.h"
#include "modeler/network/sharing_flows.h"

namespace evsim {

namespace {

using sharing::Flows;
using sharing::InFlight;
using sharing::kInf;
using sharing::Scratch;
using sharing::fill;
using sharing::startOrder;

void addLoad(std::vector<LoadSegment>& segments, double start, double end, double bytes_per_us) {
  if (end <= start) return;
  if (!segments.empty() && segments.back().end_us == start &&
      segments.back().bytes_per_us == bytes_per_us) {
    segments.back().end_us = end;
    return;
  }
  segments.push_back({start, end, bytes_per_us});
}

// A flow's projected end at its current rate; stale once its rate changed again (`version`).
struct Finish {
  double us;
  int flow;
  int version;
  bool operator>(const Finish& o) const { return us > o.us; }
};

}  // namespace

SharingResult shareLinks(std::span<const SharedFlow> input,
                         std::span<const double> capacity_bytes_per_us, bool record_load) {
  return shareLinks(FlowList::of(input), capacity_bytes_per_us, record_load);
}

SharingResult shareLinks(const FlowList& input, std::span<const double> capacity_bytes_per_us,
                         bool record_load) {
  SharingResult out;
  out.end_us.resize(input.size());
  if (record_load) out.load.resize(capacity_bytes_per_us.size());
  std::vector<double> capacity(capacity_bytes_per_us.begin(), capacity_bytes_per_us.end());
  Flows flows;
  flows.list = &input;
  flows.index = startOrder(input, out.end_us);
  const size_t n = flows.size();
  // Per shape that a sharing flow has: its demand, and the capacities it raises.
  flows.shape_duration_us.assign(input.shapes(), 0);
  flows.shape_demand.assign(input.shapes(), 0);
  {
    std::vector<char> seen(input.shapes(), 0);
    for (size_t f = 0; f < n; ++f) {
      const int s = input.shapeOf(static_cast<size_t>(flows.index[f]));
      if (seen[static_cast<size_t>(s)]) continue;
      seen[static_cast<size_t>(s)] = 1;
      const FlowList::Shape& shape = input.shape(s);
      const double demand = shape.bytes / shape.duration_us;
      flows.shape_duration_us[static_cast<size_t>(s)] = shape.duration_us;
      flows.shape_demand[static_cast<size_t>(s)] = demand;
      for (const LinkUse& u : input.uses(s)) {
        EVSIM_CHECK(
            u.resource >= 0 && static_cast<size_t>(u.resource) < capacity.size() && u.copies > 0,
            "flow {} uses resource {} x{} of {}", flows.index[f], u.resource, u.copies,
            capacity.size());
        capacity[u.resource] = std::max(capacity[u.resource], demand * u.copies);
      }
    }
  }
  // Followers: numbered in order of their own start_us like the rest, but started when the flow
  // they follow ends (a flow that does not share leaves its follower on its own start).
  flows.follower.assign(n, -1);
  std::vector<bool> follows(n, false);
  {
    std::vector<int> id_of(input.size(), -1);
    for (size_t f = 0; f < n; ++f) id_of[flows.index[f]] = static_cast<int>(f);
    for (size_t f = 0; f < n; ++f) {
      const int after = input.after(static_cast<size_t>(flows.index[f]));
      if (after < 0) continue;
      EVSIM_CHECK(static_cast<size_t>(after) < input.size() && after != flows.index[f],
                  "flow {} after {} of {}", flows.index[f], after, input.size());
      const int p = id_of[after];
      if (p < 0) continue;
      EVSIM_CHECK(flows.follower[p] < 0, "two flows after flow {}", after);
      flows.follower[p] = static_cast<int>(f);
      follows[f] = true;
      flows.chained = true;
    }
  }

  Scratch scratch{
      std::vector<double>(capacity.size(), 0), std::vector<double>(capacity.size(), 0), {}};
  // Per flow in flight (its slot: InFlight) its rate, the standalone time it had left when its
  // rate last changed (at `since_us`: flows whose rates an event leaves alone are not touched),
  // the event that last reached it and the version of its projected end. Before a flow starts,
  // its entry of `slot_of` holds what `alone` reads of it instead (freeUntil below): one array
  // per flow, not two (issue 34: memory).
  std::vector<int> slot_of(n), free_slots;
  int slots = 0;
  InFlight<double> rate(slot_of, 0), remaining_us(slot_of, 0), since_us(slot_of, 0);
  InFlight<int> seen_at(slot_of, -1), version(slot_of, 0);
  auto takeSlot = [&](int f) {
    int slot = slots;
    if (free_slots.empty()) {
      ++slots;
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    slot_of[static_cast<size_t>(f)] = slot;
    rate.reset(slot);
    remaining_us.reset(slot);
    since_us.reset(slot);
    seen_at.reset(slot);
    version.reset(slot, /*keep=*/true);  // a slot's earlier flow's ends stay stale
    remaining_us[f] = flows.durationUs(f);
  };
  // Per resource the flows on it (in start order), and where its recorded load last changed. An
  // event refills only the flows connected to it through shared resources (the rest keep their
  // rates: max-min fairness is per connected component), so a lone flow costs no fill.
  std::vector<std::vector<int>> on(capacity.size());
  std::vector<double> load_since(capacity.size(), 0);
  std::vector<int> component, seeds, ending;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> ends;  // earliest first
  size_t next = 0, in_flight = 0;
  int event = 0;
  double now = n == 0 ? 0 : flows.startUs(0);
  // A recorded resource's load from its last change to `now`, before its flows change.
  auto closeLoad = [&](int r) {
    if (!record_load || load_since[r] == now) return;
    double load = 0;
    for (int g : on[r]) {
      for (const LinkUse& u : flows.usesOf(g)) load += u.resource == r ? rate[g] * u.copies : 0;
    }
    if (load > 0) addLoad(out.load[r], load_since[r], now, load);
    load_since[r] = now;
  };
  // A flow that finds its resources empty and ends before the next flow on any of them starts
  // runs alone at its demand throughout: it ends on time and takes no event (most flows: a
  // pipeline's sends rarely meet). Until it starts, `slot_of` holds that next flow's number (n:
  // none; flows are numbered in start order, so the lowest number is the earliest start).
  {
    const int none = static_cast<int>(n);
    std::vector<int> next_on(capacity.size(), none);
    for (size_t f = n; f-- > 0;) {
      int until = none;
      for (const LinkUse& u : flows.usesOf(static_cast<int>(f))) {
        until = std::min(until, next_on[u.resource]);
        next_on[u.resource] = static_cast<int>(f);
      }
      slot_of[f] = until;
    }
  }
  auto freeUntil = [&](int f) {
    const int until = slot_of[static_cast<size_t>(f)];
    return static_cast<size_t>(until) < n ? flows.startUs(until) : kInf;
  };
  // Followers released by the end of the flow they follow, by start (then number).
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      released;
  // Chains: a follower starts at or after its own start_us, so freeUntil (which sees every later
  // flow at its own start_us) bounds the flows numbered after a flow; but a follower numbered
  // before it may still be waiting for the flow it follows and start inside its run. So from the
  // start of the flow before it until its own start, a follower and the rest of its chain hold
  // their resources as `waiting` (the chain's tail: a chain's collectives may use different
  // links), and a flow on a resource with a waiting follower of another chain is not alone.
  // A follower's tail is `tail` from tail_at[f] to the next -1 (0: an empty one).
  std::vector<int> waiting(capacity.size(), 0), tail_at, tail{-1};
  std::vector<bool> on_time(n, false);  // a follower released at its own start_us (see `alone`)
  if (flows.chained) {
    tail_at.assign(n, 0);
    std::vector<int> chain, t;
    for (size_t head = 0; head < n; ++head) {
      if (follows[head] || flows.follower[head] < 0) continue;
      chain.clear();  // the followers of `head`, in chain order (only followers are held)
      for (int g = flows.follower[head]; g >= 0; g = flows.follower[g]) chain.push_back(g);
      for (size_t c = chain.size(); c-- > 0;) {
        const int f = chain[c];
        const int g = c + 1 < chain.size() ? chain[c + 1] : -1;
        const auto in_tail = [&](int r) {
          if (g < 0) return false;
          for (size_t i = static_cast<size_t>(tail_at[g]); tail[i] >= 0; ++i) {
            if (tail[i] == r) return true;
          }
          return false;
        };
        const std::span<const LinkUse> uses = flows.usesOf(f);
        if (std::all_of(uses.begin(), uses.end(),
                        [&](const LinkUse& u) { return in_tail(u.resource); })) {
          tail_at[f] = tail_at[g];  // a chain over the same links: its follower's tail
          continue;
        }
        t.clear();
        for (const LinkUse& u : uses) t.push_back(u.resource);
        for (size_t i = g >= 0 ? static_cast<size_t>(tail_at[g]) : 0; tail[i] >= 0; ++i) {
          t.push_back(tail[i]);
        }
        std::sort(t.begin(), t.end());
        t.erase(std::unique(t.begin(), t.end()), t.end());
        tail_at[f] = static_cast<int>(tail.size());
        tail.insert(tail.end(), t.begin(), t.end());
        tail.push_back(-1);
      }
    }
  }
  auto hold = [&](int f, int by) {
    for (size_t i = static_cast<size_t>(tail_at[f]); tail[i] >= 0; ++i) waiting[tail[i]] += by;
  };
  // Called as `f` starts at `now`: whether it runs alone throughout (then it is done); the
  // waiting marks move along its chain.
  auto alone = [&](int f) {
    if (flows.chained && follows[f]) hold(f, -1);
    const double end = now + flows.durationUs(f);
    bool free = freeUntil(f) >= end;
    for (const LinkUse& u : flows.usesOf(f)) {
      if (!free) break;
      free = on[u.resource].empty() && (!flows.chained || waiting[u.resource] == 0);
    }
    const int g = flows.chained ? flows.follower[f] : -1;
    if (g >= 0) hold(g, +1);
    if (!free) return false;
    out.end_us[flows.index[f]] = end;
    if (g >= 0) {
      // Released at its own start_us and not yet passed: it starts in its place in the order,
      // as if it followed nothing (the same time and order the release queue would give it).
      const double at = std::max(flows.startUs(g), end + flows.gapUs(g, f));
      if (at == flows.startUs(g) && static_cast<size_t>(g) >= next) {
        on_time[g] = true;
      } else {
        released.push({at, g});
      }
    }
    if (record_load) {
      for (const LinkUse& u : flows.usesOf(f)) {
        closeLoad(u.resource);
        addLoad(out.load[u.resource], now, end, flows.demand(f) * u.copies);
      }
    }
    return true;
  };
  auto skipFollowers = [&] {
    while (next < n && follows[next] && !on_time[next]) ++next;
  };
  auto nextStart = [&] {
    const double static_start = next < n ? flows.startUs(next) : kInf;
    return released.empty() ? static_start : std::min(static_start, released.top().first);
  };
  skipFollowers();
  while (next < n || in_flight > 0 || !released.empty()) {
    if (in_flight == 0) now = std::max(now, nextStart());
    while (nextStart() <= now) {
      int f;
      if (!released.empty() && released.top().first <= now &&
          (next >= n || flows.startUs(next) > now ||
           released.top().second < static_cast<int>(next))) {
        f = released.top().second;
        released.pop();
      } else {
        f = static_cast<int>(next++);
        skipFollowers();
      }
      if (alone(f)) continue;
      ++in_flight;
      takeSlot(f);
      since_us[f] = now;
      for (const LinkUse& u : flows.usesOf(f)) {
        closeLoad(u.resource);
        on[u.resource].push_back(f);
      }
      seeds.push_back(f);
    }
    // The component of the flows that started, or that shared a resource with one that ended.
    component.clear();
    for (int f : seeds) {
      if (seen_at[f] == event) continue;
      seen_at[f] = event;
      component.push_back(f);
    }
    for (size_t i = 0; i < component.size(); ++i) {
      for (const LinkUse& u : flows.usesOf(component[i])) {
        for (int g : on[u.resource]) {
          if (seen_at[g] == event) continue;
          seen_at[g] = event;
          component.push_back(g);
        }
      }
    }
    seeds.clear();
    ++event;
    // Progress at the old rates up to now, then the new rates and where they end the flows.
    for (int f : component) {
      for (const LinkUse& u : flows.usesOf(f)) closeLoad(u.resource);
      if (since_us[f] < now) {
        remaining_us[f] =
            std::max(0.0, remaining_us[f] - (now - since_us[f]) * rate[f] / flows.demand(f));
        since_us[f] = now;
      }
    }
    if (!component.empty()) fill(flows, capacity, component, rate, scratch);
    for (int f : component) {
      ends.push({now + remaining_us[f] * flows.demand(f) / rate[f], f, ++version[f]});
    }
    if (next == n && in_flight == 0 && released.empty()) break;
    // Until the next start or the first end at these rates. A flow ends at its projected finish
    // (compared as computed: at times of 1e7 us a residue of 1e-9 us would not move `now`).
    while (!ends.empty() && ends.top().version != version[ends.top().flow]) ends.pop();
    const double until = std::min(nextStart(), ends.empty() ? kInf : ends.top().us);
    EVSIM_CHECK(until < kInf && until >= now, "link sharing stalled at {} us", now);
    now = until;
    // The flows that end now leave their resources, in start order (the order of the resources'
    // lists); then the flows left on those are seeded, in the order they sit there. Every flow
    // that ends now leaves before any is seeded: one seeded and then ended in the same step would
    // be refilled as if still in flight.
    ending.clear();
    for (; !ends.empty() && ends.top().us <= until; ends.pop()) {
      const Finish& end = ends.top();
      if (end.version != version[end.flow]) continue;
      ++version[end.flow];
      ending.push_back(end.flow);
    }
    std::sort(ending.begin(), ending.end());
    for (int f : ending) {
      out.end_us[flows.index[f]] = until;
      --in_flight;
      if (const int g = flows.follower[f]; g >= 0) {
        released.push({std::max(flows.startUs(g), until + flows.gapUs(g, f)), g});
      }
      for (const LinkUse& u : flows.usesOf(f)) {
        closeLoad(u.resource);
        std::vector<int>& list = on[u.resource];
        list.erase(std::find(list.begin(), list.end(), f));
      }
      free_slots.push_back(slot_of[static_cast<size_t>(f)]);  // nothing reads its state again
    }
    for (int f : ending) {
      for (const LinkUse& u : flows.usesOf(f)) {
        seeds.insert(seeds.end(), on[u.resource].begin(), on[u.resource].end());
      }
    }
  }
  out.capacity_bytes_per_us = std::move(capacity);
  return out;
}

}  // namespace evsim

// Progressive filling over flows in flight; link_sharing.h states the model.
#include "modeler/network/link_sharing.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <queue>

#include "common/error.h"
#include "modeler/network/chain_runs.h"
#include "modeler/network/max_min_fill.h"
#include "modeler/network/sharing_flows.h"

namespace evsim {

namespace {

using sharing::endAlone;
using sharing::fill;
using sharing::Flows;
using sharing::HeadFacts;
using sharing::InFlight;
using sharing::kInf;
using sharing::nextStartUs;
using sharing::releaseUs;
using sharing::Scratch;
using sharing::walkLatestFirst;

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
  auto list = std::make_shared<const FlowList>(FlowList::of(input));
  SharingResult out = shareLinks(*list, capacity_bytes_per_us, record_load);
  out.end_us.keep(std::move(list));
  return out;
}

SharingResult shareLinks(const FlowList& input, std::span<const double> capacity_bytes_per_us,
                         bool record_load, bool whole_chains) {
  SharingResult out;
  const size_t n = input.size();
  out.end_us = FlowEnds(input);
  if (record_load) out.load.resize(capacity_bytes_per_us.size());
  std::vector<double> capacity(capacity_bytes_per_us.begin(), capacity_bytes_per_us.end());
  // Flows are named by their index in `input` (no renumbering, no list of them in start order:
  // issue 34, memory); every flow ends at its standalone end unless sharing moves it.
  Flows flows;
  flows.list = &input;
  // Per shape: whether its flows share, their demand, and the capacities a sharing one raises.
  flows.shape_duration_us.assign(input.shapes(), 0);
  flows.shape_demand.assign(input.shapes(), 0);
  flows.shape_shares.assign(input.shapes(), 0);
  for (size_t s = 0; s < input.shapes(); ++s) {
    const FlowList::Shape& shape = input.shape(static_cast<int>(s));
    flows.shape_duration_us[s] = shape.duration_us;
    flows.shape_shares[s] = sharing::shares(shape);
  }
  bool chained = false;  // whether some sharing flow follows another
  {
    std::vector<char> seen(input.shapes(), 0);
    for (size_t f = 0; f < n; ++f) {
      const size_t s = static_cast<size_t>(input.shapeOf(f));
      if (!flows.shape_shares[s]) continue;
      chained = chained || flows.follows(static_cast<int>(f));
      if (seen[s]) continue;
      seen[s] = 1;
      const FlowList::Shape& shape = input.shape(static_cast<int>(s));
      const double demand = shape.bytes / shape.duration_us;
      flows.shape_demand[s] = demand;
      for (const LinkUse& u : input.uses(static_cast<int>(s))) {
        EVSIM_CHECK(
            u.resource >= 0 && static_cast<size_t>(u.resource) < capacity.size() && u.copies > 0,
            "flow {} uses resource {} x{} of {}", f, u.resource, u.copies, capacity.size());
        capacity[u.resource] = std::max(capacity[u.resource], demand * u.copies);
      }
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
  InFlight<int> tail_of(slot_of, -1);  // the entry of `tails` its follower carries (below)
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
    tail_of.reset(slot);
    remaining_us[f] = flows.durationUs(f);
  };
  // Per resource the flows on it (in start order), and where its recorded load last changed. An
  // event refills only the flows connected to it through shared resources (the rest keep their
  // rates: max-min fairness is per connected component), so a lone flow costs no fill.
  std::vector<std::vector<int>> on(capacity.size());
  std::vector<double> load_since(capacity.size(), 0);
  std::vector<int> component, seeds, ending;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> ends;  // earliest first
  size_t in_flight = 0;
  int event = 0;
  // The sharing flows in start order, read latest first below (freeUntil) and then earliest
  // first by the event loop: its head is the next to start (followers are passed over: they start
  // when released, unless released on time before the order reaches them).
  sharing::StartOrder order(flows);
  double now = 0;
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
  // pipeline's sends rarely meet). Until it starts, `slot_of` holds that next flow (n: none), and
  // the same walk finds each chain head's facts for taking its followers at once (chain_runs.h).
  std::vector<HeadFacts> head_facts =
      walkLatestFirst(flows, order, capacity.size(), chained, slot_of);
  order.turn();
  if (!order.done()) now = flows.startUs(order.peek());
  auto freeUntil = [&](int f) { return nextStartUs(flows, slot_of, f); };
  // Chains: a follower starts at or after its own start_us, so freeUntil (which sees every later
  // flow at its own start_us) bounds the flows after a flow in start order; but a follower before
  // it may still be waiting for the flow it follows and start inside its run. So from the start of
  // the flow before it until its own start, a follower and the rest of its chain hold their
  // resources as `waiting` (the chain's tail: a chain's collectives may use different links), and
  // a flow on a resource with a waiting follower of another chain is not alone. A resource counts
  // once per flow of a tail that uses it, zero exactly when no tail holds it.
  //
  // `busy` holds both per resource: its waiting count, plus kOnBusy per flow of the event loop
  // on it (`on`), so that a flow's check reads one number a resource (issue 34: this check runs
  // for every flow, ~10^6 a simulation, nearly all of them alone).
  constexpr int64_t kOnBusy = int64_t{1} << 32;
  std::vector<int64_t> busy(capacity.size(), 0);
  // Each chain's own part of `waiting` (its tail's count per resource it uses), while its tail
  // holds any: counted once when its head starts, then each follower that starts takes its own
  // uses off, so checking a follower costs its uses, not a walk of its tail (issue 34). The
  // chain's entry travels with it: from the flow that starts to its follower's release (below)
  // and, while that flow is in flight, in `tail_of`.
  using TailCounts = std::vector<std::pair<int, int>>;  // (resource, count), the few of a chain
  std::vector<TailCounts> tails;                        // reused; free ones listed in free_tails
  std::vector<int> free_tails;
  // `hint`: where to look first (a chain's flows mostly use the same resources in the same order,
  // so a follower's i-th use is most often the tail's i-th entry).
  auto countOf = [](TailCounts& counts, int resource, size_t hint = 0) -> int& {
    if (hint < counts.size() && counts[hint].first == resource) return counts[hint].second;
    for (auto& [r, c] : counts) {
      if (r == resource) return c;
    }
    return counts.emplace_back(resource, 0).second;
  };
  // A uniform tail (every flow of it on the same resources, each once: a task's collectives of one
  // group, nearly every chain) holds each of its resources once, not once per flow, until its
  // last flow starts: a resource is held by it exactly while some flow of it that uses the
  // resource waits, as with the counts, so every check reads the same (busy less its own holds
  // is zero exactly when no other tail and no flow in flight is on the resource). Its flows then
  // cost no count each, only a read a use (issue 34: counting every flow's uses into its chain's
  // tail and out again was most of the lone check, itself a fifth of the sharing pass in the
  // exhaustive search on Calculon's space).
  std::vector<char> uniform_tail;  // per entry of `tails`
  // Per entry of `tails`, its head's next_foreign (runAlong, below; -1: not one resource set).
  std::vector<int> tail_next_foreign;
  // A head starts: the tail from its follower `g` on holds its resources (`facts`: the walk's
  // above); the tail's entry.
  auto hold = [&](int g, const HeadFacts& facts) {
    int t = static_cast<int>(tails.size());
    if (free_tails.empty()) {
      tails.emplace_back();
      uniform_tail.push_back(0);
      tail_next_foreign.push_back(-1);
    } else {
      t = free_tails.back();
      free_tails.pop_back();
    }
    TailCounts& counts = tails[static_cast<size_t>(t)];
    counts.clear();
    const bool uniform = facts.uniform_tail;
    tail_next_foreign[static_cast<size_t>(t)] = facts.next_foreign;
    uniform_tail[static_cast<size_t>(t)] = uniform;
    if (uniform) {
      for (const LinkUse& u : flows.usesOf(g)) busy[u.resource] += 1;
      return t;
    }
    for (int h = g; h >= 0; h = flows.follower(h)) {
      const std::span<const LinkUse> uses = flows.usesOf(h);
      for (size_t i = 0; i < uses.size(); ++i) {
        busy[uses[i].resource] += 1;
        countOf(counts, uses[i].resource, i) += 1;
      }
    }
    return t;
  };
  // Followers released by the end of the flow they follow, by start (then start order), each with
  // its chain's entry of `tails`.
  struct Release {
    double us;
    int flow;
    int tail;
  };
  auto later = [&](const Release& a, const Release& b) {
    return a.us > b.us || (a.us == b.us && flows.earlier(b.flow, a.flow));
  };
  std::priority_queue<Release, std::vector<Release>, decltype(later)> released(later);
  // Followers released at their own start_us and not yet passed by the order: they start in their
  // place in it (below), earliest first; when the order reaches one it is this queue's top. (Their
  // `us` is their start_us: Flows::earlier without reading the list.)
  auto after = [](const Release& a, const Release& b) {
    return a.us > b.us || (a.us == b.us && a.flow > b.flow);
  };
  std::priority_queue<Release, std::vector<Release>, decltype(after)> on_time(after);
  int next_tail = -1;  // set by `alone`: the chain entry that f's follower carries (-1: none)
  // A chain's followers at once (chain_runs.h): those that end on their release's times with no
  // release, check or event, counted; the first that does not is released as `alone` would.
  auto runAlong = [&](int f, int g, double end, int next_foreign) {
    return sharing::runAlong(flows, slot_of, out.end_us, out.whole_chain_flows, f, g, end,
                             next_foreign);
  };
  // Called as `f` starts at `now` (`t`: its chain's entry, -1 for a flow that follows none):
  // whether it runs alone throughout (then it is done); the waiting marks move along its chain. A
  // follower lets go of its own links (its chain's tail from its follower on stays held), a head
  // holds its followers' tail; while `f` is checked its own chain's holds are its entry's counts.
  auto alone = [&](int f, int t) {
    // Its shape read once (issue 34: this runs for every flow).
    const int shape = flows.shape(f);
    const int g = chained ? flows.followerOfSharing(f) : -1;
    const std::span<const LinkUse> uses = input.uses(shape);
    const double duration = flows.shape_duration_us[static_cast<size_t>(shape)];
    const double start = flows.startUs(f);
    const double end = now + duration;
    // Alone: nothing starts on its resources before it ends, no flow of the event loop is on them
    // and no other chain's tail holds them (its own chain's holds are its entry's counts: a
    // follower's tail counted them all, `f`'s own among them, which it lets go of here). A
    // resource's busy count less its chain's count is what others hold of it: the same before
    // and after `f` lets go (both fall by one a use), so each use is checked as it is let go,
    // in one walk of the uses.
    bool free = freeUntil(f) >= end;
    HeadFacts facts{-1, false};  // a head's, from the walk above
    if (t < 0 && g >= 0) {
      facts = head_facts.back();
      head_facts.pop_back();
    }
    if (t >= 0 && uniform_tail[static_cast<size_t>(t)]) {
      // Its tail holds each of its resources once (f among the flows waiting) until its last
      // flow lets go of them all.
      for (size_t i = 0; i < uses.size() && free; ++i) free = busy[uses[i].resource] == 1;
      const size_t tt = static_cast<size_t>(t);
      if (free && g >= 0 && tail_next_foreign[tt] >= 0 && whole_chains && !record_load) {
        endAlone(out.end_us, f, start, now, end);
        const auto [left, at] = runAlong(f, g, end, tail_next_foreign[tt]);
        if (left >= 0) {
          released.push({at, left, t});
        } else {
          for (const LinkUse& u : uses) busy[u.resource] -= 1;  // no flow of it waits
          free_tails.push_back(t);
        }
        return true;
      }
      if (g < 0) {
        for (const LinkUse& u : uses) busy[u.resource] -= 1;
      }
    } else if (t >= 0) {
      TailCounts& counts = tails[static_cast<size_t>(t)];
      for (size_t i = 0; i < uses.size(); ++i) {
        const int r = uses[i].resource;
        int& waiting = countOf(counts, r, i);  // the tail's flows on r, f among them
        const int64_t others = busy[r] - waiting;
        waiting -= 1;
        busy[r] -= 1;
        free = free && others == 0;
      }
    } else {
      for (size_t i = 0; i < uses.size() && free; ++i) free = busy[uses[i].resource] == 0;
      if (free && facts.next_foreign >= 0 && whole_chains && !record_load) {
        endAlone(out.end_us, f, start, now, end);
        // The tail holds its resources only if a follower is left waiting (from the head's start,
        // as ever: nothing read them in between).
        const auto [left, at] = runAlong(f, g, end, facts.next_foreign);
        if (left >= 0) released.push({at, left, hold(g, facts)});
        return true;
      }
    }
    next_tail = -1;
    if (g >= 0) {
      next_tail = t >= 0 ? t : hold(g, facts);
    } else if (t >= 0) {
      free_tails.push_back(t);  // the chain's last flow: its tail is empty
    }
    if (!free) return false;
    endAlone(out.end_us, f, start, now, end);
    if (g >= 0) {
      // Released at its own start_us and not yet passed: it starts in its place in the order,
      // as if it followed nothing (the same time and order the release queue would give it).
      const double g_start = flows.startUs(g);
      const double at = releaseUs(flows.queued(g), g_start, start, duration, end);
      if (at == g_start && !order.done() && !flows.earlier(g, order.peek())) {
        on_time.push({at, g, next_tail});
      } else {
        released.push({at, g, next_tail});
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
    while (chained && !order.done() && flows.follows(order.peek()) &&
           (on_time.empty() || on_time.top().flow != order.peek())) {
      order.pop();
    }
  };
  auto nextStart = [&] {
    const double static_start = order.done() ? kInf : flows.startUs(order.peek());
    return released.empty() ? static_start : std::min(static_start, released.top().us);
  };
  skipFollowers();
  // The flows that start at `now`, in order: alone ones done, the rest into the event loop.
  auto startFlows = [&] {
    while (nextStart() <= now) {
      int f, t = -1;
      if (!released.empty() && released.top().us <= now &&
          (order.done() || flows.startUs(order.peek()) > now ||
           flows.earlier(released.top().flow, order.peek()))) {
        f = released.top().flow;
        t = released.top().tail;
        released.pop();
      } else {
        f = order.pop();
        if (!on_time.empty() && on_time.top().flow == f) {
          t = on_time.top().tail;
          on_time.pop();
        }
        skipFollowers();
      }
      if (alone(f, t)) continue;
      ++in_flight;
      takeSlot(f);
      tail_of[f] = next_tail;
      since_us[f] = now;
      for (const LinkUse& u : flows.usesOf(f)) {
        closeLoad(u.resource);
        on[u.resource].push_back(f);
        busy[u.resource] += kOnBusy;
      }
      seeds.push_back(f);
    }
  };
  // The earliest projected end of a flow in flight (kInf: none), stale ones dropped.
  auto firstEnd = [&] {
    while (!ends.empty() && ends.top().version != version[ends.top().flow]) ends.pop();
    return ends.empty() ? kInf : ends.top().us;
  };
  while (!order.done() || in_flight > 0 || !released.empty()) {
    if (in_flight == 0) now = std::max(now, nextStart());
    for (;;) {
      startFlows();
      // Where every flow that started ran alone and none in flight ends first, nothing changed
      // rates: on to the next start at once (the step below would find no component and no end;
      // issue 34: nearly every flow of a large simulation is alone, each a step of its own).
      if (!seeds.empty()) break;
      const double next = nextStart();
      if (next == kInf || firstEnd() <= next) break;
      now = next;
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
      if (record_load) {
        for (const LinkUse& u : flows.usesOf(f)) closeLoad(u.resource);
      }
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
    if (order.done() && in_flight == 0 && released.empty()) break;
    // Until the next start or the first end at these rates. A flow ends at its projected finish
    // (compared as computed: at times of 1e7 us a residue of 1e-9 us would not move `now`).
    const double until = std::min(nextStart(), firstEnd());
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
    std::sort(ending.begin(), ending.end(), [&](int a, int b) { return flows.earlier(a, b); });
    for (int f : ending) {
      out.end_us.set(f, until);
      --in_flight;
      if (const int g = chained ? flows.follower(f) : -1; g >= 0) {
        released.push({flows.releaseUs(g, f, until), g, tail_of[f]});
      }
      for (const LinkUse& u : flows.usesOf(f)) {
        closeLoad(u.resource);
        std::vector<int>& list = on[u.resource];
        list.erase(std::find(list.begin(), list.end(), f));
        busy[u.resource] -= kOnBusy;
      }
      free_slots.push_back(slot_of[static_cast<size_t>(f)]);  // nothing reads its state again
    }
    for (int f : ending) {
      for (const LinkUse& u : flows.usesOf(f)) {
        seeds.insert(seeds.end(), on[u.resource].begin(), on[u.resource].end());
      }
    }
  }
  out.end_us.done();
  out.capacity_bytes_per_us = std::move(capacity);
  return out;
}

}  // namespace evsim

// One shareLinks call's event loop; sharing_pass.h (its state), link_sharing.h (the model).
#include "modeler/network/sharing_pass.h"

#include <algorithm>

#include "common/error.h"

namespace evsim::sharing {

namespace {

void addLoad(std::vector<LoadSegment>& segments, double start, double end, double bytes_per_us) {
  if (end <= start) return;
  if (!segments.empty() && segments.back().end_us == start &&
      segments.back().bytes_per_us == bytes_per_us) {
    segments.back().end_us = end;
    return;
  }
  segments.push_back({start, end, bytes_per_us});
}

}  // namespace

// Members are built in declaration order: flows_ and capacity_ are set up (setUpShapes, for
// chained_) before the start order reads them.
SharingPass::SharingPass(const FlowList& input, std::span<const double> capacity_bytes_per_us,
                         bool record_load, bool whole_chains)
    : input_(input),
      record_load_(record_load),
      whole_chains_(whole_chains),
      capacity_(capacity_bytes_per_us.begin(), capacity_bytes_per_us.end()),
      chained_(setUpShapes()),
      scratch_{
          std::vector<double>(capacity_.size(), 0), std::vector<double>(capacity_.size(), 0), {}},
      slot_of_(input.size()),
      rate_(slot_of_, 0),
      remaining_us_(slot_of_, 0),
      since_us_(slot_of_, 0),
      seen_at_(slot_of_, -1),
      version_(slot_of_, 0),
      tail_of_(slot_of_, -1),
      on_(capacity_.size()),
      load_since_(capacity_.size(), 0),
      order_(flows_),
      holds_(capacity_.size()),
      released_(ReleasedLater{&flows_}) {
  out_.end_us = FlowEnds(input);
  if (record_load_) out_.load.resize(capacity_.size());
}

// Per shape: whether its flows share, their demand, and the capacities a sharing one raises.
inline bool SharingPass::setUpShapes() {
  const FlowList& input = input_;
  flows_.list = &input;
  flows_.shape_duration_us.assign(input.shapes(), 0);
  flows_.shape_demand.assign(input.shapes(), 0);
  flows_.shape_shares.assign(input.shapes(), 0);
  for (size_t s = 0; s < input.shapes(); ++s) {
    const FlowList::Shape& shape = input.shape(static_cast<int>(s));
    flows_.shape_duration_us[s] = shape.duration_us;
    flows_.shape_shares[s] = shares(shape);
  }
  bool chained = false;
  std::vector<char> seen(input.shapes(), 0);
  for (size_t f = 0; f < input.size(); ++f) {
    const size_t s = static_cast<size_t>(input.shapeOf(f));
    if (!flows_.shape_shares[s]) continue;
    chained = chained || flows_.follows(static_cast<int>(f));
    if (seen[s]) continue;
    seen[s] = 1;
    const FlowList::Shape& shape = input.shape(static_cast<int>(s));
    const double demand = shape.bytes / shape.duration_us;
    flows_.shape_demand[s] = demand;
    for (const LinkUse& u : input.uses(static_cast<int>(s))) {
      EVSIM_CHECK(
          u.resource >= 0 && static_cast<size_t>(u.resource) < capacity_.size() && u.copies > 0,
          "flow {} uses resource {} x{} of {}", f, u.resource, u.copies, capacity_.size());
      capacity_[u.resource] = std::max(capacity_[u.resource], demand * u.copies);
    }
  }
  return chained;
}

// The event loop: the flows that start now (the lone ones done at once), then the component of
// those that share refilled, then on to the next start or projected end, where the flows that
// end leave and seed the next component.
SharingResult SharingPass::run() && {
  findNextStarts();
  while (!order_.done() || in_flight_ > 0 || !released_.empty()) {
    if (in_flight_ == 0) now_ = std::max(now_, nextStart());
    startUntilRatesChange();
    gatherComponent();
    refillComponent();
    if (order_.done() && in_flight_ == 0 && released_.empty()) break;
    // Until the next start or the first end at these rates. A flow ends at its projected finish
    // (compared as computed: at times of 1e7 us a residue of 1e-9 us would not move `now_`).
    const double until = std::min(nextStart(), firstEnd());
    EVSIM_CHECK(until < kInf && until >= now_, "link sharing stalled at {} us", now_);
    now_ = until;
    endFlows(until);
  }
  out_.end_us.done();
  out_.capacity_bytes_per_us = std::move(capacity_);
  return std::move(out_);
}

// A flow that finds its resources empty and ends before the next flow on any of them starts
// runs alone at its demand throughout: it ends on time and takes no event (most flows: a
// pipeline's sends rarely meet). Until it starts, `slot_of_` holds that next flow (n: none), and
// the same walk (latest first) finds each chain head's facts for taking its followers at once
// (chain_runs.h). Then the order turns, earliest first, and the loop starts at its first flow.
inline void SharingPass::findNextStarts() {
  head_facts_ = walkLatestFirst(flows_, order_, capacity_.size(), chained_, slot_of_);
  order_.turn();
  if (!order_.done()) now_ = flows_.startUs(order_.peek());
  skipFollowers();
}

// When the next flow starts: the order's head or the earliest release (kInf: none).
inline double SharingPass::nextStart() {
  const double static_start = order_.done() ? kInf : flows_.startUs(order_.peek());
  return released_.empty() ? static_start : std::min(static_start, released_.top().us);
}

// Passes the order over followers: they start when released, unless released on time (on_time_).
inline void SharingPass::skipFollowers() {
  while (chained_ && !order_.done() && flows_.follows(order_.peek()) &&
         (on_time_.empty() || on_time_.top().flow != order_.peek())) {
    order_.pop();
  }
}

// Starts the flows due at `now_`, and on at once to the next start while none changed rates.
inline void SharingPass::startUntilRatesChange() {
  for (;;) {
    startFlows();
    // Where every flow that started ran alone and none in flight ends first, nothing changed
    // rates: on to the next start at once (the step below would find no component and no end;
    // issue 34: nearly every flow of a large simulation is alone, each a step of its own).
    if (!seeds_.empty()) break;
    const double next = nextStart();
    if (next == kInf || firstEnd() <= next) break;
    now_ = next;
  }
}

// The flows that start at `now_`, in order: alone ones done, the rest into the event loop.
inline void SharingPass::startFlows() {
  while (nextStart() <= now_) {
    int f, t = -1;
    if (!released_.empty() && released_.top().us <= now_ &&
        (order_.done() || flows_.startUs(order_.peek()) > now_ ||
         flows_.earlier(released_.top().flow, order_.peek()))) {
      f = released_.top().flow;
      t = released_.top().tail;
      released_.pop();
    } else {
      f = order_.pop();
      if (!on_time_.empty() && on_time_.top().flow == f) {
        t = on_time_.top().tail;
        on_time_.pop();
      }
      skipFollowers();
    }
    if (alone(f, t)) continue;
    startInFlight(f);
  }
}

// Flow `f` joins the event loop at `now_`: a slot, its resources' lists, a seed of the next fill.
inline void SharingPass::startInFlight(int f) {
  ++in_flight_;
  takeSlot(f);
  tail_of_[f] = next_tail_;
  since_us_[f] = now_;
  for (const LinkUse& u : flows_.usesOf(f)) {
    closeLoad(u.resource);
    on_[u.resource].push_back(f);
    holds_.enter(u.resource);
  }
  seeds_.push_back(f);
}

inline void SharingPass::takeSlot(int f) {
  int slot = slots_;
  if (free_slots_.empty()) {
    ++slots_;
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  slot_of_[static_cast<size_t>(f)] = slot;
  rate_.reset(slot);
  remaining_us_.reset(slot);
  since_us_.reset(slot);
  seen_at_.reset(slot);
  version_.reset(slot, /*keep=*/true);  // a slot's earlier flow's ends stay stale
  tail_of_.reset(slot);
  remaining_us_[f] = flows_.durationUs(f);
}

// When the next flow on `f`'s resources starts (the walk's, in `slot_of_` until `f` starts).
inline double SharingPass::freeUntil(int f) { return nextStartUs(flows_, slot_of_, f); }

// Called as `f` starts at `now_` (`t`: its chain's entry, -1 for a flow that follows none):
// whether it runs alone throughout (then it is done); the waiting marks move along its chain. A
// follower lets go of its own links (its chain's tail from its follower on stays held), a head
// holds its followers' tail; while `f` is checked its own chain's holds are its entry's counts.
inline bool SharingPass::alone(int f, int t) {
  // Its shape read once (issue 34: this runs for every flow).
  const int shape = flows_.shape(f);
  const int g = chained_ ? flows_.followerOfSharing(f) : -1;
  const std::span<const LinkUse> uses = input_.uses(shape);
  const double duration = flows_.shape_duration_us[static_cast<size_t>(shape)];
  const double start = flows_.startUs(f);
  const double end = now_ + duration;
  // Alone: nothing starts on its resources before it ends, no flow of the event loop is on them
  // and no other chain's tail holds them (its own chain's holds are its entry's counts: a
  // follower's tail counted them all, `f`'s own among them, which it lets go of here:
  // ResourceHolds).
  bool free = freeUntil(f) >= end;
  HeadFacts facts{-1, false};  // a head's, from the walk (findNextStarts)
  if (t < 0 && g >= 0) {
    facts = head_facts_.back();
    head_facts_.pop_back();
  }
  if (t >= 0 && holds_.uniform(t)) {
    // Its tail holds each of its resources once (f among the flows waiting) until its last
    // flow lets go of them all.
    free = free && holds_.onlyOwnUniformTail(uses);
    if (free && g >= 0 && holds_.nextForeign(t) >= 0 && whole_chains_ && !record_load_) {
      endAlone(out_.end_us, f, start, now_, end);
      const auto [left, at] = runAlong(f, g, end, holds_.nextForeign(t));
      if (left >= 0) {
        released_.push({at, left, t});
      } else {
        holds_.letGoUniform(uses);  // no flow of it waits
        holds_.release(t);
      }
      return true;
    }
    if (g < 0) holds_.letGoUniform(uses);
  } else if (t >= 0) {
    free = holds_.letGoCounted(t, uses) && free;  // lets go of every use, free or not
  } else {
    free = free && holds_.noneHold(uses);
    if (free && facts.next_foreign >= 0 && whole_chains_ && !record_load_) {
      endAlone(out_.end_us, f, start, now_, end);
      // The tail holds its resources only if a follower is left waiting (from the head's start,
      // as ever: nothing read them in between).
      const auto [left, at] = runAlong(f, g, end, facts.next_foreign);
      if (left >= 0) released_.push({at, left, holds_.hold(flows_, g, facts)});
      return true;
    }
  }
  next_tail_ = -1;
  if (g >= 0) {
    next_tail_ = t >= 0 ? t : holds_.hold(flows_, g, facts);
  } else if (t >= 0) {
    holds_.release(t);  // the chain's last flow: its tail is empty
  }
  if (!free) return false;
  endAlone(out_.end_us, f, start, now_, end);
  if (g >= 0) releaseAloneFollower(g, start, duration, end);
  if (record_load_) recordAloneLoad(f, end);
  return true;
}

// A chain's followers at once (chain_runs.h): those that end on their release's times with no
// release, check or event, counted; the first that does not is released as `alone` would.
inline std::pair<int, double> SharingPass::runAlong(int f, int g, double end, int next_foreign) {
  return sharing::runAlong(flows_, slot_of_, out_.end_us, out_.whole_chain_flows, f, g, end,
                           next_foreign);
}

// Follower `g` of `f`, which ran alone from `now_` to `end` (its own start `start`, `duration`
// alone), is released: at its own start_us and not yet passed, it starts in its place in the
// order, as if it followed nothing (the same time and order the release queue would give it).
inline void SharingPass::releaseAloneFollower(int g, double start, double duration, double end) {
  const double g_start = flows_.startUs(g);
  const double at = releaseUs(flows_.queued(g), g_start, start, duration, end);
  if (at == g_start && !order_.done() && !flows_.earlier(g, order_.peek())) {
    on_time_.push({at, g, next_tail_});
  } else {
    released_.push({at, g, next_tail_});
  }
}

// A lone flow's load from `now_` to `end` on each of its resources.
inline void SharingPass::recordAloneLoad(int f, double end) {
  for (const LinkUse& u : flows_.usesOf(f)) {
    closeLoad(u.resource);
    addLoad(out_.load[u.resource], now_, end, flows_.demand(f) * u.copies);
  }
}

// The component of the flows that started, or that shared a resource with one that ended.
inline void SharingPass::gatherComponent() {
  component_.clear();
  for (int f : seeds_) {
    if (seen_at_[f] == event_) continue;
    seen_at_[f] = event_;
    component_.push_back(f);
  }
  for (size_t i = 0; i < component_.size(); ++i) {
    for (const LinkUse& u : flows_.usesOf(component_[i])) {
      for (int g : on_[u.resource]) {
        if (seen_at_[g] == event_) continue;
        seen_at_[g] = event_;
        component_.push_back(g);
      }
    }
  }
  seeds_.clear();
  ++event_;
}

// The component's progress at the old rates up to now, then the new rates and where they end the
// flows.
inline void SharingPass::refillComponent() {
  for (int f : component_) {
    if (record_load_) {
      for (const LinkUse& u : flows_.usesOf(f)) closeLoad(u.resource);
    }
    if (since_us_[f] < now_) {
      remaining_us_[f] =
          std::max(0.0, remaining_us_[f] - (now_ - since_us_[f]) * rate_[f] / flows_.demand(f));
      since_us_[f] = now_;
    }
  }
  if (!component_.empty()) fill(flows_, capacity_, component_, rate_, scratch_);
  for (int f : component_) {
    ends_.push({now_ + remaining_us_[f] * flows_.demand(f) / rate_[f], f, ++version_[f]});
  }
}

// The earliest projected end of a flow in flight (kInf: none), stale ones dropped.
inline double SharingPass::firstEnd() {
  while (!ends_.empty() && ends_.top().version != version_[ends_.top().flow]) ends_.pop();
  return ends_.empty() ? kInf : ends_.top().us;
}

// The flows that end at `until` leave their resources, in start order (the order of the
// resources' lists); then the flows left on those are seeded, in the order they sit there. Every
// flow that ends now leaves before any is seeded: one seeded and then ended in the same step would
// be refilled as if still in flight.
inline void SharingPass::endFlows(double until) {
  ending_.clear();
  for (; !ends_.empty() && ends_.top().us <= until; ends_.pop()) {
    const Finish& end = ends_.top();
    if (end.version != version_[end.flow]) continue;
    ++version_[end.flow];
    ending_.push_back(end.flow);
  }
  std::sort(ending_.begin(), ending_.end(), [&](int a, int b) { return flows_.earlier(a, b); });
  for (int f : ending_) endFlow(f, until);
  for (int f : ending_) {
    for (const LinkUse& u : flows_.usesOf(f)) {
      seeds_.insert(seeds_.end(), on_[u.resource].begin(), on_[u.resource].end());
    }
  }
}

// Flow `f` ends at `until`: its follower is released, it leaves its resources and its slot.
inline void SharingPass::endFlow(int f, double until) {
  out_.end_us.set(f, until);
  --in_flight_;
  if (const int g = chained_ ? flows_.follower(f) : -1; g >= 0) {
    released_.push({flows_.releaseUs(g, f, until), g, tail_of_[f]});
  }
  for (const LinkUse& u : flows_.usesOf(f)) {
    closeLoad(u.resource);
    std::vector<int>& list = on_[u.resource];
    list.erase(std::find(list.begin(), list.end(), f));
    holds_.leave(u.resource);
  }
  free_slots_.push_back(slot_of_[static_cast<size_t>(f)]);  // nothing reads its state again
}

// A recorded resource's load from its last change to `now_`, before its flows change.
inline void SharingPass::closeLoad(int r) {
  if (!record_load_ || load_since_[r] == now_) return;
  double load = 0;
  for (int g : on_[r]) {
    for (const LinkUse& u : flows_.usesOf(g)) load += u.resource == r ? rate_[g] * u.copies : 0;
  }
  if (load > 0) addLoad(out_.load[r], load_since_[r], now_, load);
  load_since_[r] = now_;
}

}  // namespace evsim::sharing

#pragma once
// Who holds each resource, for link sharing's lone check (SharingPass::alone): the flows of its
// event loop on it and the waiting tails of chains. Internal to link sharing; inline throughout
// (the check runs for every flow, ~10^6 a simulation).
//
// Chains: a follower starts at or after its own start_us, so SharingPass::freeUntil (which sees
// every later flow at its own start_us) bounds the flows after a flow in start order; but a
// follower before it may still be waiting for the flow it follows and start inside its run. So
// from the start of the flow before it until its own start, a follower and the rest of its chain
// hold their resources as `waiting` (the chain's tail: a chain's collectives may use different
// links), and a flow on a resource with a waiting follower of another chain is not alone. A
// resource counts once per flow of a tail that uses it, zero exactly when no tail holds it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "modeler/network/chain_runs.h"
#include "modeler/network/link_sharing.h"
#include "modeler/network/sharing_flows.h"

namespace evsim::sharing {

class ResourceHolds {
 public:
  explicit ResourceHolds(size_t resources) : busy_(resources, 0) {}

  // A flow of the event loop joins or leaves resource `r`.
  void enter(int r) { busy_[static_cast<size_t>(r)] += kOnBusy; }
  void leave(int r) { busy_[static_cast<size_t>(r)] -= kOnBusy; }

  // Whether nothing holds any of `uses` (a flow that follows none: a head or a lone flow).
  bool noneHold(std::span<const LinkUse> uses) const {
    for (const LinkUse& u : uses) {
      if (busy_[static_cast<size_t>(u.resource)] != 0) return false;
    }
    return true;
  }

  // A head starts: the tail from its follower `g` on holds its resources (`facts`: the walk's);
  // the tail's entry.
  int hold(const Flows& flows, int g, const HeadFacts& facts);
  // Entry `t`'s head's HeadFacts::next_foreign, and whether its tail is uniform (below).
  int nextForeign(int t) const { return tail_next_foreign_[static_cast<size_t>(t)]; }
  bool uniform(int t) const { return uniform_tail_[static_cast<size_t>(t)] != 0; }
  // Whether only a uniform tail holds `uses` (its own: a flow of it checking its resources).
  bool onlyOwnUniformTail(std::span<const LinkUse> uses) const {
    for (const LinkUse& u : uses) {
      if (busy_[static_cast<size_t>(u.resource)] != 1) return false;
    }
    return true;
  }
  // A uniform tail's last flow lets go of its resources.
  void letGoUniform(std::span<const LinkUse> uses) {
    for (const LinkUse& u : uses) busy_[static_cast<size_t>(u.resource)] -= 1;
  }
  // A follower of counted tail `t` lets go of its own `uses`; whether nothing but its tail held
  // them. A resource's busy count less its chain's count is what others hold of it: the same
  // before and after the follower lets go (both fall by one a use), so each use is checked as it
  // is let go, in one walk of the uses.
  bool letGoCounted(int t, std::span<const LinkUse> uses);
  // Entry `t` is free again: its chain's last flow started (its tail is empty).
  void release(int t) { free_tails_.push_back(t); }

 private:
  using TailCounts = std::vector<std::pair<int, int>>;  // (resource, count), the few of a chain
  static int& countOf(TailCounts& counts, int resource, size_t hint);

  // `busy_` holds both per resource: its waiting count, plus kOnBusy per flow of the event loop
  // on it, so that a flow's check reads one number a resource (issue 34: this check runs for
  // every flow, ~10^6 a simulation, nearly all of them alone).
  static constexpr int64_t kOnBusy = int64_t{1} << 32;
  std::vector<int64_t> busy_;
  // Each chain's own part of `waiting` (its tail's count per resource it uses), while its tail
  // holds any: counted once when its head starts, then each follower that starts takes its own
  // uses off, so checking a follower costs its uses, not a walk of its tail (issue 34). The
  // chain's entry travels with it: from the flow that starts to its follower's release and, while
  // that flow is in flight, in the event loop's `tail_of_`.
  std::vector<TailCounts> tails_;  // reused; free ones listed in free_tails_
  std::vector<int> free_tails_;
  // A uniform tail (every flow of it on the same resources, each once: a task's collectives of one
  // group, nearly every chain) holds each of its resources once, not once per flow, until its
  // last flow starts: a resource is held by it exactly while some flow of it that uses the
  // resource waits, as with the counts, so every check reads the same (busy less its own holds
  // is zero exactly when no other tail and no flow in flight is on the resource). Its flows then
  // cost no count each, only a read a use (issue 34: counting every flow's uses into its chain's
  // tail and out again was most of the lone check, itself a fifth of the sharing pass in the
  // exhaustive search on Calculon's space).
  std::vector<char> uniform_tail_;  // per entry of `tails_`
  // Per entry of `tails_`, its head's next_foreign (runAlong; -1: not one resource set).
  std::vector<int> tail_next_foreign_;
};

inline int ResourceHolds::hold(const Flows& flows, int g, const HeadFacts& facts) {
  int t = static_cast<int>(tails_.size());
  if (free_tails_.empty()) {
    tails_.emplace_back();
    uniform_tail_.push_back(0);
    tail_next_foreign_.push_back(-1);
  } else {
    t = free_tails_.back();
    free_tails_.pop_back();
  }
  TailCounts& counts = tails_[static_cast<size_t>(t)];
  counts.clear();
  const bool uniform = facts.uniform_tail;
  tail_next_foreign_[static_cast<size_t>(t)] = facts.next_foreign;
  uniform_tail_[static_cast<size_t>(t)] = uniform;
  if (uniform) {
    for (const LinkUse& u : flows.usesOf(g)) busy_[static_cast<size_t>(u.resource)] += 1;
    return t;
  }
  for (int h = g; h >= 0; h = flows.follower(h)) {
    const std::span<const LinkUse> uses = flows.usesOf(h);
    for (size_t i = 0; i < uses.size(); ++i) {
      busy_[static_cast<size_t>(uses[i].resource)] += 1;
      countOf(counts, uses[i].resource, i) += 1;
    }
  }
  return t;
}

inline bool ResourceHolds::letGoCounted(int t, std::span<const LinkUse> uses) {
  TailCounts& counts = tails_[static_cast<size_t>(t)];
  bool none = true;
  for (size_t i = 0; i < uses.size(); ++i) {
    const int r = uses[i].resource;
    int& waiting = countOf(counts, r, i);  // the tail's flows on r, the follower among them
    const int64_t others = busy_[static_cast<size_t>(r)] - waiting;
    waiting -= 1;
    busy_[static_cast<size_t>(r)] -= 1;
    none = none && others == 0;
  }
  return none;
}

// `hint`: where to look first (a chain's flows mostly use the same resources in the same order,
// so a follower's i-th use is most often the tail's i-th entry).
inline int& ResourceHolds::countOf(TailCounts& counts, int resource, size_t hint) {
  if (hint < counts.size() && counts[hint].first == resource) return counts[hint].second;
  for (auto& [r, c] : counts) {
    if (r == resource) return c;
  }
  return counts.emplace_back(resource, 0).second;
}

}  // namespace evsim::sharing

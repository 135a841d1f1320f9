// A chain's followers taken at once by link sharing; chain_runs.h.
#include "modeler/network/chain_runs.h"

#include <algorithm>
#include <map>

namespace evsim::sharing {

namespace {

// Per shape, its resources as a set's number: shapes on the same resources in the same order
// share one (-1: a shape that does not share, or lists a resource twice). A chain whose flows all
// have one is uniform (link sharing's hold).
std::vector<int> resourceSets(const Flows& flows) {
  const FlowList& input = *flows.list;
  std::vector<int> resource_set(input.shapes(), -1);
  std::map<std::vector<int>, int> sets;
  std::vector<int> key, sorted;  // reused: no allocation a shape
  for (size_t s = 0; s < input.shapes(); ++s) {
    if (!flows.shape_shares[s]) continue;
    key.clear();
    for (const LinkUse& u : input.uses(static_cast<int>(s))) key.push_back(u.resource);
    sorted.assign(key.begin(), key.end());
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) continue;
    resource_set[s] = sets.try_emplace(key, static_cast<int>(sets.size())).first->second;
  }
  return resource_set;
}

}  // namespace

// Each flow's next flow on its resources: per resource the latest flow seen so far (the walk goes
// latest first). A head's next foreign head: the same per resource, of heads only (a chain touches
// its resources from its head's start, when its tail begins to hold them; a head not on one
// resource set marks every resource of its chain).
std::vector<HeadFacts> walkLatestFirst(const Flows& flows, StartOrder& order, size_t resources,
                                       bool chained, std::span<int> next_start) {
  const std::vector<int> resource_set = chained ? resourceSets(flows) : std::vector<int>();
  std::vector<HeadFacts> head_facts;  // latest head on top
  const int none = static_cast<int>(flows.list->size());
  std::vector<int> next_on(resources, none);
  std::vector<int> next_head_on(chained ? resources : 0, none);
  while (!order.latestDone()) {
    const int f = order.popLatest();
    int until = none;
    for (const LinkUse& u : flows.usesOf(f)) {
      const int g = next_on[u.resource];
      if (g != none && (until == none || flows.earlier(g, until))) until = g;
      next_on[u.resource] = f;
    }
    next_start[static_cast<size_t>(f)] = until;
    if (!chained || flows.follows(f)) continue;  // a follower touches from its head's start
    const int g = flows.followerOfSharing(f);
    if (g < 0) {
      for (const LinkUse& u : flows.usesOf(f)) next_head_on[u.resource] = f;
      continue;
    }
    const int set = resource_set[static_cast<size_t>(flows.shape(g))];
    bool uniform = set >= 0;
    for (int h = flows.follower(g); h >= 0 && uniform; h = flows.follower(h)) {
      uniform = resource_set[static_cast<size_t>(flows.shape(h))] == set;
    }
    const bool one_set = uniform && resource_set[static_cast<size_t>(flows.shape(f))] == set;
    int next_foreign = -1;
    if (one_set) {
      next_foreign = none;
      for (const LinkUse& u : flows.usesOf(f)) {
        const int h = next_head_on[u.resource];
        if (h != none && (next_foreign == none || flows.earlier(h, next_foreign))) {
          next_foreign = h;
        }
        next_head_on[u.resource] = f;
      }
    } else {
      for (int h = f; h >= 0; h = flows.follower(h)) {
        for (const LinkUse& u : flows.usesOf(h)) next_head_on[u.resource] = f;
      }
    }
    head_facts.push_back({next_foreign, uniform});
  }
  return head_facts;
}

// While nothing foreign is processed on the chain's resources, every later follower is checked
// here as link sharing's `alone` would check it when released, and the checks read the same: when
// `f` starts no flow is in flight and no other tail holds the resources (f's own check read them
// all: a head none held, a follower only its own tail's hold), and nothing changes that before a
// follower starts unless something processed after `f` does: a flow starting on the resources or
// a tail beginning to hold them, either way a head, or a follower of one, that starts no later.
// The first head after the chain's head in start order whose chain uses the resources starts at
// `next_foreign` (n: never). So each follower that starts before that is alone exactly when its
// next flow in start order (nextStartUs) starts no earlier than its end, its start the release's
// arithmetic (releaseUs, as `alone` computes it). The first that is not (or starts at or after
// the limit) is released as `alone` would release it, at that time: through link sharing's
// `released_`, which starts it in its place in the order as `on_time_` would. (Followers are still
// passed over by the start order: link sharing's skipFollowers.)
std::pair<int, double> runAlong(const Flows& flows, std::span<const int> next_start, FlowEnds& ends,
                                size_t& taken, int f, int g, double end_us, int next_foreign) {
  const double limit =
      static_cast<size_t>(next_foreign) < flows.list->size() ? flows.startUs(next_foreign) : kInf;
  double prev_start = flows.startUs(f), prev_duration = flows.durationUs(f), prev_end = end_us;
  for (int h = g; h >= 0; h = flows.followerOfSharing(h)) {
    const double h_start = flows.startUs(h);
    const double at = releaseUs(flows.queued(h), h_start, prev_start, prev_duration, prev_end);
    const double duration = flows.durationUs(h);
    const double h_end = at + duration;
    if (at >= limit || nextStartUs(flows, next_start, h) < h_end) return {h, at};
    endAlone(ends, h, h_start, at, h_end);
    ++taken;
    prev_start = h_start;
    prev_duration = duration;
    prev_end = h_end;
  }
  return {-1, 0.0};
}

}  // namespace evsim::sharing

// Progressive filling over flows in flight; link_sharing.h states the model.
#include "modeler/network/link_sharing.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace evsim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Per-resource and per-flow scratch of the fill, kept across calls (zero between them).
struct Scratch {
  std::vector<double> used, users;
  std::vector<char> frozen;
};

bool shares(const SharedFlow& f) { return !f.uses.empty() && f.bytes > 0 && f.duration_us > 0; }

// The max-min fair rates (bytes/us) of the `active` flows into `rate`.
void fill(std::span<const SharedFlow> flows, std::span<const double> capacity,
          std::span<const double> demand, const std::vector<int>& active, std::vector<double>& rate,
          Scratch& scratch) {
  std::vector<double>& used = scratch.used;
  std::vector<double>& users = scratch.users;
  std::vector<char>& frozen = scratch.frozen;
  frozen.assign(active.size(), 0);
  if (active.size() == 1) {  // alone: its demand (the capacity is at least that)
    rate[active[0]] = demand[active[0]];
    return;
  }
  for (int f : active) {
    rate[f] = 0;
    for (const LinkUse& u : flows[f].uses) users[u.resource] += u.copies;
  }
  double level = 0;
  size_t left = active.size();
  while (left > 0) {
    // The next step: the first unfrozen flow to reach its demand, or resource to fill up.
    double step = kInf;
    for (size_t i = 0; i < active.size(); ++i) {
      if (frozen[i]) continue;
      const int f = active[i];
      step = std::min(step, demand[f] - level);
      for (const LinkUse& u : flows[f].uses) {
        step = std::min(step, (capacity[u.resource] - used[u.resource]) / users[u.resource]);
      }
    }
    step = std::max(step, 0.0);
    level += step;
    for (size_t i = 0; i < active.size(); ++i) {
      if (frozen[i]) continue;
      for (const LinkUse& u : flows[active[i]].uses) used[u.resource] += step * u.copies;
    }
    // Freeze flows at their demand or on a full resource (relative tolerance: rounding).
    for (size_t i = 0; i < active.size(); ++i) {
      if (frozen[i]) continue;
      const int f = active[i];
      bool stop = level >= demand[f] * (1 - 1e-12);
      for (const LinkUse& u : flows[f].uses) {
        stop = stop || used[u.resource] >= capacity[u.resource] * (1 - 1e-12);
      }
      if (!stop) continue;
      frozen[i] = 1;
      --left;
      rate[f] = std::min(level, demand[f]);
      for (const LinkUse& u : flows[f].uses) users[u.resource] -= u.copies;
    }
  }
  for (int f : active) {
    for (const LinkUse& u : flows[f].uses) used[u.resource] = users[u.resource] = 0;
  }
}

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

LinkUses::LinkUses(std::initializer_list<LinkUse> uses) {
  for (const LinkUse& u : uses) push_back(u);
}

void LinkUses::push_back(LinkUse use) {
  EVSIM_CHECK(size_ < kMax, "a flow over more than {} links", kMax);
  at_[size_++] = use;
}

SharingResult shareLinks(std::span<const SharedFlow> flows,
                         std::span<const double> capacity_bytes_per_us, bool record_load) {
  const size_t n = flows.size();
  SharingResult out;
  out.end_us.resize(n);
  if (record_load) out.load.resize(capacity_bytes_per_us.size());
  std::vector<double> capacity(capacity_bytes_per_us.begin(), capacity_bytes_per_us.end());
  std::vector<double> demand(n, 0), remaining_us(n, 0), rate(n, 0), finish(n, 0);
  std::vector<int> order;
  order.reserve(n);
  for (size_t f = 0; f < n; ++f) {
    const SharedFlow& flow = flows[f];
    out.end_us[f] = flow.start_us + flow.duration_us;
    if (!shares(flow)) continue;
    demand[f] = flow.bytes / flow.duration_us;
    remaining_us[f] = flow.duration_us;
    for (const LinkUse& u : flow.uses) {
      EVSIM_CHECK(
          u.resource >= 0 && static_cast<size_t>(u.resource) < capacity.size() && u.copies > 0,
          "flow {} uses resource {} x{} of {}", f, u.resource, u.copies, capacity.size());
      capacity[u.resource] = std::max(capacity[u.resource], demand[f] * u.copies);
    }
    order.push_back(static_cast<int>(f));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return flows[a].start_us < flows[b].start_us; });

  Scratch scratch{
      std::vector<double>(capacity.size(), 0), std::vector<double>(capacity.size(), 0), {}};
  std::vector<double>& used = scratch.used;
  // The flows in flight, and per resource those on it: an event refills only the flows connected
  // to it through shared resources (the rest keep their rates: max-min fairness is per connected
  // component), so a lone flow costs no fill.
  std::vector<int> active;
  std::vector<std::vector<int>> on(capacity.size());
  std::vector<int> seen_at(n, -1), component, seeds;
  int event = 0;
  size_t next = 0;
  double now = order.empty() ? 0 : flows[order[0]].start_us;
  while (next < order.size() || !active.empty()) {
    if (active.empty()) now = std::max(now, flows[order[next]].start_us);
    while (next < order.size() && flows[order[next]].start_us <= now) {
      const int f = order[next++];
      active.push_back(f);
      for (const LinkUse& u : flows[f].uses) on[u.resource].push_back(f);
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
      for (const LinkUse& u : flows[component[i]].uses) {
        for (int g : on[u.resource]) {
          if (seen_at[g] == event) continue;
          seen_at[g] = event;
          component.push_back(g);
        }
      }
    }
    seeds.clear();
    ++event;
    fill(flows, capacity, demand, component, rate, scratch);
    // Until the next start or the first end at these rates. A flow ends at its projected finish
    // (compared as computed: at times of 1e7 us a residue of 1e-9 us would not move `now`).
    double until = next < order.size() ? flows[order[next]].start_us : kInf;
    for (int f : active) {
      finish[f] = now + remaining_us[f] * demand[f] / rate[f];
      until = std::min(until, finish[f]);
    }
    EVSIM_CHECK(until < kInf && until >= now, "link sharing stalled at {} us", now);
    if (record_load) {
      for (int f : active) {
        for (const LinkUse& u : flows[f].uses) used[u.resource] += rate[f] * u.copies;
      }
      for (int f : active) {
        for (const LinkUse& u : flows[f].uses) {
          if (used[u.resource] == 0) continue;  // already written for this step
          addLoad(out.load[u.resource], now, until, used[u.resource]);
          used[u.resource] = 0;
        }
      }
    }
    std::erase_if(active, [&](int f) {
      if (finish[f] > until) {
        remaining_us[f] -= (until - now) * rate[f] / demand[f];
        return false;
      }
      out.end_us[f] = until;
      for (const LinkUse& u : flows[f].uses) {
        std::vector<int>& list = on[u.resource];
        list.erase(std::find(list.begin(), list.end(), f));
        seeds.insert(seeds.end(), list.begin(), list.end());
      }
      return true;
    });
    now = until;
  }
  out.capacity_bytes_per_us = std::move(capacity);
  return out;
}

}  // namespace evsim

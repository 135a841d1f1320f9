// Link loads of a simulated iteration; link_usage.h states what is counted.
#include "modeler/link_usage.h"

#include <algorithm>
#include <limits>

#include "fmt/format.h"
#include "modeler/link_flows.h"

namespace evsim {

namespace {

// Each resource's segments of flows that each ran alone (transferLoads), as shareLinks records
// them when no two flows meet on a resource: in start order (ties in the flows' order), adjacent
// equal loads joined. Most simulations are such (a pipeline's sends into a device never overlap),
// and shareLinks' event loop, its start-order merge and the flow list were the larger part of a
// simulate's cost per micro-batch (issue 34 item 3). False when two flows overlap somewhere:
// then they share, and shareLinks decides.
bool aloneLoads(std::vector<std::vector<LoadSegment>>& load) {
  auto by_start = [](const LoadSegment& a, const LoadSegment& b) {
    return a.start_us < b.start_us;
  };
  std::vector<size_t> runs, joined;
  for (std::vector<LoadSegment>& segments : load) {
    // A resource's flows come as a few runs already in time order (each sender's sends, a
    // device's DP stream), merged pairwise (stable).
    runs.clear();
    for (size_t i = 0; i < segments.size(); ++i) {
      if (i == 0 || by_start(segments[i], segments[i - 1])) runs.push_back(i);
    }
    runs.push_back(segments.size());
    while (runs.size() > 2) {
      joined.clear();
      for (size_t r = 0; r + 1 < runs.size(); r += 2) {
        joined.push_back(runs[r]);
        if (r + 2 < runs.size()) {
          std::inplace_merge(segments.begin() + static_cast<std::ptrdiff_t>(runs[r]),
                             segments.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                             segments.begin() + static_cast<std::ptrdiff_t>(runs[r + 2]), by_start);
        }
      }
      joined.push_back(segments.size());
      runs.swap(joined);
    }
    // Two flows meet where one starts before an earlier one ends; else each is alone, and its
    // segment is recorded as link_sharing.cpp's addLoad does (nothing for an empty stretch, one
    // segment for two equal loads back to back).
    double busy_until = -std::numeric_limits<double>::infinity();
    size_t kept = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      const LoadSegment s = segments[i];
      if (s.start_us < busy_until) return false;
      busy_until = std::max(busy_until, s.end_us);
      if (s.end_us <= s.start_us) continue;
      if (kept > 0 && segments[kept - 1].end_us == s.start_us &&
          segments[kept - 1].bytes_per_us == s.bytes_per_us) {
        segments[kept - 1].end_us = s.end_us;
        continue;
      }
      segments[kept++] = s;
    }
    segments.resize(kept);
  }
  return true;
}

}  // namespace

LinkUsage linkUsage(const Simulation& sim) {
  const IterationPlan& plan = sim.plan;
  const LinkMap map = linkMap(plan);
  std::vector<double> capacity = map.capacities();
  SharingResult shared;
  if (plan.cluster.topology.link_sharing) {
    // Shared again when the timing shared them (the flows carry their standalone times), unless
    // no two ever meet (aloneLoads).
    std::vector<double> raised = capacity;
    if (transferLoads(plan, sim.costs, sim.offsets, sim.input, sim.timeline, map, raised,
                      shared.load) &&
        aloneLoads(shared.load)) {
      capacity = std::move(raised);
    } else {
      const TimelineFlows flows =
          timelineFlows(plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
      shared = shareLinks(flows.list, capacity, /*record_load=*/true);
      capacity = shared.capacity_bytes_per_us;
    }
  } else {
    // Each at its own rate, as the timing had it (unshared flows together may then load a link
    // past its capacity: a utilisation above 1 says so).
    // A flow alone runs at its demand from its own start for its standalone time and loads each
    // resource it uses copies x demand (shareLinks' rule for a lone flow, which raises a
    // resource's capacity to that where it is more), written here per flow and per use: calling
    // shareLinks once per flow cost every resource per flow (minutes at 10^6 in-task flows).
    const TimelineFlows flows =
        timelineFlows(plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
    shared.load.resize(capacity.size());
    const FlowList& list = flows.list;
    for (size_t f = 0; f < list.size(); ++f) {
      const FlowList::Shape& shape = list.shape(list.shapeOf(f));
      if (shape.bytes <= 0 || shape.duration_us <= 0) continue;
      const double demand = shape.bytes / shape.duration_us;
      const double start_us = list.startUs(f);
      for (const LinkUse& u : list.uses(list.shapeOf(f))) {
        const double load = demand * u.copies;
        capacity[u.resource] = std::max(capacity[u.resource], load);
        shared.load[u.resource].push_back({start_us, start_us + shape.duration_us, load});
      }
    }
  }
  LinkUsage out;
  out.iteration_us = sim.timeline.iteration_us;
  for (size_t r = 0; r < capacity.size(); ++r) {
    std::vector<LoadSegment>& segments = shared.load[r];
    if (segments.empty()) continue;
    LinkLoad link;
    link.name = linkName(plan.cluster.topology, map.resources[r]);
    link.capacity_bytes_per_us = capacity[r];
    if (!plan.cluster.topology.link_sharing) {
      // Unshared flows may overlap: add their loads up per stretch of time, sweeping the
      // segments' starts and ends in time order (the load between two successive times is the
      // sum of the segments that began and have not ended).
      std::vector<std::pair<double, double>> steps;  // (time, load change)
      steps.reserve(2 * segments.size());
      for (const LoadSegment& s : segments) {
        if (s.end_us <= s.start_us || s.bytes_per_us <= 0) continue;
        steps.push_back({s.start_us, s.bytes_per_us});
        steps.push_back({s.end_us, -s.bytes_per_us});
      }
      std::sort(steps.begin(), steps.end());
      std::vector<LoadSegment> merged;
      int open = 0;
      double load = 0;
      for (size_t i = 0; i < steps.size();) {
        const double at = steps[i].first;
        for (; i < steps.size() && steps[i].first == at; ++i) {
          load += steps[i].second;
          open += steps[i].second > 0 ? 1 : -1;
        }
        if (open == 0) load = 0;  // no rounding left over where nothing runs
        if (i < steps.size() && load > 0) merged.push_back({at, steps[i].first, load});
      }
      segments = std::move(merged);
    }
    for (const LoadSegment& s : segments) link.bytes += s.bytes_per_us * (s.end_us - s.start_us);
    link.segments = std::move(segments);
    out.links.push_back(std::move(link));
  }
  return out;
}

std::vector<const LinkLoad*> busiestLinks(const LinkUsage& usage, size_t n) {
  std::vector<const LinkLoad*> out;
  for (const LinkLoad& l : usage.links) out.push_back(&l);
  std::stable_sort(out.begin(), out.end(), [&](const LinkLoad* a, const LinkLoad* b) {
    return a->utilization(usage.iteration_us) > b->utilization(usage.iteration_us);
  });
  if (out.size() > n) out.resize(n);
  return out;
}

void writeLinkCsv(const LinkUsage& usage, std::ostream& out) {
  out << "resource,capacity_gb_s,start_us,end_us,bytes,utilization\n";
  for (const LinkLoad& l : usage.links) {
    for (const LoadSegment& s : l.segments) {
      out << fmt::format("{},{:.3f},{:.3f},{:.3f},{:.0f},{:.4f}\n", l.name,
                         l.capacity_bytes_per_us / 1e3, s.start_us, s.end_us,
                         s.bytes_per_us * (s.end_us - s.start_us),
                         s.bytes_per_us / l.capacity_bytes_per_us);
    }
  }
}

}  // namespace evsim

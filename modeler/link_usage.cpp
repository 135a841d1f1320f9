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
      shared = shareLinks(flows.flows, capacity, /*record_load=*/true);
      capacity = shared.capacity_bytes_per_us;
    }
  } else {
    // Each at its own rate, as the timing had it (unshared flows together may then load a link
    // past its capacity: a utilisation above 1 says so).
    const TimelineFlows flows =
        timelineFlows(plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
    shared.load.resize(capacity.size());
    std::vector<SharedFlow> alone(1);
    for (const SharedFlow& f : flows.flows) {
      alone[0] = f;
      alone[0].after = -1;  // alone: at its own start
      const SharingResult one = shareLinks(alone, capacity, /*record_load=*/true);
      for (size_t r = 0; r < capacity.size(); ++r) {
        shared.load[r].insert(shared.load[r].end(), one.load[r].begin(), one.load[r].end());
        capacity[r] = one.capacity_bytes_per_us[r];  // raised for one flow at most
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
      // Unshared flows may overlap: add their loads up per stretch of time.
      std::vector<double> cuts;
      for (const LoadSegment& s : segments) {
        cuts.push_back(s.start_us);
        cuts.push_back(s.end_us);
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<LoadSegment> merged;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        double load = 0;
        for (const LoadSegment& s : segments) {
          if (s.start_us <= cuts[i] && s.end_us >= cuts[i + 1]) load += s.bytes_per_us;
        }
        if (load > 0) merged.push_back({cuts[i], cuts[i + 1], load});
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

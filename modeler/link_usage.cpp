// Link loads of a simulated iteration; link_usage.h states what is counted.
#include "modeler/link_usage.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include "fmt/format.h"
#include "modeler/in_task_flows.h"
#include "modeler/link_flows.h"
#include "modeler/timeline_flow_walk.h"

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
    // segment is recorded as sharing_pass.cpp's addLoad does (nothing for an empty stretch, one
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

// Each resource's capacity and bytes as transferLoads, aloneLoads and linkUsage's sum give them,
// without listing a load segment per resource and flow (issue 34 item 3: that listing, its run
// merge and sweep were a third of a simulate's cost per micro-batch, for a summary that reads two
// numbers per link). The pipeline sends are read from the timeline in place: a resource's sources
// are the devices whose sends use it (each its tasks with one of a few links and directions, in
// task order: a send holds its device) and the DP collectives and ZeRO gathers that use it (a few
// per device, listed). Its flows are its sources merged by start, ties in walkTimelineFlows' order
// (the stable order aloneLoads sorts them into), swept as aloneLoads sweeps them (two flows meet
// where one starts before an earlier one ends; empty stretches dropped, equal loads back to back
// joined) and summed as linkUsage sums them, in the same order: the same numbers, bit for bit.
enum class Alone {
  kYes,      // no two flows meet: `used` and `bytes` set, `capacity` raised
  kMeet,     // two flows meet on a resource: shareLinks decides
  kUnknown,  // not this path's case (in-task collectives, sends out of time order): the listing
};

struct AloneTotals {
  std::vector<char> used;  // per resource: whether it carried a non-empty stretch
  std::vector<double> bytes;
};

Alone aloneTotals(const Simulation& sim, const LinkMap& map, std::vector<double>& capacity,
                  AloneTotals& out) {
  const IterationPlan& plan = sim.plan;
  const IterationTimeline& timeline = sim.timeline;
  if (hasInTaskOps(plan, sim.costs, sim.offsets)) return Alone::kUnknown;
  // A flow's loads alone (transferLoads' loadsOf: the same values, `capacity` the same maxima).
  struct Loads {
    bool known = false;
    int count = 0;
    FlowLoads at;
  };
  bool repeated_resource = false;  // a flow using one resource twice (its loads would meet)
  auto loadsOf = [&](const SharedFlow& f, Loads& loads) {
    loads.known = true;
    loads.count = flowLoads(f, capacity, loads.at);
    for (int i = 1; i < loads.count; ++i) {
      for (int j = 0; j < i; ++j) repeated_resource |= loads.at[i].first == loads.at[j].first;
    }
  };
  // A flow's place in walkTimelineFlows' order: its device (class, stage), then its task's
  // position, the device's collectives after its tasks.
  const size_t P = static_cast<size_t>(plan.deviceStages());
  auto orderOf = [&](size_t k, size_t s, size_t at) {
    return (static_cast<uint64_t>(k * P + s) << 32) | static_cast<uint64_t>(at);
  };
  struct Accept {
    bool ok = false;  // the source's resource carries this link and direction
    double duration_us = 0;
    double load = 0;
  };
  // Per device, its tasks' links and directions as small codes: the graph's send codes
  // (TaskGraph::send_codes), one byte a task shared by every class, read in place (issue 34 item
  // 3: a pass per class coding each task from its node was ~25 instructions a task).
  constexpr size_t kCodes = 16;
  struct Source {
    // A device's sends over the links its `accept` takes (its tasks, in task order) ...
    const TaskTiming* tasks = nullptr;
    const uint8_t* code = nullptr;
    size_t size = 0;
    size_t next = 0;
    uint64_t device = 0;  // orderOf(k, s, 0)
    std::array<Accept, kCodes> accept{};
    unsigned accepted = 0;  // bit c: accept[c].ok
    // ... or one collective. Its current flow:
    double start_us = 0, end_us = 0, load = 0;
    uint64_t order = 0;
    bool live = false;
  };
  std::vector<std::vector<Source>> sources(capacity.size());
  std::vector<SharedFlow> sends;
  std::vector<Loads> send_loads;
  const TaskGraph& graph = timeline.graph;
  const PipelineLayout layout = plan.pipelineLayout();
  // Per device, the codes its tasks use (bit c: code c), by task_graph.h's rule: every chunk runs
  // a forward and a backward of each micro-batch, which send over the chunk's links that cross
  // devices (found per chunk: a scan of the codes was 12 instructions a task).
  const int K = layout.stages();
  std::vector<uint32_t> used_codes(P, 0);
  for (size_t s = 0; s < P; ++s) {
    for (int c = 0; c < layout.chunks(); ++c) {
      const int k = layout.virtualStage(static_cast<int>(s), c);
      const bool forward = k + 1 < K && layout.device(k + 1) != static_cast<int>(s);
      const bool backward = k > 0 && layout.device(k - 1) != static_cast<int>(s);
      if (!forward && !backward) continue;
      if (static_cast<size_t>(sendCode(Send::kGradient, c)) >= kCodes) return Alone::kUnknown;
      if (forward) used_codes[s] |= 1u << sendCode(Send::kActivation, c);
      if (backward) used_codes[s] |= 1u << sendCode(Send::kGradient, c);
    }
  }
  for (size_t k = 0; k < timeline.pipelines.size(); ++k) {
    flow_walk::sendFlows(plan, sim.input.pipelines[k], static_cast<int>(k), map, sends);
    send_loads.assign(sends.size(), Loads{});
    for (size_t s = 0; s < P; ++s) {
      const std::vector<TaskTiming>& tasks = timeline.pipelines[k].stages[s].tasks;
      const uint8_t* const code = graph.deviceSendCodes(static_cast<int>(s)).data();
      for (size_t c = 1; c < kCodes; ++c) {
        if (((used_codes[s] >> c) & 1u) == 0) continue;
        // The code's link and direction (used_codes holds only codes that send).
        const int slot = flow_walk::sendSlot(layout, static_cast<int>(s), static_cast<int>(c));
        EVSIM_CHECK(slot >= 0, "send code {} of device stage {} has no link", c, s);
        const size_t w = static_cast<size_t>(slot);
        if (sends[w].uses.empty()) continue;  // a link inside one device
        Loads& loads = send_loads[w];
        if (!loads.known) loadsOf(sends[w], loads);
        for (int u = 0; u < loads.count; ++u) {
          const auto& [r, load] = loads.at[static_cast<size_t>(u)];
          std::vector<Source>& list = sources[r];
          if (list.empty() || list.back().tasks != tasks.data() || list.back().code == nullptr) {
            Source src;
            src.tasks = tasks.data();
            src.code = code;
            src.size = tasks.size();
            src.device = orderOf(k, s, 0);
            list.push_back(src);
          }
          list.back().accept[c] = {true, sends[w].duration_us, load};
          list.back().accepted |= 1u << c;
        }
      }
    }
  }
  // The DP collectives and ZeRO gathers, after each device's tasks in the walk.
  size_t collective = 0;
  int last_device = -1;
  flow_walk::walkTimelineFlows(
      plan, sim.costs, {}, sim.input, timeline, map, nullptr,
      [&](const SharedFlow& f, double start_us, int, const TimelineFlows::Origin& o, int, int*) {
        const size_t k = static_cast<size_t>(o.pipeline), s = static_cast<size_t>(o.stage);
        const int device = static_cast<int>(k * P + s);
        if (device != last_device) collective = 0;
        last_device = device;
        const size_t at = timeline.pipelines[k].stages[s].tasks.size() + collective++;
        Loads loads;
        loadsOf(f, loads);
        for (int u = 0; u < loads.count; ++u) {
          const auto& [r, load] = loads.at[static_cast<size_t>(u)];
          Source src;
          src.start_us = start_us;
          src.end_us = start_us + f.duration_us;
          src.load = load;
          src.order = orderOf(k, s, at);
          src.live = true;
          sources[r].push_back(src);
        }
        return -1;
      },
      /*with_tasks=*/false);
  if (repeated_resource) return Alone::kUnknown;

  // A device's next send over one of `src`'s links: its current flow; false when out of time
  // order (not this path's case).
  auto advance = [](Source& src) {
    const double before = src.live ? src.start_us : -std::numeric_limits<double>::infinity();
    // The scan in locals, codes tested against a bit mask (a device's tasks are scanned once per
    // resource its sends feed: issue 34 item 3).
    const uint8_t* const code = src.code;
    const unsigned accepted = src.accepted;
    size_t next = src.next;
    while (next < src.size && ((accepted >> code[next]) & 1u) == 0) ++next;
    src.live = next < src.size;
    if (!src.live) {
      src.next = next;
      return true;
    }
    const Accept& a = src.accept[code[next]];
    src.start_us = src.tasks[next].run.end_us;
    src.end_us = src.start_us + a.duration_us;
    src.load = a.load;
    src.order = src.device | static_cast<uint64_t>(next);
    src.next = next + 1;
    return src.start_us >= before;
  };
  out.used.assign(capacity.size(), 0);
  out.bytes.assign(capacity.size(), 0.0);
  for (size_t r = 0; r < sources.size(); ++r) {
    std::vector<Source>& list = sources[r];
    if (list.empty()) continue;
    double busy_until = -std::numeric_limits<double>::infinity();
    LoadSegment kept{};
    bool have = false;
    double bytes = 0;
    // aloneLoads' sweep of one flow in start order, and linkUsage's sum over what it keeps; false
    // where the flow meets an earlier one.
    auto sweep = [&](double start_us, double end_us, double load) {
      if (start_us < busy_until) return false;
      busy_until = std::max(busy_until, end_us);
      if (end_us <= start_us) return true;
      if (have && kept.end_us == start_us && kept.bytes_per_us == load) {
        kept.end_us = end_us;
        return true;
      }
      if (have) bytes += kept.bytes_per_us * (kept.end_us - kept.start_us);
      kept = {start_us, end_us, load};
      have = true;
      return true;
    };
    if (list.size() == 1 && list[0].code != nullptr) {
      // One device's sends (its NVLink or NIC out, mostly): already in start order.
      const Source& src = list[0];
      double before = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < src.size; ++i) {
        const Accept& a = src.accept[src.code[i]];
        if (!a.ok) continue;
        const double start_us = src.tasks[i].run.end_us;
        if (start_us < before) return Alone::kUnknown;
        before = start_us;
        if (!sweep(start_us, start_us + a.duration_us, a.load)) return Alone::kMeet;
      }
    } else if (list.size() == 2 && list[0].code != nullptr && list[1].code != nullptr) {
      // Two devices' sends (a device's NVLink or NIC in, from both neighbours, mostly): merged
      // two-pointer, as the general merge below would take them.
      Source& a = list[0];
      Source& b = list[1];
      if (!advance(a) || !advance(b)) return Alone::kUnknown;
      while (a.live || b.live) {
        const bool first = !b.live || (a.live && (a.start_us < b.start_us ||
                                                  (a.start_us == b.start_us && a.order < b.order)));
        Source& c = first ? a : b;
        const double start_us = c.start_us, end_us = c.end_us, load = c.load;
        if (!advance(c)) return Alone::kUnknown;
        if (!sweep(start_us, end_us, load)) return Alone::kMeet;
      }
    } else {
      for (Source& src : list) {
        if (src.code != nullptr && !advance(src)) return Alone::kUnknown;
      }
      for (;;) {
        // The earliest current flow of the resource's sources (ties: the earlier in the walk).
        Source* c = nullptr;
        for (Source& x : list) {
          if (!x.live) continue;
          if (c == nullptr || x.start_us < c->start_us ||
              (x.start_us == c->start_us && x.order < c->order)) {
            c = &x;
          }
        }
        if (c == nullptr) break;
        const double start_us = c->start_us, end_us = c->end_us, load = c->load;
        if (c->code == nullptr) {
          c->live = false;
        } else if (!advance(*c)) {
          return Alone::kUnknown;
        }
        if (!sweep(start_us, end_us, load)) return Alone::kMeet;
      }
    }
    if (have) bytes += kept.bytes_per_us * (kept.end_us - kept.start_us);
    out.used[r] = have;
    out.bytes[r] = bytes;
  }
  return Alone::kYes;
}

}  // namespace

LinkUsage linkUsage(const Simulation& sim, LinkDetail detail) {
  const IterationPlan& plan = sim.plan;
  const LinkMap map = linkMap(plan);
  std::vector<double> capacity = map.capacities();
  SharingResult shared;
  Alone alone = Alone::kUnknown;
  if (plan.cluster.topology.link_sharing && detail == LinkDetail::kTotals) {
    std::vector<double> raised = capacity;
    AloneTotals totals;
    alone = aloneTotals(sim, map, raised, totals);
    if (alone == Alone::kYes) {
      LinkUsage out;
      out.iteration_us = sim.timeline.iteration_us;
      for (size_t r = 0; r < raised.size(); ++r) {
        if (!totals.used[r]) continue;
        LinkLoad link;
        link.name = linkName(plan.cluster.topology, map.resources[r]);
        link.capacity_bytes_per_us = raised[r];
        link.bytes = totals.bytes[r];
        out.links.push_back(std::move(link));
      }
      return out;
    }
  }
  if (plan.cluster.topology.link_sharing) {
    // Shared again when the timing shared them (the flows carry their standalone times), unless
    // no two ever meet (aloneLoads).
    std::vector<double> raised = capacity;
    if (alone != Alone::kMeet &&
        transferLoads(plan, sim.costs, sim.offsets, sim.input, sim.timeline, map, raised,
                      shared.load) &&
        aloneLoads(shared.load)) {
      capacity = std::move(raised);
    } else {
      const TimelineFlows flows =
          timelineFlows(plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
      shared = shareLinks(flows.list, capacity, /*record_load=*/true);
      capacity = shared.capacity_bytes_per_us;
      shared.end_us = FlowEnds{};  // it reads `flows`, which ends here: only the loads are used
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

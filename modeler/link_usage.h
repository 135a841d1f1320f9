#pragma once
// Where the time went on the links (issue 28, item 6): each link resource's load over the
// iteration (modeler/link_flows.h: a GPU's NVLink ports, a node's NICs, a node's share of an
// oversubscribed tier's uplinks, each direction its own resource), from the simulated timeline's
// transfers shared as the timing shared them. Written as CSV (`simulate --link-csv FILE`), as
// Chrome-trace counter tracks (trace_writer.h), and summarised as the busiest links.
//
// Counted: every flow of the timing (link_flows.h): pipeline sends, DP gradient collectives and
// buckets, ZeRO 1/2 parameter gathers, and the TP, CP, EP and ZeRO-3 collectives inside tasks
// whose group spans nodes.
//
// CSV, one row per stretch of constant load of each resource that carried traffic:
//   resource,capacity_gb_s,start_us,end_us,bytes,utilization
// (utilization = load / capacity in that stretch; bytes = what crossed it then, all symmetric
// copies included).

#include <ostream>
#include <string>
#include <vector>

#include "modeler/network/link_sharing.h"
#include "modeler/simulation.h"

namespace evsim {

struct LinkLoad {
  std::string name;  // linkName()
  // The link's bandwidth, or more where one flow alone moved faster (link_sharing.h).
  double capacity_bytes_per_us = 0;
  double bytes = 0;  // over the iteration
  std::vector<LoadSegment> segments;
  // Mean utilisation over the iteration.
  double utilization(double iteration_us) const {
    return iteration_us > 0 ? bytes / (capacity_bytes_per_us * iteration_us) : 0;
  }
};

struct LinkUsage {
  double iteration_us = 0;
  std::vector<LinkLoad> links;  // those that carried traffic, in resource order
};

// What the report holds: each link's load over time (the CSV, the trace's counters), or only its
// capacity and bytes (the summary's busiest links; segments left empty). The totals are the same
// numbers bit for bit; where no two flows meet they come without listing any load segment.
enum class LinkDetail { kSegments, kTotals };

LinkUsage linkUsage(const Simulation& sim, LinkDetail detail = LinkDetail::kSegments);

// The `n` links with the most bytes for their capacity (highest mean utilisation) first.
std::vector<const LinkLoad*> busiestLinks(const LinkUsage& usage, size_t n);

void writeLinkCsv(const LinkUsage& usage, std::ostream& out);

}  // namespace evsim

#pragma once
// Writers of per-device timelines, streamed rank by rank (never the whole trace in memory):
//
// Chrome Trace Event JSON (Perfetto, chrome://tracing): {"traceEvents":[...]}, one process per
// rank (pid = global rank) named "rank 17 (node 2, gpu 1) tp1 pp0 dp3" and sorted by rank, one
// thread per stream (compute, tp-comm, pp-comm, dp-comm) plus pp-recv, complete "X" events with
// ts/dur in microseconds and args: micro_batch, chunk, phase, layer, event signature, provenance
// (+ bytes, group for communication). Every pipeline send whose receiver is written also has a
// receive slice on the receiver's pp-recv thread (same interval) and a flow ("s" -> "f") from the
// send to it, so Perfetto draws the pipeline's dependencies. A path ending in .gz is written
// gzip-compressed (Perfetto opens it).
//
// CSV: one row per device event:
//   rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance
//
// Per simulated timeline (TimelineGrouping::kPerTimeline, `simulate --ranks all`; issue 34, item
// 4): ranks that expand from the same simulated timeline (the TP and CP ranks of a stage, the DP
// replicas of a pipeline class) are written once, so the output's size depends on the pipeline
// classes and stages, not on D. The trace has one process per timeline, pid = its lowest rank,
// named "timeline T (pp S): N ranks" with the Perfetto process label "ranks 0-3,64-67,..." (every
// rank it stands for). The CSV starts with the rank map as comment lines, then a `timeline`
// column before the usual ones (rank, tp, pp, dp are those of the timeline's lowest rank):
//   # eventsim timeline CSV, one row set per simulated timeline; the ranks of each:
//   # timeline 0: ranks 0-3,64-67
//   timeline,rank,tp,pp,dp,stream,event,start_us,...
//
// Both the simulator (`eventsim simulate`) and the measured run (`eventrun`) write through the
// TimelineSource overloads, so one row formatter decides the format and the two files open side by
// side in Perfetto and compare row by row.

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "modeler/device_events.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"

namespace evsim {

using DeviceEventVisitor = std::function<void(const DeviceEvent&)>;

// A timeline to write: the plan its events index into, every rank's events in time order per
// stream, and where each event's duration came from ("measured", "derived", "estimated").
struct TimelineSource {
  const IterationPlan* plan = nullptr;
  std::function<void(int64_t rank, const DeviceEventVisitor& visit)> for_each_event;
  std::function<std::string_view(int event)> provenance;
  // The simulated timeline a rank expands from (equal for ranks whose events are the same);
  // empty for measured timelines, where every rank is its own.
  std::function<int64_t(int64_t rank)> timeline_of;
  // The simulation's link loads (link_usage.h), written as counter tracks ("ph":"C", one per link,
  // its utilisation) of one more process, "links", pid = the world size; nullptr: none.
  const struct LinkUsage* links = nullptr;
};

enum class TimelineGrouping { kPerRank, kPerTimeline };

// Ranks written as one: a simulated timeline and the selected ranks it stands for (ascending;
// the first is the one written).
struct RankGroup {
  int64_t timeline = 0;
  std::vector<int64_t> ranks;
};
// Per rank: each rank its own group, in the order given. Per timeline: one group per timeline,
// ordered by lowest rank (every rank its own when the source has no timeline_of).
std::vector<RankGroup> groupRanks(const TimelineSource& source, const std::vector<int64_t>& ranks,
                                  TimelineGrouping grouping);

// The simulation's timeline (forEachDeviceEvent, provenance from the cost model). `sim` must
// outlive the returned source.
TimelineSource simulationTimeline(const Simulation& sim);

void writeChromeTrace(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out, TimelineGrouping grouping = TimelineGrouping::kPerRank);
void writeTimelineCsv(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out, TimelineGrouping grouping = TimelineGrouping::kPerRank);

// Writes the Chrome trace to `trace_path` and the CSV to `csv_path`, each atomically (temp file,
// then rename) and only when its path is not empty.
void writeTimelineFiles(const TimelineSource& source, const std::vector<int64_t>& ranks,
                        const std::string& trace_path, const std::string& csv_path,
                        TimelineGrouping grouping = TimelineGrouping::kPerRank);

void writeChromeTrace(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out);
void writeTimelineCsv(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out);

// The ranks of the first pipeline: every stage of DP replica 0 (M x C x P ranks), ascending.
std::vector<int64_t> firstPipelineRanks(const IterationPlan& plan);

// All ranks of the strategy, or `selection` checked against the world size (InputError naming
// --ranks otherwise).
std::vector<int64_t> selectRanks(const Simulation& sim, const std::vector<int64_t>& selection);

// The rank a pipeline send of `rank` (at coordinates `c`) goes to: the next model chunk for an
// activation, the previous one for a gradient (virtual stage k = chunk * P + pp; chunk k runs on
// device stage k % P), and that chunk's index on the receiving device. None for other events.
struct SendTarget {
  int64_t rank = -1;
  int chunk = 0;
};
std::optional<SendTarget> sendTarget(const IterationPlan& plan, const RankLayout& layout,
                                     const RankCoord& c, const DeviceEvent& e);

// "embedding", "head" or the block index: the `layer` column of the CSV and trace.
std::string layerText(int layer);

}  // namespace evsim

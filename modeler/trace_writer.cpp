#include "modeler/trace_writer.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "common/atomic_file.h"
#include "common/cancel.h"
#include "common/error.h"
#include "common/gzip_stream.h"
#include "modeler/device_events.h"
#include "modeler/link_usage.h"
#include "modeler/timeline_csv.h"
#include "modeler/trace_text.h"
#include "modeler/variability.h"
#include "plan/task_graph.h"

namespace evsim {

namespace {

// A rank's coordinates as its trace row names them: "tp1 cp1 pp0 dp3 ep1", cp and ep only where
// the strategy has them (a CP peer is told apart from its TP peers by them).
std::string coordText(const Strategy& s, const RankCoord& c) {
  std::string out = fmt::format("tp{}", c.tp);
  if (s.cp > 1) out += fmt::format(" cp{}", c.cp);
  out += fmt::format(" pp{} dp{}", c.pp, c.dp);
  if (s.ep > 1) out += fmt::format(" ep{}", c.dp % s.ep);
  return out;
}

// The thread of the receive side of pipeline transfers: a rank's own sends and its receives
// overlap in time, so they get a row each. Thread ids stay those of the four original streams
// and this one (4) whatever streams are added after them: CP, EP and the host link come next,
// named only when the strategy has them.
constexpr int kRecvThread = 4;
int threadOf(Stream stream) {
  const int s = static_cast<int>(stream);
  return s < kRecvThread ? s : s + 1;
}
bool streamUsed(const Strategy& strategy, Stream stream) {
  if (stream == Stream::kCpComm) return strategy.cp > 1;
  if (stream == Stream::kEpComm) return strategy.ep > 1;
  if (stream == Stream::kHost) return strategy.offload != Offload::kNone;
  return true;
}

std::string_view layerText(int layer, fmt::memory_buffer& scratch) {
  scratch.clear();
  if (layer == kEmbeddingLayer) return "embedding";
  if (layer == kHeadLayer) return "head";
  const fmt::format_int digits(layer);
  scratch.append(digits.data(), digits.data() + digits.size());
  return std::string_view(scratch.data(), scratch.size());
}

// Per unique event, the text every slice of it repeats, formatted once on first use: its
// category, and the end of its args (`","event":"<signature>","provenance":"<p>"` and, for
// communication, bytes, group and nodes), which the receive slice of a send shares.
class EventText {
 public:
  explicit EventText(const TimelineSource& source)
      : source_(source), tails_(source.plan->events.size()) {}

  std::string_view category(int event) const {
    return eventKindName(source_.plan->events[event].event.kind);
  }
  const std::string& tail(int event) {
    std::optional<std::string>& tail = tails_[event];
    if (!tail) {
      const UniqueEvent& u = source_.plan->events[event];
      fmt::memory_buffer buf;
      auto emit = std::back_inserter(buf);
      fmt::format_to(emit, FMT_COMPILE("\",\"event\":\"{}\",\"provenance\":\"{}\""), u.signature,
                     source_.provenance(event));
      if (isCommunication(u.event.kind)) {
        fmt::format_to(emit, FMT_COMPILE(",\"bytes\":{},\"group\":{},\"nodes\":{}"),
                       u.event.message_bytes, u.event.placement.group_size,
                       u.event.placement.nodes);
      }
      tail.emplace(buf.data(), buf.size());
    }
    return *tail;
  }

  fmt::memory_buffer layer_scratch;

 private:
  const TimelineSource& source_;
  std::vector<std::optional<std::string>> tails_;
};

}  // namespace

std::optional<SendTarget> sendTarget(const IterationPlan& plan, const RankLayout& layout,
                                     const RankCoord& c, const DeviceEvent& e) {
  if (e.stream != Stream::kPpComm) return std::nullopt;
  const bool activation = e.name == "send_activation";
  if (!activation && e.name != "send_gradient") return std::nullopt;
  // The sender's link (task_graph.h): an activation leaves virtual stage k over link k, a
  // gradient over link k-1; measured timelines carry no graph, so it is found from the chunk.
  const PipelineLayout pipeline = plan.pipelineLayout();
  const int k = pipeline.virtualStage(c.pp, e.chunk);
  const int link = activation ? k : k - 1;
  if (link < 0 || link + 1 >= plan.virtualStages()) return std::nullopt;
  const int target = linkReceiver(activation ? Send::kActivation : Send::kGradient, link);
  return SendTarget{layout.rank(c.tp, c.dp, pipeline.device(target), c.cp), pipeline.chunk(target)};
}

std::vector<int64_t> selectRanks(const Simulation& sim, const std::vector<int64_t>& selection) {
  const int64_t world = sim.plan.strategy.gpus();
  if (selection.empty()) {
    std::vector<int64_t> all(world);
    for (int64_t r = 0; r < world; ++r) all[r] = r;
    return all;
  }
  for (int64_t r : selection) {
    if (r < 0 || r >= world)
      EVSIM_THROW(InputError, "--ranks: rank {} is outside the {} ranks of {}", r, world,
                  sim.plan.strategy.name());
  }
  return selection;
}

TimelineSource simulationTimeline(const Simulation& sim) {
  TimelineSource source;
  source.plan = &sim.plan;
  source.for_each_event = [&sim](int64_t rank, const DeviceEventVisitor& visit) {
    forEachDeviceEvent(sim, rank, visit);
  };
  source.provenance = [&sim](int event) { return provenanceName(sim.costs[event].provenance); };
  // forEachDeviceEvent's own key: the pipeline class of the rank's DP replica, and its stage.
  source.timeline_of = [&sim](int64_t rank) {
    const RankCoord c = sim.plan.layout().coord(rank);
    return static_cast<int64_t>(sim.plan.pipelineOf(c.dp)) * sim.plan.strategy.pp + c.pp;
  };
  return source;
}

std::vector<RankGroup> groupRanks(const TimelineSource& source, const std::vector<int64_t>& ranks,
                                  TimelineGrouping grouping) {
  std::vector<RankGroup> groups;
  if (grouping == TimelineGrouping::kPerRank || !source.timeline_of) {
    groups.reserve(ranks.size());
    for (int64_t rank : ranks) groups.push_back(RankGroup{rank, {rank}});
    return groups;
  }
  std::vector<int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::unordered_map<int64_t, size_t> index;  // timeline -> its group
  for (int64_t rank : sorted) {
    const int64_t timeline = source.timeline_of(rank);
    auto [it, added] = index.try_emplace(timeline, groups.size());
    if (added) groups.push_back(RankGroup{timeline, {}});
    groups[it->second].ranks.push_back(rank);
  }
  return groups;
}

std::string layerText(int layer) {
  fmt::memory_buffer scratch;
  return std::string(layerText(layer, scratch));
}

std::vector<int64_t> firstPipelineRanks(const IterationPlan& plan) {
  const RankLayout layout = plan.layout();
  std::vector<int64_t> out;
  for (int pp = 0; pp < plan.strategy.pp; ++pp) {
    for (int cp = 0; cp < plan.strategy.cp; ++cp) {
      for (int tp = 0; tp < plan.strategy.tp; ++tp) out.push_back(layout.rank(tp, 0, pp, cp));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// One counter track per link under a "links" process: its utilisation at each change, back to 0
// where it falls idle.
void writeLinkCounters(const LinkUsage& usage, int64_t pid, TraceText& text, bool first) {
  if (!first) text << ",\n";
  text << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << pid
       << ",\"args\":{\"name\":\"links (utilization)\"}},\n{\"ph\":\"M\",\"name\":"
          "\"process_sort_index\",\"pid\":"
       << pid << ",\"args\":{\"sort_index\":" << pid << "}}";
  auto counter = [&](const LinkLoad& link, double ts, double utilization) {
    text << ",\n{\"ph\":\"C\",\"name\":\"" << link.name << "\",\"pid\":" << pid << ",\"ts\":";
    text.fixed3(ts) << ",\"args\":{\"utilization\":";
    text.fixed3(utilization) << "}}";
  };
  for (const LinkLoad& link : usage.links) {
    for (size_t i = 0; i < link.segments.size(); ++i) {
      const LoadSegment& s = link.segments[i];
      counter(link, s.start_us, s.bytes_per_us / link.capacity_bytes_per_us);
      const bool gap = i + 1 == link.segments.size() || link.segments[i + 1].start_us > s.end_us;
      if (gap) counter(link, s.end_us, 0);
    }
    text.flush();
  }
}

}  // namespace

void writeChromeTrace(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out, TimelineGrouping grouping) {
  const IterationPlan& plan = *source.plan;
  const RankLayout layout = plan.layout();
  const std::vector<RankGroup> groups = groupRanks(source, ranks, grouping);
  const bool per_timeline = grouping == TimelineGrouping::kPerTimeline && source.timeline_of;
  // The process a rank's slices go to: its own, or its timeline's (the group's first rank).
  std::unordered_map<int64_t, int64_t> pid_of_key;
  for (const RankGroup& g : groups)
    pid_of_key.emplace(per_timeline ? g.timeline : g.ranks[0], g.ranks[0]);
  auto written_pid = [&](int64_t rank) -> std::optional<int64_t> {
    auto it = pid_of_key.find(per_timeline ? source.timeline_of(rank) : rank);
    if (it == pid_of_key.end()) return std::nullopt;
    return it->second;
  };
  EventText event_text(source);
  int64_t flow_id = 0;
  TraceText text(out);
  text << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&] {
    if (!first) text << ",\n";
    first = false;
  };
  for (const RankGroup& group : groups) {
    throwIfCancelled();
    const int64_t rank = group.ranks[0];
    const RankCoord c = layout.coord(rank);
    separator();
    if (group.ranks.size() == 1) {
      text << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank
           << ",\"args\":{\"name\":\"rank " << rank << " (node " << layout.node(rank) << ", gpu "
           << layout.gpuInNode(rank) << ") " << coordText(plan.strategy, c) << "\"}}";
    } else {
      // One simulated timeline for many ranks: the label lists every one (Perfetto shows it
      // beside the name and finds a rank by it).
      text << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank
           << ",\"args\":{\"name\":\"timeline " << group.timeline << " (pp" << c.pp
           << "): " << static_cast<int64_t>(group.ranks.size())
           << " ranks\"}},\n{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":" << rank
           << ",\"args\":{\"labels\":\"ranks " << rankRanges(group.ranks) << "\"}}";
    }
    text << ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << rank
         << ",\"args\":{\"sort_index\":" << rank << "}}";
    auto thread_name = [&](int tid, std::string_view name) {
      text << ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << rank << ",\"tid\":" << tid
           << ",\"args\":{\"name\":\"" << name << "\"}}";
    };
    for (int s = 0; s < kStreamCount; ++s) {
      const auto stream = static_cast<Stream>(s);
      if (threadOf(stream) > kRecvThread) break;
      thread_name(threadOf(stream), streamName(stream));
    }
    thread_name(kRecvThread, "pp-recv");
    for (int s = 0; s < kStreamCount; ++s) {
      const auto stream = static_cast<Stream>(s);
      if (threadOf(stream) < kRecvThread || !streamUsed(plan.strategy, stream)) continue;
      thread_name(threadOf(stream), streamName(stream));
    }
    source.for_each_event(rank, [&](const DeviceEvent& e) {
      const std::string_view layer = layerText(e.layer, event_text.layer_scratch);
      const std::string& tail = event_text.tail(e.event);
      separator();
      text << "{\"ph\":\"X\",\"name\":\"" << e.name << "\",\"cat\":\""
           << event_text.category(e.event) << "\",\"pid\":" << rank
           << ",\"tid\":" << threadOf(e.stream) << ",\"ts\":";
      text.fixed3(e.start_us) << ",\"dur\":";
      text.fixed3(e.duration_us) << ",\"args\":{\"micro_batch\":" << e.micro_batch
                                 << ",\"chunk\":" << e.chunk << ",\"phase\":\""
                                 << phaseName(e.phase) << "\",\"layer\":\"" << layer << tail
                                 << "}}";
      // A pipeline send: its receive slice on the receiver (same interval: the simulated transfer
      // occupies both ends) and a flow arrow from one to the other, when the receiver is written.
      const std::optional<SendTarget> target = sendTarget(plan, layout, c, e);
      const std::optional<int64_t> target_pid =
          target ? written_pid(target->rank) : std::optional<int64_t>();
      if (target_pid) {
        const bool activation = e.name == "send_activation";
        const int64_t id = flow_id++;
        text << ",\n{\"ph\":\"X\",\"name\":\"" << (activation ? "recv_activation" : "recv_gradient")
             << "\",\"cat\":\"p2p\",\"pid\":" << *target_pid << ",\"tid\":" << kRecvThread
             << ",\"ts\":";
        text.fixed3(e.start_us) << ",\"dur\":";
        text.fixed3(e.duration_us)
            << ",\"args\":{\"micro_batch\":" << e.micro_batch << ",\"chunk\":" << target->chunk
            << ",\"phase\":\"" << phaseName(e.phase) << "\",\"layer\":\"" << layer << tail
            << ",\"from_rank\":" << rank << "}}";
        // Flow ends bind to the slice enclosing their timestamp: the start of the send, the
        // middle of the receive.
        text << ",\n{\"ph\":\"s\",\"name\":\"p2p\",\"cat\":\"p2p\",\"id\":" << id
             << ",\"pid\":" << rank << ",\"tid\":" << threadOf(e.stream) << ",\"ts\":";
        text.fixed3(e.start_us) << "},\n{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"p2p\",\"cat\":"
                                   "\"p2p\",\"id\":"
                                << id << ",\"pid\":" << *target_pid << ",\"tid\":" << kRecvThread
                                << ",\"ts\":";
        text.fixed3(e.start_us + e.duration_us / 2) << '}';
      }
      text.flush();
    });
  }
  if (source.links != nullptr) writeLinkCounters(*source.links, plan.strategy.gpus(), text, first);
  text << "\n]}\n";
  text.flush(/*force=*/true);
}

void writeTimelineFiles(const TimelineSource& source, const std::vector<int64_t>& ranks,
                        const std::string& trace_path, const std::string& csv_path,
                        TimelineGrouping grouping) {
  // All or none: both files are opened, written and flushed before either is published, so a
  // failing one (an unwritable path, a full disk) leaves neither behind.
  std::optional<AtomicFileWriter> trace, csv;
  if (!trace_path.empty()) trace.emplace(trace_path);
  if (!csv_path.empty()) csv.emplace(csv_path);
  if (trace && isGzipPath(trace_path)) {
    try {
      GzipOstream gz(trace->stream());
      writeChromeTrace(source, ranks, gz, grouping);
      gz.finish();
    } catch (const EnvironmentError& e) {
      // "gzip: writing the compressed output failed" named no file (a full disk, issue 33).
      EVSIM_THROW(EnvironmentError, "{}: {} (disk full?)", trace_path, e.what());
    }
  } else if (trace) {
    writeChromeTrace(source, ranks, trace->stream(), grouping);
  }
  if (csv) writeTimelineCsv(source, ranks, csv->stream(), grouping);
  if (trace) trace->finish();
  if (csv) csv->finish();
  std::vector<AtomicFileWriter*> outputs;
  if (trace) outputs.push_back(&*trace);
  if (csv) outputs.push_back(&*csv);
  publishTogether(outputs);
}

void writeTimelineCsv(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out, TimelineGrouping grouping) {
  const IterationPlan& plan = *source.plan;
  const RankLayout layout = plan.layout();
  fmt::memory_buffer layer_scratch;
  TraceText text(out);
  const bool per_timeline = grouping == TimelineGrouping::kPerTimeline;
  const std::vector<RankGroup> groups = groupRanks(source, ranks, grouping);
  if (per_timeline) {
    text << kTimelineMapComment << '\n';
    for (const RankGroup& g : groups) {
      text << "# timeline " << g.timeline << ": ranks " << rankRanges(g.ranks) << '\n';
      text.flush();
    }
    text << "timeline,";
  }
  text << kTimelineCsvHeader << '\n';
  for (const RankGroup& group : groups) {
    throwIfCancelled();
    const int64_t rank = group.ranks[0];
    const RankCoord c = layout.coord(rank);
    const int ep = c.dp % plan.strategy.ep;
    source.for_each_event(rank, [&](const DeviceEvent& e) {
      // Signatures hold no commas or quotes, so fields need no quoting.
      if (per_timeline) text << group.timeline << ',';
      text << rank << ',' << c.tp << ',' << c.pp << ',' << c.dp << ',' << streamName(e.stream)
           << ',' << plan.events[e.event].signature << ',';
      text.fixed3(e.start_us) << ',';
      text.fixed3(e.duration_us) << ',' << e.micro_batch << ',' << phaseName(e.phase) << ','
                                 << e.name << ',' << layerText(e.layer, layer_scratch) << ','
                                 << source.provenance(e.event) << ',' << c.cp << ',' << ep << '\n';
      text.flush();
    });
  }
  text.flush(/*force=*/true);
}

void writeChromeTrace(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out) {
  writeChromeTrace(simulationTimeline(sim), ranks, out);
}

void writeTimelineCsv(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out) {
  writeTimelineCsv(simulationTimeline(sim), ranks, out);
}

}  // namespace evsim

#include "modeler/trace_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/gzip_stream.h"
#include "modeler/device_events.h"

namespace evsim {

namespace {

// Flushes the buffer to the stream once it holds this much, so memory stays flat.
constexpr size_t kFlushBytes = 1 << 20;

void flushIfFull(fmt::memory_buffer& buffer, std::ostream& out, bool force = false) {
  if (buffer.size() >= kFlushBytes || force) {
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    buffer.clear();
  }
}

// The thread of the receive side of pipeline transfers: a rank's own sends and its receives
// overlap in time, so they get a row each. Thread ids stay those of the four original streams
// and this one (4) whatever streams are added after them: CP and EP come next, named only when
// the strategy has them.
constexpr int kRecvThread = 4;
int threadOf(Stream stream) {
  const int s = static_cast<int>(stream);
  return s < kRecvThread ? s : s + 1;
}
bool streamUsed(const Strategy& strategy, Stream stream) {
  if (stream == Stream::kCpComm) return strategy.cp > 1;
  if (stream == Stream::kEpComm) return strategy.ep > 1;
  return true;
}

// The rank a pipeline send of `rank` goes to: the next model chunk for an activation, the previous
// one for a gradient (virtual stage k = chunk * P + pp; chunk k runs on device stage k % P), and
// that chunk's index on the receiving device.
struct SendTarget {
  int64_t rank = -1;
  int chunk = 0;
};
std::optional<SendTarget> sendTarget(const IterationPlan& plan, const RankLayout& layout,
                                     const RankCoord& c, const DeviceEvent& e) {
  if (e.stream != Stream::kPpComm) return std::nullopt;
  const bool activation = e.name == "send_activation";
  if (!activation && e.name != "send_gradient") return std::nullopt;
  const int P = plan.deviceStages();
  const int k = e.chunk * P + c.pp;
  const int target = activation ? k + 1 : k - 1;
  if (target < 0 || target >= plan.virtualStages()) return std::nullopt;
  return SendTarget{layout.rank(c.tp, c.dp, target % P, c.cp), target / P};
}

std::string_view layerText(int layer, fmt::memory_buffer& scratch) {
  scratch.clear();
  if (layer == kEmbeddingLayer) return "embedding";
  if (layer == kHeadLayer) return "head";
  fmt::format_to(std::back_inserter(scratch), "{}", layer);
  return std::string_view(scratch.data(), scratch.size());
}

}  // namespace

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
  return source;
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

void writeChromeTrace(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out) {
  const IterationPlan& plan = *source.plan;
  const RankLayout layout = plan.layout();
  std::vector<int64_t> sorted_ranks = ranks;
  std::sort(sorted_ranks.begin(), sorted_ranks.end());
  auto selected = [&](int64_t rank) {
    return std::binary_search(sorted_ranks.begin(), sorted_ranks.end(), rank);
  };
  int64_t flow_id = 0;
  fmt::memory_buffer buf, layer_scratch;
  auto emit = std::back_inserter(buf);
  fmt::format_to(emit, "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  bool first = true;
  auto separator = [&] {
    if (!first) fmt::format_to(emit, ",\n");
    first = false;
  };
  for (int64_t rank : ranks) {
    const RankCoord c = layout.coord(rank);
    separator();
    fmt::format_to(emit,
                   "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"args\":{{\"name\":"
                   "\"rank {0} (node {1}, gpu {2}) tp{3} pp{4} dp{5}\"}}}},\n"
                   "{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{0},\"args\":{{"
                   "\"sort_index\":{0}}}}}",
                   rank, layout.node(rank), layout.gpuInNode(rank), c.tp, c.pp, c.dp);
    auto thread_name = [&](int tid, std::string_view name) {
      fmt::format_to(emit,
                     ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                     "\"args\":{{\"name\":\"{}\"}}}}",
                     rank, tid, name);
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
      const UniqueEvent& u = plan.events[e.event];
      separator();
      fmt::format_to(emit,
                     "{{\"ph\":\"X\",\"name\":\"{}\",\"cat\":\"{}\",\"pid\":{},\"tid\":{},"
                     "\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"micro_batch\":{},\"chunk\":{},"
                     "\"phase\":\"{}\",\"layer\":\"{}\",\"event\":\"{}\",\"provenance\":"
                     "\"{}\"",
                     e.name, eventKindName(u.event.kind), rank, threadOf(e.stream),
                     e.start_us, e.duration_us, e.micro_batch, e.chunk, phaseName(e.phase),
                     layerText(e.layer, layer_scratch), u.signature, source.provenance(e.event));
      if (isCommunication(u.event.kind)) {
        fmt::format_to(emit, ",\"bytes\":{},\"group\":{},\"nodes\":{}", u.event.message_bytes,
                       u.event.placement.group_size, u.event.placement.nodes);
      }
      fmt::format_to(emit, "}}}}");
      // A pipeline send: its receive slice on the receiver (same interval: the simulated transfer
      // occupies both ends) and a flow arrow from one to the other, when the receiver is written.
      const std::optional<SendTarget> target = sendTarget(plan, layout, c, e);
      if (target && selected(target->rank)) {
        const bool activation = e.name == "send_activation";
        const int64_t id = flow_id++;
        fmt::format_to(emit,
                       ",\n{{\"ph\":\"X\",\"name\":\"{}\",\"cat\":\"p2p\",\"pid\":{},\"tid\":{},"
                       "\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"micro_batch\":{},\"chunk\":{},"
                       "\"phase\":\"{}\",\"layer\":\"{}\",\"event\":\"{}\",\"provenance\":\"{}\","
                       "\"bytes\":{},\"group\":{},\"nodes\":{},\"from_rank\":{}}}}}",
                       activation ? "recv_activation" : "recv_gradient", target->rank, kRecvThread,
                       e.start_us, e.duration_us, e.micro_batch, target->chunk, phaseName(e.phase),
                       layerText(e.layer, layer_scratch), u.signature, source.provenance(e.event),
                       u.event.message_bytes, u.event.placement.group_size, u.event.placement.nodes,
                       rank);
        // Flow ends bind to the slice enclosing their timestamp: the start of the send, the
        // middle of the receive.
        fmt::format_to(emit,
                       ",\n{{\"ph\":\"s\",\"name\":\"p2p\",\"cat\":\"p2p\",\"id\":{},"
                       "\"pid\":{},\"tid\":{},\"ts\":{:.3f}}},\n{{\"ph\":\"f\",\"bp\":\"e\","
                       "\"name\":\"p2p\",\"cat\":\"p2p\",\"id\":{},\"pid\":{},\"tid\":{},"
                       "\"ts\":{:.3f}}}",
                       id, rank, threadOf(e.stream), e.start_us, id, target->rank,
                       kRecvThread, e.start_us + e.duration_us / 2);
      }
      flushIfFull(buf, out);
    });
  }
  fmt::format_to(emit, "\n]}}\n");
  flushIfFull(buf, out, /*force=*/true);
}

void writeTimelineFiles(const TimelineSource& source, const std::vector<int64_t>& ranks,
                        const std::string& trace_path, const std::string& csv_path) {
  // All or none: both files are opened, written and flushed before either is published, so a
  // failing one (an unwritable path, a full disk) leaves neither behind.
  std::optional<AtomicFileWriter> trace, csv;
  if (!trace_path.empty()) trace.emplace(trace_path);
  if (!csv_path.empty()) csv.emplace(csv_path);
  if (trace && isGzipPath(trace_path)) {
    GzipOstream gz(trace->stream());
    writeChromeTrace(source, ranks, gz);
    gz.finish();
  } else if (trace) {
    writeChromeTrace(source, ranks, trace->stream());
  }
  if (csv) writeTimelineCsv(source, ranks, csv->stream());
  if (trace) trace->finish();
  if (csv) csv->finish();
  if (trace) trace->publish();
  if (csv) csv->publish();
}

void writeTimelineCsv(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out) {
  const IterationPlan& plan = *source.plan;
  const RankLayout layout = plan.layout();
  fmt::memory_buffer buf, layer_scratch;
  auto emit = std::back_inserter(buf);
  fmt::format_to(
      emit, "rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance\n");
  for (int64_t rank : ranks) {
    const RankCoord c = layout.coord(rank);
    source.for_each_event(rank, [&](const DeviceEvent& e) {
      // Signatures hold no commas or quotes, so fields need no quoting.
      fmt::format_to(emit, "{},{},{},{},{},{},{:.3f},{:.3f},{},{},{},{},{}\n", rank, c.tp, c.pp,
                     c.dp, streamName(e.stream), plan.events[e.event].signature, e.start_us,
                     e.duration_us, e.micro_batch, phaseName(e.phase), e.name,
                     layerText(e.layer, layer_scratch), source.provenance(e.event));
      flushIfFull(buf, out);
    });
  }
  flushIfFull(buf, out, /*force=*/true);
}

void writeChromeTrace(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out) {
  writeChromeTrace(simulationTimeline(sim), ranks, out);
}

void writeTimelineCsv(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out) {
  writeTimelineCsv(simulationTimeline(sim), ranks, out);
}

}  // namespace evsim

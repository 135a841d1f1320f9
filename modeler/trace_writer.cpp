#include "modeler/trace_writer.h"

#include <fmt/format.h>

#include <optional>

#include "common/atomic_file.h"
#include "common/error.h"
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

void writeChromeTrace(const TimelineSource& source, const std::vector<int64_t>& ranks,
                      std::ostream& out) {
  const IterationPlan& plan = *source.plan;
  const RankLayout layout = plan.layout();
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
    for (int s = 0; s < kStreamCount; ++s) {
      fmt::format_to(emit,
                     ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                     "\"args\":{{\"name\":\"{}\"}}}}",
                     rank, s, streamName(static_cast<Stream>(s)));
    }
    source.for_each_event(rank, [&](const DeviceEvent& e) {
      const UniqueEvent& u = plan.events[e.event];
      separator();
      fmt::format_to(emit,
                     "{{\"ph\":\"X\",\"name\":\"{}\",\"cat\":\"{}\",\"pid\":{},\"tid\":{},"
                     "\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"micro_batch\":{},\"phase\":"
                     "\"{}\",\"layer\":\"{}\",\"event\":\"{}\",\"provenance\":\"{}\"",
                     e.name, eventKindName(u.event.kind), rank, static_cast<int>(e.stream),
                     e.start_us, e.duration_us, e.micro_batch, phaseName(e.phase),
                     layerText(e.layer, layer_scratch), u.signature, source.provenance(e.event));
      if (isCommunication(u.event.kind)) {
        fmt::format_to(emit, ",\"bytes\":{},\"group\":{},\"nodes\":{}", u.event.message_bytes,
                       u.event.placement.group_size, u.event.placement.nodes);
      }
      fmt::format_to(emit, "}}}}");
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
  if (trace) writeChromeTrace(source, ranks, trace->stream());
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

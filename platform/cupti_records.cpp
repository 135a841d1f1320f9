#include "platform/cupti_records.h"

#include <algorithm>
#include <unordered_map>

#include "common/error.h"

namespace evsim {

namespace {

bool countsAsKernel(const ActivityRecord& r, std::optional<uint32_t> stream_id) {
  if (r.kind != ActivityKind::kKernel) return false;
  if (stream_id && r.stream_id != *stream_id) return false;
  // CUPTI reports 0/0 when it could not take timestamps; such a record says nothing about time.
  if (r.start_ns == 0 && r.end_ns == 0) return false;
  return true;
}

void extend(RepetitionSpan& span, const ActivityRecord& r) {
  EVSIM_CHECK(r.end_ns >= r.start_ns,
              "kernel '{}' (correlation {}) ends at {} ns before its start {}", r.name,
              r.correlation_id, r.end_ns, r.start_ns);
  if (span.kernels == 0) {
    span.start_ns = r.start_ns;
    span.end_ns = r.end_ns;
  } else {
    span.start_ns = std::min(span.start_ns, r.start_ns);
    span.end_ns = std::max(span.end_ns, r.end_ns);
  }
  ++span.kernels;
}

void requireKernels(const std::vector<RepetitionSpan>& spans,
                    const std::function<std::string(size_t)>& describe) {
  for (size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].kernels == 0) {
      EVSIM_THROW(Error,
                  "CUPTI: repetition {} ({}) has no kernel record on the profiled stream (records "
                  "dropped, or the work launched no kernel)",
                  i, describe(i));
    }
  }
}

}  // namespace

std::vector<RepetitionSpan> spansByExternalId(const std::vector<ActivityRecord>& records,
                                              uint64_t first_external_id, int repetitions,
                                              std::optional<uint32_t> stream_id) {
  EVSIM_CHECK(repetitions > 0, "repetitions {}", repetitions);
  // correlation id -> external id, from records that may come after the kernels they describe.
  std::unordered_map<uint32_t, uint64_t> external_of;
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kExternalCorrelation) external_of[r.correlation_id] = r.external_id;
  }
  std::vector<RepetitionSpan> spans(repetitions);
  for (const ActivityRecord& r : records) {
    if (!countsAsKernel(r, stream_id)) continue;
    auto it = external_of.find(r.correlation_id);
    if (it == external_of.end() || it->second < first_external_id) continue;
    uint64_t rep = it->second - first_external_id;
    if (rep >= static_cast<uint64_t>(repetitions)) continue;
    extend(spans[rep], r);
  }
  requireKernels(spans,
                 [&](size_t i) { return fmt::format("external id {}", first_external_id + i); });
  return spans;
}

std::vector<RepetitionSpan> spansByCorrelationRanges(const std::vector<ActivityRecord>& records,
                                                     const std::vector<CorrelationRange>& ranges,
                                                     std::optional<uint32_t> stream_id) {
  EVSIM_CHECK(!ranges.empty(), "no correlation ranges");
  // Sorted copy of the ranges, remembering which repetition each belongs to, for a binary search.
  std::vector<std::pair<CorrelationRange, size_t>> sorted;
  for (size_t i = 0; i < ranges.size(); ++i) {
    EVSIM_CHECK(ranges[i].first <= ranges[i].last, "correlation range {}: [{}, {}]", i,
                ranges[i].first, ranges[i].last);
    sorted.push_back({ranges[i], i});
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first.first < b.first.first; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    EVSIM_CHECK(sorted[i].first.first > sorted[i - 1].first.last,
                "correlation ranges of repetitions {} and {} overlap", sorted[i - 1].second,
                sorted[i].second);
  }
  std::vector<RepetitionSpan> spans(ranges.size());
  for (const ActivityRecord& r : records) {
    if (!countsAsKernel(r, stream_id)) continue;
    auto it =
        std::upper_bound(sorted.begin(), sorted.end(), r.correlation_id,
                         [](uint32_t id, const auto& entry) { return id < entry.first.first; });
    if (it == sorted.begin()) continue;
    --it;
    if (r.correlation_id > it->first.last) continue;
    extend(spans[it->second], r);
  }
  requireKernels(spans, [&](size_t i) {
    return fmt::format("correlation ids {}..{}", ranges[i].first, ranges[i].last);
  });
  return spans;
}

std::vector<double> spanDurationsUs(const std::vector<RepetitionSpan>& spans) {
  std::vector<double> out;
  out.reserve(spans.size());
  for (const RepetitionSpan& s : spans) out.push_back(s.durationUs());
  return out;
}

std::vector<double> KernelSpanTimer::time(uint32_t stream_id, int warmup, int repeats,
                                          const std::function<void()>& run,
                                          const std::function<void()>& synchronize,
                                          const EnqueueGate& gate) {
  EVSIM_CHECK(warmup >= 0 && repeats > 0, "warmup {} repeats {}", warmup, repeats);
  for (int i = 0; i < warmup; ++i) run();
  synchronize();
  tracer_.drain();  // anything left from before: not this event's time
  // Disable again on every path out, so a failing event leaves no tracing overhead behind.
  struct Disable {
    ActivityTracer& tracer;
    ~Disable() { tracer.disable(); }
  };
  tracer_.enable();
  Disable disable_on_exit{tracer_};
  const uint64_t first = next_external_id_;
  next_external_id_ += static_cast<uint64_t>(repeats);
  if (gate.hold) gate.hold();  // its own kernel has no external id: in no repetition's span
  try {
    for (int i = 0; i < repeats; ++i) {
      tracer_.pushExternalId(first + static_cast<uint64_t>(i));
      run();
      tracer_.popExternalId();
    }
  } catch (...) {
    if (gate.release) gate.release();  // never leave the stream held
    throw;
  }
  if (gate.release) gate.release();
  synchronize();
  return spanDurationsUs(spansByExternalId(tracer_.drain(), first, repeats, stream_id));
}

}  // namespace evsim

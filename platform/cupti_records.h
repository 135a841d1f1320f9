#pragma once
// GPU-free half of CUPTI kernel timing: turns activity records into one span per repetition.
// No CUDA or CUPTI header here, so all of this is unit-tested with synthetic records on machines
// without a GPU (the model is kineto's CuptiActivityApi and its tests). The CUPTI side,
// platform/cuda/cupti_tracer.cpp, only converts CUpti_Activity* records into ActivityRecord.
//
// An event's time is the span of the kernels it launched: first kernel start to last kernel end,
// as the activity records report them. Memcpy, memset, API and other records never count, nor do
// kernels on other streams (e.g. NCCL on its own stream). CUPTI delivers records per buffer, not in
// time order, and the record that maps a correlation id to an external id may come after the
// kernel it describes, so everything here first indexes all records and then assigns them.
//
// Repetitions are delimited in one of two ways:
//  - external ids: the tracer pushes id base+i around repetition i's launches; CUPTI then emits an
//    EXTERNAL_CORRELATION record (correlation id -> external id) for each API call made inside;
//  - correlation-id ranges: repetition i owns the kernels whose correlation id is in [first, last].

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace evsim {

enum class ActivityKind {
  kKernel,
  kMemcpy,
  kMemset,
  kRuntimeApi,
  kDriverApi,
  kExternalCorrelation,
  kOther
};

struct ActivityRecord {
  ActivityKind kind = ActivityKind::kOther;
  uint64_t start_ns = 0;  // GPU timestamps for kernels; 0 and 0 when CUPTI had none
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;  // the launching API call's id (kernels, API and external records)
  uint32_t stream_id = 0;       // kernels, memcpy, memset
  uint64_t external_id = 0;     // kExternalCorrelation only
  std::string name;             // kernel name, for messages
};

struct CorrelationRange {
  uint32_t first = 0;  // inclusive
  uint32_t last = 0;   // inclusive
};

struct RepetitionSpan {
  uint64_t start_ns = 0;  // earliest kernel start
  uint64_t end_ns = 0;    // latest kernel end
  int kernels = 0;
  double durationUs() const { return double(end_ns - start_ns) / 1000.0; }
};

// Span of repetition i = kernels (on `stream_id`, when given) whose launching API call ran under
// external id `first_external_id + i`, for i in [0, repetitions). Throws Error naming the
// repetition when it has no kernel (records dropped, or the work never reached the stream).
std::vector<RepetitionSpan> spansByExternalId(const std::vector<ActivityRecord>& records,
                                              uint64_t first_external_id, int repetitions,
                                              std::optional<uint32_t> stream_id);

// Span of repetition i = kernels whose correlation id lies in ranges[i]. Ranges must not overlap.
std::vector<RepetitionSpan> spansByCorrelationRanges(const std::vector<ActivityRecord>& records,
                                                     const std::vector<CorrelationRange>& ranges,
                                                     std::optional<uint32_t> stream_id);

std::vector<double> spanDurationsUs(const std::vector<RepetitionSpan>& spans);

// The seam between timing logic and CUPTI: CuptiTracer implements it on a GPU, tests fake it.
class ActivityTracer {
 public:
  virtual ~ActivityTracer() = default;
  // Records are collected only between enable() and disable(): tracing every API call costs
  // host time, which must not leak into communication timings taken while compute is idle.
  virtual void enable() = 0;
  virtual void disable() = 0;
  // API calls made by this thread between push and pop are tagged with `external_id`.
  virtual void pushExternalId(uint64_t external_id) = 0;
  virtual void popExternalId() = 0;
  // Flushes the activity buffers and returns every record collected since the previous drain().
  // Call only after the traced work has finished (stream synchronized).
  virtual std::vector<ActivityRecord> drain() = 0;
};

// Times repetitions of a GPU workload by the kernel spans CUPTI reports. Call order per event:
// `warmup` untraced runs, synchronize, drain (discarding leftovers), enable, `repeats` runs each
// inside its own external id, synchronize, drain, disable. External ids increase across calls, so
// records of an earlier event that arrive late can never be mistaken for this one's.
// Optional around the timed repetitions: `hold` stops the stream before they are enqueued and
// `release` lets it go after, so they run back to back on the device however long the host takes to
// launch them (a span would otherwise include the host's gap between an event's own kernels).
struct EnqueueGate {
  std::function<void()> hold;
  std::function<void()> release;
};

class KernelSpanTimer {
 public:
  explicit KernelSpanTimer(ActivityTracer& tracer) : tracer_(tracer) {}

  // `run` enqueues one repetition on the stream whose CUPTI id is `stream_id`; `synchronize`
  // waits for the stream. Returns one duration (us) per repetition.
  std::vector<double> time(uint32_t stream_id, int warmup, int repeats,
                           const std::function<void()>& run,
                           const std::function<void()>& synchronize, const EnqueueGate& gate = {});

 private:
  ActivityTracer& tracer_;
  uint64_t next_external_id_ = 1;
};

}  // namespace evsim

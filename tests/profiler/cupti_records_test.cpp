// CUPTI record processing with synthetic activity records, and KernelSpanTimer driven by a fake
// tracer (kineto's CuptiActivityProfilerTest is the model): no GPU needed.
#include "platform/cupti_records.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/error.h"

namespace evsim {
namespace {

ActivityRecord kernel(uint32_t correlation, uint64_t start, uint64_t end, uint32_t stream = 7) {
  ActivityRecord r;
  r.kind = ActivityKind::kKernel;
  r.correlation_id = correlation;
  r.start_ns = start;
  r.end_ns = end;
  r.stream_id = stream;
  r.name = fmt::format("k{}", correlation);  // not "k" + to_string(): GCC 12 -Wrestrict false alarm
  return r;
}

ActivityRecord external(uint32_t correlation, uint64_t external_id) {
  ActivityRecord r;
  r.kind = ActivityKind::kExternalCorrelation;
  r.correlation_id = correlation;
  r.external_id = external_id;
  return r;
}

ActivityRecord memcpy_on(uint32_t correlation, uint64_t start, uint64_t end) {
  ActivityRecord r = kernel(correlation, start, end);
  r.kind = ActivityKind::kMemcpy;
  return r;
}

// Two repetitions (external ids 100, 101) on stream 7 plus noise that must not count.
std::vector<ActivityRecord> twoRepetitions() {
  return {
      kernel(1, 100, 150),               // rep 0
      kernel(2, 160, 200),               // rep 0
      memcpy_on(3, 90, 400),             // rep 0 memcpy: ignored though it is longer
      kernel(4, 50, 500, /*stream=*/9),  // rep 0 but another stream (e.g. NCCL): ignored
      kernel(5, 300, 380),               // rep 1
      kernel(6, 0, 0),                   // rep 1, no timestamps: ignored
      kernel(7, 10, 20),                 // launched outside any repetition: ignored
      external(1, 100),
      external(2, 100),
      external(3, 100),
      external(4, 100),
      external(5, 101),
      external(6, 101),
  };
}

TEST(CuptiRecords, SpansByExternalId) {
  std::vector<RepetitionSpan> spans = spansByExternalId(twoRepetitions(), 100, 2, 7u);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].start_ns, 100u);
  EXPECT_EQ(spans[0].end_ns, 200u);  // first kernel start to last kernel end, gap included
  EXPECT_EQ(spans[0].kernels, 2);
  EXPECT_DOUBLE_EQ(spans[0].durationUs(), 0.1);
  EXPECT_EQ(spans[1].kernels, 1);
  EXPECT_DOUBLE_EQ(spans[1].durationUs(), 0.08);
}

TEST(CuptiRecords, OrderOfRecordsDoesNotMatter) {
  std::vector<ActivityRecord> records = twoRepetitions();
  std::mt19937 rng(42);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(records.begin(), records.end(), rng);
    EXPECT_EQ(spanDurationsUs(spansByExternalId(records, 100, 2, 7u)),
              (std::vector<double>{0.1, 0.08}));
  }
}

TEST(CuptiRecords, AllStreamsWhenNoStreamGiven) {
  // Without a stream filter the stream-9 kernel (50..500) widens repetition 0.
  std::vector<RepetitionSpan> spans = spansByExternalId(twoRepetitions(), 100, 2, std::nullopt);
  EXPECT_EQ(spans[0].start_ns, 50u);
  EXPECT_EQ(spans[0].end_ns, 500u);
}

TEST(CuptiRecords, ConcurrentKernelsGiveTheirUnion) {
  std::vector<ActivityRecord> records = {kernel(1, 100, 200), kernel(2, 150, 180), external(1, 5),
                                         external(2, 5)};
  EXPECT_DOUBLE_EQ(spansByExternalId(records, 5, 1, 7u)[0].durationUs(), 0.1);
}

TEST(CuptiRecords, MissingRepetitionIsAnError) {
  // Repetition 2 (external id 102) has no kernel: dropped records must not pass silently.
  EXPECT_THROW(spansByExternalId(twoRepetitions(), 100, 3, 7u), Error);
}

TEST(CuptiRecords, SpansByCorrelationRanges) {
  std::vector<ActivityRecord> records = {kernel(12, 1000, 1500), kernel(15, 1600, 2000),
                                         kernel(21, 3000, 3250), kernel(35, 0, 99999),
                                         memcpy_on(13, 0, 5000)};
  std::vector<RepetitionSpan> spans = spansByCorrelationRanges(records, {{10, 19}, {20, 29}}, 7u);
  EXPECT_EQ(spanDurationsUs(spans), (std::vector<double>{1.0, 0.25}));
  // Ranges given out of order still map to their own repetition.
  spans = spansByCorrelationRanges(records, {{20, 29}, {10, 19}}, 7u);
  EXPECT_EQ(spanDurationsUs(spans), (std::vector<double>{0.25, 1.0}));
}

TEST(CuptiRecords, CorrelationRangeErrors) {
  std::vector<ActivityRecord> records = {kernel(12, 1000, 1500)};
  EXPECT_THROW(spansByCorrelationRanges(records, {{10, 19}, {15, 29}}, 7u), Error);  // overlap
  EXPECT_THROW(spansByCorrelationRanges(records, {{10, 19}, {20, 29}}, 7u), Error);  // empty rep
  EXPECT_THROW(spansByCorrelationRanges(records, {{19, 10}}, 7u), Error);            // reversed
}

// A fake GPU + tracer: each launch gets the next correlation id and runs `duration` ns after a
// 100 ns launch gap. Like CUPTI, the external-correlation record comes after the kernel record,
// and records stay buffered until drain().
class FakeTracer : public ActivityTracer {
 public:
  void enable() override { enabled_ = true; }
  void disable() override { enabled_ = false; }
  void pushExternalId(uint64_t id) override { stack_.push_back(id); }
  void popExternalId() override { stack_.pop_back(); }
  std::vector<ActivityRecord> drain() override {
    ++drains_;
    return std::exchange(buffer_, {});
  }

  void launch(uint64_t duration_ns, uint32_t stream = 7) {
    uint32_t correlation = next_correlation_++;
    clock_ns_ += 100;
    ++launches_;
    if (enabled_)
      buffer_.push_back(kernel(correlation, clock_ns_, clock_ns_ + duration_ns, stream));
    clock_ns_ += duration_ns;
    if (enabled_ && !stack_.empty()) buffer_.push_back(external(correlation, stack_.back()));
  }
  void memcpyNow() {
    if (enabled_) buffer_.push_back(memcpy_on(next_correlation_++, clock_ns_, clock_ns_ + 5000));
    clock_ns_ += 5000;
  }

  int drains_ = 0;
  int launches_ = 0;
  bool enabled_ = false;
  std::vector<ActivityRecord> buffer_;

 private:
  std::vector<uint64_t> stack_;
  uint32_t next_correlation_ = 1;
  uint64_t clock_ns_ = 1'000'000;
};

TEST(KernelSpanTimer, SpansOfEachRepetition) {
  FakeTracer tracer;
  KernelSpanTimer timer(tracer);
  int runs = 0;
  // One repetition: kernels of 1000 and 500 ns, a memcpy between them that must not count, and
  // a kernel on another stream. Span = 1000 + 100 gap + ... computed below.
  auto run = [&] {
    ++runs;
    tracer.launch(1000);
    tracer.launch(500);
    tracer.launch(7000, /*stream=*/3);
  };
  std::vector<double> us = timer.time(7, /*warmup=*/2, /*repeats=*/3, run, [] {});
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(tracer.launches_, 15);
  EXPECT_EQ(tracer.drains_, 2);   // after warm-up, after the timed runs
  EXPECT_FALSE(tracer.enabled_);  // tracing is off again between events
  // start of first kernel -> end of second: 1000 + 100 (gap) + 500 = 1600 ns.
  EXPECT_EQ(us, (std::vector<double>{1.6, 1.6, 1.6}));
}

TEST(KernelSpanTimer, LateRecordsOfAnEarlierEventDoNotCount) {
  FakeTracer tracer;
  KernelSpanTimer timer(tracer);
  timer.time(
      7, 0, 2, [&] { tracer.launch(2000); }, [] {});
  // While the second event runs, a record of the first (external id 1) arrives late, as when
  // CUPTI completes an older buffer: its id is below the second event's, so it is ignored.
  bool first_run = true;
  auto run = [&] {
    if (first_run) {
      tracer.buffer_.push_back(kernel(9999, 1, 999'999'999));
      tracer.buffer_.push_back(external(9999, 1));
      first_run = false;
    }
    tracer.launch(300);
    tracer.memcpyNow();
  };
  std::vector<double> us = timer.time(7, 0, 2, run, [] {});
  EXPECT_EQ(us, (std::vector<double>{0.3, 0.3}));
}

TEST(KernelSpanTimer, WorkWithoutKernelsIsAnError) {
  FakeTracer tracer;
  KernelSpanTimer timer(tracer);
  EXPECT_THROW(timer.time(
                   7, 1, 2, [&] { tracer.memcpyNow(); }, [] {}),
               Error);
  EXPECT_FALSE(tracer.enabled_);  // disabled on the error path too
}

// The gate holds the stream before the first timed run and releases it after the last (after the
// warm-up, whose runs are not held); its own kernel (launched outside any external id) counts in
// no repetition. A run that throws still releases the stream.
TEST(KernelSpanTimer, GateHoldsTheStreamAroundTheTimedRunsOnly) {
  FakeTracer tracer;
  KernelSpanTimer timer(tracer);
  std::vector<std::string> calls;
  EnqueueGate gate{[&] {
                     calls.push_back("hold");
                     tracer.launch(50'000);  // the hold kernel
                   },
                   [&] { calls.push_back("release"); }};
  auto run = [&] {
    calls.push_back("run");
    tracer.launch(400);
  };
  std::vector<double> us = timer.time(
      7, /*warmup=*/1, /*repeats=*/2, run, [] {}, gate);
  EXPECT_EQ(calls, (std::vector<std::string>{"run", "hold", "run", "run", "release"}));
  EXPECT_EQ(us, (std::vector<double>{0.4, 0.4}));

  calls.clear();
  auto failing = [&] {
    calls.push_back("run");
    EVSIM_THROW(Error, "launch failed");
  };
  EXPECT_THROW(timer.time(
                   7, 0, 2, failing, [] {}, gate),
               Error);
  EXPECT_EQ(calls, (std::vector<std::string>{"hold", "run", "release"}));
  EXPECT_FALSE(tracer.enabled_);
}

}  // namespace
}  // namespace evsim

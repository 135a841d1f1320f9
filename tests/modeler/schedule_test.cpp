// Pipeline schedules: the task order of each stage (GPipe, DAPPLE/1F1B) and the activations a stage
// holds at once. Every expected order below is written out by hand from the schedule's definition:
//   GPipe:  F0 .. F(m-1) B0 .. B(m-1) on every stage;
//   DAPPLE: stage s of P runs w = min(P-s-1, m) warm-up forwards, then alternates F(w+i) B(i),
//           then drains the remaining backwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "plan/task_graph.h"
#include "support/schedule_shapes.h"

namespace evsim {
namespace {

// The graph walk's micro-batch chunks in flight (task_graph.h) for unit chunk bytes.
int peakActivationsInFlight(const std::vector<StageTask>& order) {
  return peakActivations(order, std::vector<int64_t>(8, 1), std::vector<int64_t>(8, 0)).in_flight;
}

// "F0 F1 B0 B1" — readable in a failure message.
std::string orderText(const std::vector<StageTask>& order) {
  std::string out;
  for (const StageTask& t : order) {
    if (!out.empty()) out += ' ';
    out += (t.phase == Phase::kForward ? 'F' : 'B');
    out += std::to_string(t.micro_batch);
  }
  return out;
}

std::string order(Schedule schedule, int stage, int stages, int64_t m) {
  return orderText(stageTaskOrder(schedule, stage, stages, m));
}

TEST(ScheduleTest, GpipeRunsAllForwardsThenAllBackwardsOnEveryStage) {
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(order(Schedule::kGpipe, s, 4, 6), "F0 F1 F2 F3 F4 F5 B0 B1 B2 B3 B4 B5")
        << "stage " << s;
  }
  EXPECT_EQ(order(Schedule::kGpipe, 0, 1, 1), "F0 B0");
}

TEST(ScheduleTest, DappleP4M6) {
  // Stage 0: w = min(3, 6) = 3 warm-up forwards F0 F1 F2; then 6 - 3 = 3 pairs F3 B0, F4 B1, F5 B2;
  // then the 3 remaining backwards B3 B4 B5.
  EXPECT_EQ(order(Schedule::kDapple, 0, 4, 6), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  // Stage 1: w = 2: F0 F1; pairs F2 B0, F3 B1, F4 B2, F5 B3; drain B4 B5.
  EXPECT_EQ(order(Schedule::kDapple, 1, 4, 6), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  // Stage 2: w = 1: F0; pairs F1 B0 .. F5 B4; drain B5.
  EXPECT_EQ(order(Schedule::kDapple, 2, 4, 6), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  // Last stage: w = 0, strict alternation.
  EXPECT_EQ(order(Schedule::kDapple, 3, 4, 6), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(ScheduleTest, DappleWithFewerMicroBatchesThanWarmup) {
  // P = 4, m = 2. Stage 0: P-s-1 = 3 > m, so w = min(3, 2) = 2: every forward is warm-up, no pairs,
  // then both backwards — the GPipe order.
  EXPECT_EQ(order(Schedule::kDapple, 0, 4, 2), "F0 F1 B0 B1");
  // Stage 1: w = min(2, 2) = 2: the same.
  EXPECT_EQ(order(Schedule::kDapple, 1, 4, 2), "F0 F1 B0 B1");
  // Stage 2: w = 1: F0; one pair F1 B0; drain B1.
  EXPECT_EQ(order(Schedule::kDapple, 2, 4, 2), "F0 F1 B0 B1");
  // Stage 3: w = 0.
  EXPECT_EQ(order(Schedule::kDapple, 3, 4, 2), "F0 B0 F1 B1");
  // P = 8, m = 1 on stage 0: w = min(7, 1) = 1.
  EXPECT_EQ(order(Schedule::kDapple, 0, 8, 1), "F0 B0");
}

TEST(ScheduleTest, SingleStageDappleAlternates) {
  // P = 1: w = min(0, m) = 0, so F0 B0 F1 B1 F2 B2.
  EXPECT_EQ(order(Schedule::kDapple, 0, 1, 3), "F0 B0 F1 B1 F2 B2");
}

TEST(ScheduleTest, EveryOrderIsAValidPermutation) {
  // Each micro-batch appears once forward and once backward, its forward first, and forwards and
  // backwards each in micro-batch order.
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple}) {
    for (int P : {1, 2, 3, 4, 7}) {
      for (int m : {1, 2, 3, 5, 8}) {
        for (int s = 0; s < P; ++s) {
          std::vector<StageTask> tasks = stageTaskOrder(schedule, s, P, m);
          ASSERT_EQ(tasks.size(), 2u * m);
          int next_f = 0, next_b = 0;
          for (const StageTask& t : tasks) {
            if (t.phase == Phase::kForward) {
              EXPECT_EQ(t.micro_batch, next_f++);
            } else {
              ASSERT_EQ(t.phase, Phase::kBackward);
              EXPECT_EQ(t.micro_batch, next_b++);
              EXPECT_LT(t.micro_batch, next_f) << "backward before its forward";
            }
          }
          EXPECT_EQ(next_f, m);
          EXPECT_EQ(next_b, m);
        }
      }
    }
  }
}

TEST(ScheduleTest, PeakActivationsDappleIsMinOfPMinusSAndM) {
  // DAPPLE: the w warm-up forwards plus the first forward of the steady state, then every forward
  // is followed by a backward: min(P - s, m). P = 4, m = 6: 4, 3, 2, 1.
  const int expected_m6[] = {4, 3, 2, 1};
  // P = 4, m = 2: min(4,2) = 2, min(3,2) = 2, min(2,2) = 2, min(1,2) = 1.
  const int expected_m2[] = {2, 2, 2, 1};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(peakActivationsInFlight(stageTaskOrder(Schedule::kDapple, s, 4, 6)), expected_m6[s]);
    EXPECT_EQ(peakActivationsInFlight(stageTaskOrder(Schedule::kDapple, s, 4, 2)), expected_m2[s]);
  }
  // General: never more than P - s, exactly min(P - s, m).
  for (int P : {1, 2, 3, 5, 8}) {
    for (int m : {1, 2, 4, 9}) {
      for (int s = 0; s < P; ++s) {
        int peak = peakActivationsInFlight(stageTaskOrder(Schedule::kDapple, s, P, m));
        EXPECT_LE(peak, P - s);
        EXPECT_EQ(peak, std::min(P - s, m)) << "P=" << P << " m=" << m << " s=" << s;
      }
    }
  }
}

TEST(ScheduleTest, PeakActivationsGpipeIsM) {
  for (int P : {1, 4}) {
    for (int m : {1, 3, 8}) {
      for (int s = 0; s < P; ++s) {
        EXPECT_EQ(peakActivationsInFlight(stageTaskOrder(Schedule::kGpipe, s, P, m)), m);
      }
    }
  }
}

TEST(ScheduleTest, PeakActivationsOfHandWrittenOrders) {
  EXPECT_EQ(peakActivationsInFlight({}), 0);
  // F0 F1 B0 F2 B1 B2: 1, 2, 1, 2, 1, 0 -> 2.
  EXPECT_EQ(peakActivationsInFlight({{Phase::kForward, 0},
                                     {Phase::kForward, 1},
                                     {Phase::kBackward, 0},
                                     {Phase::kForward, 2},
                                     {Phase::kBackward, 1},
                                     {Phase::kBackward, 2}}),
            2);
}

TEST(ScheduleTest, RejectsBadArguments) {
  EXPECT_THROW(stageTaskOrder(Schedule::kDapple, 4, 4, 2), Error);  // stage out of range
  EXPECT_THROW(stageTaskOrder(Schedule::kDapple, -1, 4, 2), Error);
  EXPECT_THROW(stageTaskOrder(Schedule::kGpipe, 0, 4, 0), Error);  // no micro-batches
}

TEST(ScheduleOrders, SharedOrdersAreTheSchedulesOwn) {
  // scheduleOrders computes each (schedule, P, v, m) once: the same object for a second caller,
  // equal to the schedule's own orders, and apart from other shapes.
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple, Schedule::kInterleaved,
                            Schedule::kZbh1, Schedule::kZbh2}) {
    const int v = schedule == Schedule::kInterleaved ? 3 : 1;
    const PipelineShape shape{4, v, 8};
    const std::shared_ptr<const DeviceOrders> first = scheduleOrders(schedule, shape);
    EXPECT_EQ(*first, pipelineSchedule(schedule).orders(shape)) << scheduleName(schedule);
    EXPECT_EQ(scheduleOrders(schedule, shape).get(), first.get());
    const PipelineShape other{4, v, 12};
    EXPECT_EQ(*scheduleOrders(schedule, other), pipelineSchedule(schedule).orders(other));
    // DAPPLE's stage 0 of 4 by hand: 3 warm-up forwards, then 1F1B.
    if (schedule == Schedule::kDapple) {
      EXPECT_EQ(orderText((*first)[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
    }
  }
}

TEST(ActivationStates, PeakFromTheStatesIsTheWalksPeak) {
  // By hand: DAPPLE stage 0 of 4, m = 8 (above) holds at most 4 micro-batches: one state, {4}; the
  // peak of 1000-byte chunks is 4000. GPipe holds all 8.
  const ActivationStates dapple = activationStates(stageTaskOrder(Schedule::kDapple, 0, 4, 8), 1);
  EXPECT_EQ(dapple.counts, (std::vector<int>{4, 0}));
  EXPECT_EQ(dapple.in_flight, 4);
  EXPECT_EQ(peakActivations(dapple, {1000}, {0}).bytes, 4000);
  EXPECT_EQ(activationStates(stageTaskOrder(Schedule::kGpipe, 0, 4, 8), 1).counts,
            (std::vector<int>{8, 0}));
  // Every schedule, stage and a few shapes, against the walk, for random chunk sizes (zeros,
  // small and near int64's reach, where both saturate alike).
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> kind(0, 2);
  auto size = [&]() -> int64_t {
    switch (kind(rng)) {
      case 0:
        return 0;
      case 1:
        return static_cast<int64_t>(rng() % 100000);
      default:
        return static_cast<int64_t>(rng() >> 2);
    }
  };
  int compared = 0;
  for (Schedule schedule : {Schedule::kGpipe, Schedule::kDapple, Schedule::kInterleaved,
                            Schedule::kZbh1, Schedule::kZbh2}) {
    for (int P : {1, 2, 3, 4}) {
      for (int v : {1, 2, 3}) {
        if ((v > 1) != (schedule == Schedule::kInterleaved) || (v > 1 && P < 2)) continue;
        for (int64_t m : {1, 2, 4, 6, 8, 12}) {
          if (v > 1 && m % P != 0) continue;
          const bool zero_bubble = schedule == Schedule::kZbh1 || schedule == Schedule::kZbh2;
          if (zero_bubble && m < P) continue;  // the schedules need m >= P
          const PipelineShape shape{P, v, m};
          const std::shared_ptr<const std::vector<ActivationStates>> states =
              scheduleActivationStates(schedule, shape);
          const DeviceOrders orders = pipelineSchedule(schedule).orders(shape);
          ASSERT_EQ(states->size(), orders.size());
          for (int d = 0; d < P; ++d) {
            for (int draw = 0; draw < 20; ++draw) {
              std::vector<int64_t> bytes(v), held(v);
              for (int c = 0; c < v; ++c) bytes[c] = size(), held[c] = size();
              const ActivationPeak walk = peakActivations(orders[d], bytes, held);
              const ActivationPeak fast = peakActivations((*states)[d], bytes, held);
              EXPECT_EQ(fast.bytes, walk.bytes) << scheduleName(schedule) << " P" << P << " v" << v
                                                << " m" << m << " device " << d;
              EXPECT_EQ(fast.in_flight, walk.in_flight);
              ++compared;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 2000);
}

// activationStates' frontier by brute force: every state along the order (per chunk, micro-batches
// held; then those whose W inputs are held), the ones no other distinct state matches or exceeds
// everywhere, in order of first appearance; and the walk's peak in flight.
ActivationStates maximalStates(const std::vector<StageTask>& order, int v) {
  const bool split = std::any_of(order.begin(), order.end(),
                                 [](const StageTask& t) { return t.phase == Phase::kWeightGrad; });
  std::vector<std::vector<int>> states;  // distinct, in order of first appearance
  std::vector<int> now(2 * static_cast<size_t>(v), 0);
  ActivationStates out;
  out.chunks = v;
  int in_flight = 0;
  for (const StageTask& t : order) {
    if (t.phase == Phase::kForward) {
      ++now[t.chunk];
      out.in_flight = std::max(out.in_flight, ++in_flight);
    }
    if (t.phase == Phase::kBackward) {
      --now[t.chunk];
      if (split) {
        ++now[v + t.chunk];
      } else {
        --in_flight;
      }
    }
    if (t.phase == Phase::kWeightGrad) --now[v + t.chunk], --in_flight;
    if (std::find(states.begin(), states.end(), now) == states.end()) states.push_back(now);
  }
  for (const std::vector<int>& a : states) {
    const bool covered = std::any_of(states.begin(), states.end(), [&](const auto& b) {
      if (b == a) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (b[i] < a[i]) return false;
      }
      return true;
    });
    if (!covered) out.counts.insert(out.counts.end(), a.begin(), a.end());
  }
  return out;
}

TEST(ActivationStates, FrontierIsTheMaximalStatesInOrder) {
  int compared = 0;
  for (const test::ScheduleShape& shape : test::everyScheduleShape()) {
    const DeviceOrders orders =
        pipelineSchedule(shape.schedule).orders({shape.P, shape.v, shape.m});
    for (const std::vector<StageTask>& order : orders) {
      const ActivationStates expected = maximalStates(order, shape.v);
      const ActivationStates got = activationStates(order, shape.v);
      EXPECT_EQ(got.counts, expected.counts) << scheduleName(shape.schedule) << " P" << shape.P;
      EXPECT_EQ(got.in_flight, expected.in_flight)
          << scheduleName(shape.schedule) << " P" << shape.P;
      ++compared;
    }
    // The cached states, filled from the orders handed over as the task graph's build does.
    const PipelineShape key{shape.P, shape.v, shape.m};
    EXPECT_EQ(scheduleActivationStates(shape.schedule, key, &orders)->size(), orders.size());
    for (size_t d = 0; d < orders.size(); ++d) {
      EXPECT_EQ((*scheduleActivationStates(shape.schedule, key))[d].counts,
                activationStates(orders[d], shape.v).counts);
    }
  }
  EXPECT_EQ(compared, 3 + 4 + 2 + 4 + 3 + 4 + 3 + 4);
}

// The task graph's build fills the cached states of one-chunk orders with whole backwards from the
// peaks its own walk counts (no walk of the states): by hand, DAPPLE device d of P holds
// min(P - d, m) micro-batches at most (min(P-d-1, m) warm-up forwards, then one more before its
// first backward), GPipe all m; one state each, nothing held for W. Shapes no other test here
// asks for, so that the graph's build is what fills them.
TEST(ActivationStates, TheTaskGraphsBuildFillsOneChunkStatesFromItsPeaks) {
  struct Case {
    Schedule schedule;
    int P;
    int64_t m;
  };
  for (const Case& c : {Case{Schedule::kDapple, 5, 9}, Case{Schedule::kDapple, 6, 3},
                        Case{Schedule::kGpipe, 3, 7}}) {
    const TaskGraph graph = buildTaskGraph(c.schedule, c.P, 1, c.m);
    // Asked again with wrong peaks: only a hit (what the build filled) gives the right states.
    const std::vector<int> wrong_peaks(static_cast<size_t>(c.P), 99);
    const std::shared_ptr<const std::vector<ActivationStates>> states = scheduleActivationStates(
        c.schedule, PipelineShape{c.P, 1, c.m}, nullptr, &wrong_peaks);
    ASSERT_EQ(states->size(), static_cast<size_t>(c.P));
    for (int d = 0; d < c.P; ++d) {
      const int peak = c.schedule == Schedule::kGpipe
                           ? static_cast<int>(c.m)
                           : static_cast<int>(std::min<int64_t>(c.P - d, c.m));
      EXPECT_EQ((*states)[d].counts, (std::vector<int>{peak, 0}))
          << scheduleName(c.schedule) << " P" << c.P << " m" << c.m << " device " << d;
      EXPECT_EQ((*states)[d].in_flight, peak);
      EXPECT_EQ((*states)[d].chunks, 1);
      EXPECT_EQ(peakInFlight(graph, d), peak);
    }
  }
}

// The walk skips a steady state's repeated periods (task_graph.cpp): on long orders, where it
// does, the frontier and peak in flight are still the brute force's.
TEST(ActivationStates, LongSteadyStatesGiveTheMaximalStates) {
  int compared = 0;
  for (const test::ScheduleShape& shape : test::everyScheduleShape()) {
    for (int64_t scale : {5, 12}) {
      const int64_t m = shape.m * scale;
      const DeviceOrders orders = pipelineSchedule(shape.schedule).orders({shape.P, shape.v, m});
      for (const std::vector<StageTask>& order : orders) {
        const ActivationStates expected = maximalStates(order, shape.v);
        const ActivationStates got = activationStates(order, shape.v);
        EXPECT_EQ(got.counts, expected.counts) << scheduleName(shape.schedule) << " m" << m;
        EXPECT_EQ(got.in_flight, expected.in_flight) << scheduleName(shape.schedule) << " m" << m;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * (3 + 4 + 2 + 4 + 3 + 4 + 3 + 4));
}

// Valid orders (no task frees what is not held) that repeat a random period with a net change of
// zero, with a random task put in now and then (states that recur without the tasks after them
// repeating, and periods that break off), after a warm-up and before a drain: the brute force's
// frontier.
TEST(ActivationStates, RepeatsThatBreakOffGiveTheMaximalStates) {
  std::mt19937 rng(34);
  int several = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int v = 1 + static_cast<int>(rng() % 3);
    const bool split = rng() % 2 == 0;
    std::vector<int> live(static_cast<size_t>(v), 0), kept(static_cast<size_t>(v), 0);
    std::vector<StageTask> order;
    auto run = [&](Phase phase, int c) {
      order.push_back(StageTask{phase, 0, c});
      if (phase == Phase::kForward) ++live[c];
      if (phase == Phase::kBackward) --live[c], kept[c] += split ? 1 : 0;
      if (phase == Phase::kWeightGrad) --kept[c];
    };
    // A period of a few micro-batches of random chunks, its tasks shuffled: F, B (and W) of each.
    std::vector<StageTask> period;
    const int units = 1 + static_cast<int>(rng() % 4);
    for (int u = 0; u < units; ++u) {
      const int c = static_cast<int>(rng() % static_cast<unsigned>(v));
      period.push_back({Phase::kForward, 0, c});
      period.push_back({Phase::kBackward, 0, c});
      if (split) period.push_back({Phase::kWeightGrad, 0, c});
    }
    std::shuffle(period.begin(), period.end(), rng);
    // Warm-up: enough held (and W inputs kept) that the period in any order frees only what is.
    for (int c = 0; c < v; ++c) {
      for (int i = 0; i < 2 * units; ++i) run(Phase::kForward, c);
      if (split) {
        for (int i = 0; i < units; ++i) run(Phase::kBackward, c);
      }
    }
    const int repeats = 5 + static_cast<int>(rng() % 40);
    for (int r = 0; r < repeats; ++r) {
      for (const StageTask& t : period) run(t.phase, t.chunk);
      if (rng() % 6 == 0) run(Phase::kForward, static_cast<int>(rng() % static_cast<unsigned>(v)));
    }
    for (int c = 0; c < v; ++c) {  // the drain
      while (live[c] > 0) run(Phase::kBackward, c);
      while (kept[c] > 0) run(Phase::kWeightGrad, c);
    }
    const ActivationStates expected = maximalStates(order, v);
    const ActivationStates got = activationStates(order, v);
    EXPECT_EQ(got.counts, expected.counts) << "trial " << trial;
    EXPECT_EQ(got.in_flight, expected.in_flight) << "trial " << trial;
    several += expected.counts.size() > 2 * static_cast<size_t>(v);
  }
  EXPECT_GT(several, 30);  // frontiers of several states, not one
}

}  // namespace
}  // namespace evsim

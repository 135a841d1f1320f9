#pragma once
// From per-iteration action times to the measured timeline eventrun writes. Pure: no MPI.
//
// Each rank's times are first put on rank 0's clock (minus the rank's ping-pong offset) and made
// relative to the iteration's start (the earliest barrier exit over all ranks). The first
// iteration is warm-up; each event's start and end are the medians over the others (medians are
// monotone: an event that ends before the next starts in every iteration still does so in the
// medians, so per-stream order survives).

#include <cstdint>
#include <vector>

#include "plan/iteration_plan.h"
#include "modeler/trace_writer.h"
#include "runner/eventrun_program.h"

namespace evsim {

struct MeasuredSpan {
  double start_us = 0;  // from the iteration start, rank 0's clock
  double end_us = 0;
};

// `iterations[i][a]`: action a's times in iteration i on this rank's clock (warm-up included, as
// iteration 0); `iteration_start_us[i]`: iteration i's start on rank 0's clock; `offset_us`: this
// rank's clock minus rank 0's. Returns one span per recorded action of `program`, in order.
// Throws Error with fewer than 2 iterations.
std::vector<MeasuredSpan> medianSpans(const RankProgram& program,
                                      const std::vector<std::vector<ActionTime>>& iterations,
                                      const std::vector<double>& iteration_start_us,
                                      double offset_us);

double median(std::vector<double> values);

// The measured timeline (provenance "measured"): `programs[r]` and `spans[r]` for each world rank
// r. All three arguments must outlive the returned source.
TimelineSource measuredTimeline(const IterationPlan& plan, const std::vector<RankProgram>& programs,
                                const std::vector<std::vector<MeasuredSpan>>& spans);

}  // namespace evsim

#include "runner/eventrun_report.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

double median(std::vector<double> values) {
  EVSIM_CHECK(!values.empty(), "median of nothing");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::vector<MeasuredSpan> medianSpans(const RankProgram& program,
                                      const std::vector<std::vector<ActionTime>>& iterations,
                                      const std::vector<double>& iteration_start_us,
                                      double offset_us) {
  EVSIM_CHECK(iterations.size() >= 2 && iterations.size() == iteration_start_us.size(),
              "{} iterations, {} starts: need a warm-up and at least one timed iteration",
              iterations.size(), iteration_start_us.size());
  std::vector<MeasuredSpan> spans;
  std::vector<double> starts, ends;
  for (size_t a = 0; a < program.actions.size(); ++a) {
    if (!program.actions[a].recorded()) continue;
    starts.clear();
    ends.clear();
    for (size_t i = 1; i < iterations.size(); ++i) {
      EVSIM_CHECK(iterations[i].size() == program.actions.size(), "iteration {}: {} times", i,
                  iterations[i].size());
      starts.push_back(iterations[i][a].start_us - offset_us - iteration_start_us[i]);
      ends.push_back(iterations[i][a].end_us - offset_us - iteration_start_us[i]);
    }
    spans.push_back(MeasuredSpan{median(starts), median(ends)});
  }
  return spans;
}

TimelineSource measuredTimeline(const IterationPlan& plan, const std::vector<RankProgram>& programs,
                                const std::vector<std::vector<MeasuredSpan>>& spans) {
  TimelineSource source;
  source.plan = &plan;
  source.for_each_event = [&programs, &spans](int64_t rank, const DeviceEventVisitor& visit) {
    const RankProgram& program = programs.at(static_cast<size_t>(rank));
    const std::vector<MeasuredSpan>& measured = spans.at(static_cast<size_t>(rank));
    size_t k = 0;
    for (const Action& a : program.actions) {
      if (!a.recorded()) continue;
      const MeasuredSpan& span = measured.at(k++);
      visit(DeviceEvent{a.stream, a.phase, a.name, a.event, a.layer, a.micro_batch, span.start_us,
                        span.end_us - span.start_us, a.chunk});
    }
  };
  source.provenance = [](int) { return std::string_view("measured"); };
  return source;
}

}  // namespace evsim

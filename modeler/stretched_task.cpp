// A lone task timed again with its shared collectives; stretched_task.h states the rule.
#include "modeler/stretched_task.h"

#include "modeler/op_offsets.h"
#include "plan/task_graph.h"

namespace evsim {

double slowdownBeside(const DeviceSpec& device, const UniqueEvent& event) {
  if (!isCommunication(event.event.kind)) return 1.0;
  return device.overlap_slowdown.factor(event.event.placement.interNode());
}

StretchedTask stretchedTask(const IterationPlan& plan, const std::vector<EventCost>& costs,
                            int virtual_stage, Phase phase, bool split,
                            std::span<const OpStretch> stretched) {
  const StagePlan& stage = plan.stages[static_cast<size_t>(virtual_stage)];
  const OpList& ops = phase == Phase::kForward ? stage.forward : stage.backward;
  // Each op's extra time (by its position in `ops`).
  std::vector<double> extra(ops.size(), 0.0);
  for (const OpStretch& s : stretched) {
    EVSIM_CHECK(s.op >= 0 && static_cast<size_t>(s.op) < ops.size(),
                "a stretched op at {} of a task of {} ops", s.op, ops.size());
    extra[static_cast<size_t>(s.op)] += s.extra_us;
  }
  auto in_task = [&](const OpInstance& op) {
    return phase == Phase::kForward || runsIn(op, phase, split);
  };
  auto time = [&](bool with_stretch, bool slowed) {
    return opOffsets(
        ops, in_task,
        [&](const OpInstance& op) {
          const EventCost& c = costs[op.event];
          const size_t i = static_cast<size_t>(&op - ops.data());
          return std::pair{c.host_us, c.time_us + (with_stretch ? extra[i] : 0.0)};
        },
        [](size_t, double) {},
        [&](const OpInstance& op) {
          if (!slowed || op.stream == Stream::kHost) return 1.0;
          return slowdownBeside(plan.cluster.device, plan.events[op.event]);
        });
  };
  const double alone = time(false, true), shared = time(true, true);
  StretchedTask out;
  out.delay_us = shared - alone;
  out.slowdown_us = (shared - time(true, false)) - (alone - time(false, false));
  return out;
}

}  // namespace evsim

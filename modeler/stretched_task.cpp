// A lone task timed again with its shared collectives; stretched_task.h states the rule.
#include "modeler/stretched_task.h"

#include <algorithm>
#include <bit>

#include "common/fnv1a.h"
#include "modeler/op_offsets.h"
#include "plan/task_graph.h"

namespace evsim {

double slowdownBeside(const DeviceSpec& device, const UniqueEvent& event) {
  if (!isCommunication(event.event.kind)) return 1.0;
  return device.overlap_slowdown.factor(event.event.placement.interNode());
}

TaskRetimer::TaskRetimer(const IterationPlan& plan, const std::vector<EventCost>& costs,
                         bool split)
    : plan_(plan), costs_(costs), split_(split) {
  const OverlapSlowdown& f = plan.cluster.device.overlap_slowdown;
  slows_ = f.nvlink.value > 1 || f.network.value > 1;
}

const OpList& TaskRetimer::opsOf(int virtual_stage, Phase phase) const {
  const StagePlan& stage = plan_.stages[static_cast<size_t>(virtual_stage)];
  return phase == Phase::kForward ? stage.forward : stage.backward;
}

bool TaskRetimer::inTask(const OpInstance& op, Phase phase) const {
  return phase == Phase::kForward || runsIn(op, phase, split_);
}

TaskRetimer::Times TaskRetimer::times(int virtual_stage, Phase phase,
                                      std::span<const OpStretch> stretched, bool beside) {
  const OpList& ops = opsOf(virtual_stage, phase);
  extra_.assign(ops.size(), 0.0);
  for (const OpStretch& s : stretched) {
    EVSIM_CHECK(s.op >= 0 && static_cast<size_t>(s.op) < ops.size(),
                "a stretched op at {} of a task of {} ops", s.op, ops.size());
    extra_[static_cast<size_t>(s.op)] += s.extra_us;
  }
  auto in_task = [&](const OpInstance& op) { return inTask(op, phase); };
  auto time = [&](bool slowed) {
    ++op_walks_;
    return opOffsets(
        ops, in_task,
        [&](const OpInstance& op) {
          const EventCost& c = costs_[op.event];
          const double extra = extra_[static_cast<size_t>(&op - ops.data())];
          return std::pair{issueHostUs(op, c), c.time_us + extra};
        },
        [](size_t, double) {},
        [&](const OpInstance& op) {
          if (!slowed || op.stream == Stream::kHost) return 1.0;
          return slowdownBeside(plan_.cluster.device, plan_.events[op.event]);
        });
  };
  Times t;
  t.slowed_us = time(slows_);
  t.unslowed_us = slows_ && beside ? time(false) : t.slowed_us;
  return t;
}

size_t TaskRetimer::QuestionHash::operator()(const Question& q) const {
  // FNV-1a over the words of the question.
  Fnv1a h;
  h.mix(static_cast<uint64_t>(q.virtual_stage));
  h.mix(static_cast<uint64_t>(q.phase));
  for (const auto& [op, bits] : q.stretched) {
    h.mix(static_cast<uint64_t>(op));
    h.mix(bits);
  }
  return static_cast<size_t>(h.value());
}

StretchedTask TaskRetimer::of(int virtual_stage, Phase phase,
                              std::span<const OpStretch> stretched) {
  question_.virtual_stage = virtual_stage;
  question_.phase = static_cast<int>(phase);
  question_.stretched.clear();
  for (const OpStretch& s : stretched) {
    question_.stretched.emplace_back(s.op, std::bit_cast<uint64_t>(s.extra_us));
  }
  if (const auto seen = asked_.find(question_); seen != asked_.end()) return seen->second;
  const std::pair<int, int> key{virtual_stage, static_cast<int>(phase)};
  auto alone = alone_.find(key);
  if (alone == alone_.end()) {
    const OpList& ops = opsOf(virtual_stage, phase);
    Alone a;
    a.beside = std::any_of(ops.begin(), ops.end(), [&](const OpInstance& op) {
      return op.overlap_ops > 0 && inTask(op, phase);
    });
    a.times = times(virtual_stage, phase, {}, a.beside);
    alone = alone_.emplace(key, a).first;
  }
  const Times shared = times(virtual_stage, phase, stretched, alone->second.beside);
  StretchedTask out;
  out.delay_us = shared.slowed_us - alone->second.times.slowed_us;
  out.slowdown_us = out.delay_us - (shared.unslowed_us - alone->second.times.unslowed_us);
  asked_.emplace(question_, out);
  return out;
}

StretchedTask stretchedTask(const IterationPlan& plan, const std::vector<EventCost>& costs,
                            int virtual_stage, Phase phase, bool split,
                            std::span<const OpStretch> stretched) {
  return TaskRetimer(plan, costs, split).of(virtual_stage, phase, stretched);
}

}  // namespace evsim

#pragma once
// A lone task whose collectives across nodes link sharing stretched (link_flows.h): the task timed
// again by op_offsets.h's rule with each stretched collective lasting its shared time, so that
//   - a CP ring exchange running beside its attention step delays the task only by what it now
//     outlasts the step (a stretch the step hides costs nothing), and
//   - the step's overlap slowdown (overlap_slowdown.h) sees the exchange in flight for its shared
//     window, not its standalone one (the same rule the DP buckets follow in timing_engine.cpp);
//   - a blocking collective (TP, EP, ZeRO-3: nothing runs beside it) delays the task by its whole
//     stretch, as before.
// The same function gives the standalone task (no stretch) that simulation.cpp's timingInput costs,
// so the delay is the difference of two timings of one rule.

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "modeler/cost_source.h"
#include "plan/iteration_plan.h"

namespace evsim {

// The factor by which compute beside `event` slows (overlap_slowdown.h): by the traffic kind of a
// collective or P2P transfer, 1 for anything else (host copies, compute).
double slowdownBeside(const DeviceSpec& device, const UniqueEvent& event);

// One op of a task lengthened by sharing: its position in the task's op list (forward or backward)
// and the time sharing added to it alone (not what it inherited from an earlier collective).
struct OpStretch {
  int op = -1;
  double extra_us = 0;
};

struct StretchedTask {
  double delay_us = 0;     // the task's duration with the stretches less its standalone duration
  double slowdown_us = 0;  // of which overlap slowdown (compute beside the longer transfers)
};

// Tasks of one plan timed again: each (virtual stage, phase)'s standalone timing is taken once,
// and the unslowed timings only where the device has an overlap factor above 1.
// Each question is answered once: a task asked again with the same stretches (the same ops, the
// same extra times to the bit) gets the answer of the first time, which the same walk over the
// same numbers would give again. Sharing repeats itself across micro-batches: in the 405B
// every-dimension search on 1,024 GPUs, 695,296 retimed tasks asked 5,668 distinct questions
// (issue 34; ZeRO-2's per-micro-batch bucket reductions are most of them).
class TaskRetimer {
 public:
  TaskRetimer(const IterationPlan& plan, const std::vector<EventCost>& costs, bool split);
  // The task of virtual stage `virtual_stage` in `phase` (a split backward's B or W when `split`),
  // with `stretched` ops lengthened, against the same task alone; both with the overlap slowdown.
  StretchedTask of(int virtual_stage, Phase phase, std::span<const OpStretch> stretched);
  // How many of()'s were walked (the rest answered from an earlier identical question).
  size_t walked() const { return asked_.size(); }
  // How many times a task's ops were walked (opOffsets): one walk a question, two where the
  // device slows compute beside a transfer and the task has an op that runs beside others.
  size_t opWalks() const { return op_walks_; }

 private:
  struct Times {
    double slowed_us = 0, unslowed_us = 0;
  };
  Times times(int virtual_stage, Phase phase, std::span<const OpStretch> stretched, bool beside);
  // The task's op list, and whether an op of it runs in the task: the one selection both the
  // walks (times) and the beside check (Alone) use, so skipping the second walk stays exact.
  const OpList& opsOf(int virtual_stage, Phase phase) const;
  bool inTask(const OpInstance& op, Phase phase) const;
  // The standalone timing of a (virtual stage, phase), and whether one of its ops runs beside
  // others (OpInstance::overlap_ops): without one no compute op is ever slowed (opOffsets asks
  // the slowdown only of such ops), so the unslowed walk is the slowed one to the bit and is not
  // taken (issue 34: the second walk was half of the retiming in the exhaustive searches).
  struct Alone {
    Times times;
    bool beside = false;
  };

  // A question of(): the task and its stretches, each extra time compared by its bits.
  struct Question {
    int virtual_stage = 0;
    int phase = 0;
    std::vector<std::pair<int, uint64_t>> stretched;  // {op, bits of extra_us}, as asked
    bool operator==(const Question&) const = default;
  };
  struct QuestionHash {
    size_t operator()(const Question& q) const;
  };

  const IterationPlan& plan_;
  const std::vector<EventCost>& costs_;
  bool split_ = false;
  bool slows_ = false;                      // an overlap factor above 1
  std::map<std::pair<int, int>, Alone> alone_;  // per (virtual stage, phase)
  size_t op_walks_ = 0;
  std::unordered_map<Question, StretchedTask, QuestionHash> asked_;
  Question question_;                       // scratch: the one being asked
  std::vector<double> extra_;               // scratch: per op of the task, its stretch
};

// One task timed again (a TaskRetimer for one call).
StretchedTask stretchedTask(const IterationPlan& plan, const std::vector<EventCost>& costs,
                            int virtual_stage, Phase phase, bool split,
                            std::span<const OpStretch> stretched);

}  // namespace evsim

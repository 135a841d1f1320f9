#include "profiler/eventrun_program.h"

#include <algorithm>

#include "common/error.h"
#include "modeler/schedule.h"

namespace evsim {

namespace {

class ProgramBuilder {
 public:
  ProgramBuilder(const IterationPlan& plan, int64_t rank) : plan_(plan), layout_(plan.layout()) {
    program_.rank = rank;
    program_.coord = layout_.coord(rank);
  }

  RankProgram build() {
    const RankCoord c = program_.coord;
    const int P = plan_.strategy.pp;
    const StagePlan& stage = plan_.stages[c.pp];
    const PipelineClass& links = plan_.pipelines[plan_.pipelineOf(c.dp)];
    const std::vector<StageTask> order =
        stageTaskOrder(plan_.strategy.schedule, c.pp, P, plan_.micro_batches);
    for (size_t t = 0; t < order.size(); ++t) {
      const StageTask task = order[t];
      const bool forward = task.phase == Phase::kForward;
      const int mb = task.micro_batch;
      const int tag = 2 * mb + (forward ? 0 : 1);
      // Input: the activation comes over the boundary (s-1, s), the gradient over (s, s+1).
      if (forward && c.pp > 0) {
        addP2P(ActionKind::kRecv, links.forward_p2p[c.pp - 1], task, c.pp - 1, tag, "");
      } else if (!forward && c.pp + 1 < P) {
        addP2P(ActionKind::kRecv, links.backward_p2p[c.pp], task, c.pp + 1, tag, "");
      }
      const OpList& ops = forward ? stage.forward : stage.backward;
      const bool last_task = t + 1 == order.size();
      for (size_t i = 0; i < ops.size(); ++i) {
        addOp(ops[i], task.phase, mb);
        if (!last_task) continue;
        for (const GradBucket& bucket : stage.dp_buckets) {
          if (bucket.ready_after_op != static_cast<int>(i)) continue;
          Action a = commonFields(Stream::kDpComm, Phase::kGradSync, "grad_bucket_allreduce",
                                  bucket.event, kEmbeddingLayer, -1);
          a.kind = ActionKind::kBucketStart;
          a.group = groupIndex(Stream::kDpComm);
          program_.actions.push_back(a);
        }
      }
      if (forward && c.pp + 1 < P) {
        addP2P(ActionKind::kSend, links.forward_p2p[c.pp], task, c.pp + 1, tag, "send_activation");
      } else if (!forward && c.pp > 0) {
        addP2P(ActionKind::kSend, links.backward_p2p[c.pp - 1], task, c.pp - 1, tag,
               "send_gradient");
      }
    }
    if (stage.dp_allreduce >= 0) {
      Action a = commonFields(Stream::kDpComm, Phase::kGradSync, "grad_allreduce",
                              stage.dp_allreduce, kEmbeddingLayer, -1);
      a.kind = ActionKind::kCollective;
      a.group = groupIndex(Stream::kDpComm);
      program_.actions.push_back(a);
    }
    if (!stage.dp_buckets.empty()) {
      Action wait = commonFields(Stream::kDpComm, Phase::kGradSync, "grad_bucket_wait", -1,
                                 kEmbeddingLayer, -1);
      wait.kind = ActionKind::kBucketWait;
      program_.actions.push_back(wait);
    }
    for (const OpInstance& op : stage.optimizer) addOp(op, Phase::kOptimizer, -1);
    sortGroups();
    return std::move(program_);
  }

 private:
  static Action commonFields(Stream stream, Phase phase, std::string_view name, int event,
                             int layer, int micro_batch) {
    Action a;
    a.stream = stream;
    a.phase = phase;
    a.name = name;
    a.event = event;
    a.layer = layer;
    a.micro_batch = micro_batch;
    return a;
  }

  void addOp(const OpInstance& op, Phase phase, int micro_batch) {
    Action a = commonFields(op.stream, phase, op.name, op.event, op.layer, micro_batch);
    const EventKind kind = plan_.events[op.event].event.kind;
    if (kind == EventKind::kCompute) {
      a.kind = ActionKind::kCompute;
    } else if (kind == EventKind::kP2P) {
      EVSIM_THROW(Error, "op '{}' of stage {}: a P2P event inside an op list has no peer rule",
                  op.name, program_.coord.pp);
    } else {
      a.kind = ActionKind::kCollective;
      a.group = groupIndex(op.stream);
    }
    program_.actions.push_back(a);
  }

  void addP2P(ActionKind kind, int event, const StageTask& task, int peer_stage, int tag,
              std::string_view name) {
    Action a =
        commonFields(Stream::kPpComm, task.phase, name, event, kEmbeddingLayer, task.micro_batch);
    a.kind = kind;
    a.peer = layout_.rank(program_.coord.tp, program_.coord.dp, peer_stage);
    a.tag = tag;
    program_.actions.push_back(a);
  }

  int groupIndex(Stream stream) {
    std::vector<int64_t> members = collectiveGroup(plan_, program_.coord, stream);
    auto it = std::find(program_.groups.begin(), program_.groups.end(), members);
    if (it != program_.groups.end()) return static_cast<int>(it - program_.groups.begin());
    program_.groups.push_back(std::move(members));
    return static_cast<int>(program_.groups.size()) - 1;
  }

  // Renumbers groups into ascending order of their member lists.
  void sortGroups() {
    std::vector<std::vector<int64_t>> sorted = program_.groups;
    std::sort(sorted.begin(), sorted.end());
    for (Action& a : program_.actions) {
      if (a.group < 0) continue;
      auto it = std::find(sorted.begin(), sorted.end(), program_.groups[a.group]);
      a.group = static_cast<int>(it - sorted.begin());
    }
    program_.groups = std::move(sorted);
  }

  const IterationPlan& plan_;
  const RankLayout layout_;
  RankProgram program_;
};

}  // namespace

int RankProgram::recordedCount() const {
  return static_cast<int>(
      std::count_if(actions.begin(), actions.end(), [](const Action& a) { return a.recorded(); }));
}

std::vector<int64_t> collectiveGroup(const IterationPlan& plan, const RankCoord& coord,
                                     Stream stream) {
  const RankLayout layout = plan.layout();
  const Strategy& s = plan.strategy;
  std::vector<int64_t> members;
  switch (stream) {
    case Stream::kTpComm:
      for (int t = 0; t < s.tp; ++t) members.push_back(layout.rank(t, coord.dp, coord.pp));
      break;
    case Stream::kDpComm:
      for (int d = 0; d < s.dp; ++d) members.push_back(layout.rank(coord.tp, d, coord.pp));
      break;
    case Stream::kPpComm:
      for (int p = 0; p < s.pp; ++p) members.push_back(layout.rank(coord.tp, coord.dp, p));
      break;
    case Stream::kCompute:
      EVSIM_THROW(Error, "a collective on the compute stream has no group");
  }
  std::sort(members.begin(), members.end());
  return members;
}

RankProgram buildRankProgram(const IterationPlan& plan, int64_t rank) {
  EVSIM_CHECK(rank >= 0 && rank < plan.strategy.gpus(), "rank {} outside the {} ranks of {}", rank,
              plan.strategy.gpus(), plan.strategy.name());
  return ProgramBuilder(plan, rank).build();
}

}  // namespace evsim

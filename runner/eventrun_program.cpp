#include "runner/eventrun_program.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "plan/task_graph.h"

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
    const int v = plan_.chunksPerDevice();
    const PipelineClass& links = plan_.pipelines[plan_.pipelineOf(c.dp)];
    const TaskGraph graph = buildTaskGraph(plan_);
    const size_t tasks = static_cast<size_t>(graph.tasks_per_device);
    const Phase gradient_task = graph.split_backward ? Phase::kWeightGrad : Phase::kBackward;
    // A chunk's gradients are complete during its last gradient task: its buckets go there.
    std::vector<size_t> last_gradient_task(static_cast<size_t>(v), tasks);
    for (size_t t = 0; t < tasks; ++t) {
      const NodeTask& task = graph.nodes[graph.nodeAt(c.pp, t)].task;
      if (task.phase == gradient_task) last_gradient_task[task.chunk] = t;
    }
    for (size_t t = 0; t < tasks; ++t) {
      const TaskNode& node = graph.nodes[graph.nodeAt(c.pp, t)];
      const StageTask task = node.task;
      const StagePlan& stage = plan_.stages[node.virtual_stage];
      // Inputs that cross devices arrive over the producer's link.
      for (const TaskEdge& e : graph.inputs(graph.nodeAt(c.pp, t))) {
        if (e.transfer) addTransfer(ActionKind::kRecv, graph.nodes[e.from], task, links, "");
      }
      const bool forward = task.phase == Phase::kForward;
      const OpList& ops = forward ? stage.forward : stage.backward;
      const bool buckets_here = t == last_gradient_task[task.chunk];
      if (buckets_here) addBuckets(stage, -1, graph.split_backward, task.chunk);
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!forward && !runsIn(ops[i], task.phase, graph.split_backward)) continue;
        addOp(ops[i], ops[i].recompute ? Phase::kRecompute : task.phase, task.micro_batch,
              task.chunk);
        if (buckets_here) addBuckets(stage, static_cast<int>(i), graph.split_backward, task.chunk);
      }
      if (node.send != Send::kNone) {
        addTransfer(ActionKind::kSend, node, task, links,
                    node.send == Send::kActivation ? "send_activation" : "send_gradient");
      }
    }
    bool any_bucket = false;
    for (int chunk = v - 1; chunk >= 0; --chunk) {
      const StagePlan& stage = chunkStage(chunk);
      any_bucket = any_bucket || !stage.dp_buckets.empty();
      const int event = stage.gradSyncEvent();
      if (event < 0) continue;
      addCollective(Stream::kDpComm, isScatter(event) ? "grad_reduce_scatter" : "grad_allreduce",
                    event, chunk);
      if (stage.expert_grad_sync >= 0) {
        addCollective(Stream::kDpComm,
                      isScatter(event) ? "expert_grad_reduce_scatter" : "expert_grad_allreduce",
                      stage.expert_grad_sync, chunk, layout_.expertDpRanks(program_.coord));
      }
    }
    if (any_bucket) {
      Action wait = commonFields(Stream::kDpComm, Phase::kGradSync, "grad_bucket_wait", -1,
                                 kEmbeddingLayer, -1, 0);
      wait.kind = ActionKind::kBucketWait;
      program_.actions.push_back(wait);
    }
    for (int chunk = v - 1; chunk >= 0; --chunk) {
      for (const OpInstance& op : chunkStage(chunk).optimizer) {
        addOp(op, Phase::kOptimizer, -1, chunk);
      }
    }
    for (int chunk = v - 1; chunk >= 0; --chunk) {
      const StagePlan& stage = chunkStage(chunk);
      if (stage.dp_allgather >= 0) {
        addCollective(Stream::kDpComm, "param_allgather", stage.dp_allgather, chunk);
      }
      if (stage.expert_allgather >= 0) {
        addCollective(Stream::kDpComm, "expert_param_allgather", stage.expert_allgather, chunk,
                      layout_.expertDpRanks(program_.coord));
      }
    }
    sortGroups();
    return std::move(program_);
  }

 private:
  static Action commonFields(Stream stream, Phase phase, std::string_view name, int event,
                             int layer, int micro_batch, int chunk) {
    Action a;
    a.chunk = chunk;
    a.stream = stream;
    a.phase = phase;
    a.name = name;
    a.event = event;
    a.layer = layer;
    a.micro_batch = micro_batch;
    return a;
  }

  const StagePlan& chunkStage(int chunk) const {
    return plan_.stages[plan_.pipelineLayout().virtualStage(program_.coord.pp, chunk)];
  }

  bool isScatter(int event) const {
    return plan_.events[event].event.kind == EventKind::kReduceScatter;
  }

  // A blocking gradient-sync phase collective on the DP group (or on `members`), outside
  // micro-batch tasks.
  void addCollective(Stream stream, std::string_view name, int event, int chunk,
                     std::vector<int64_t> members = {}) {
    Action a = commonFields(stream, Phase::kGradSync, name, event, kEmbeddingLayer, -1, chunk);
    a.kind = ActionKind::kCollective;
    a.group = members.empty() ? groupIndex(stream) : groupIndexOf(std::move(members));
    program_.actions.push_back(a);
  }

  void addOp(const OpInstance& op, Phase phase, int micro_batch, int chunk) {
    Action a = commonFields(op.stream, phase, op.name, op.event, op.layer, micro_batch, chunk);
    const EventKind kind = plan_.events[op.event].event.kind;
    if (kind == EventKind::kCompute) {
      a.kind = ActionKind::kCompute;
    } else if (kind == EventKind::kP2P) {
      EVSIM_CHECK(op.stream == Stream::kCpComm,
                  "op '{}' of stage {}: a P2P event inside an op list outside the CP ring", op.name,
                  program_.coord.pp);
      a.kind = ActionKind::kRingExchange;
      a.group = groupIndex(op.stream);
    } else {
      a.kind = ActionKind::kCollective;
      a.group = groupIndex(op.stream);
    }
    program_.actions.push_back(a);
  }

  // Issues the chunk's DDP buckets that complete after backward op `op` (-1: before the task's
  // first op), by task_graph.h's bucketIssueOp.
  void addBuckets(const StagePlan& stage, int op, bool split, int chunk) {
    for (const GradBucket& bucket : stage.dp_buckets) {
      if (bucketIssueOp(stage.backward, bucket.ready_after_op, split) != op) continue;
      const bool scatter = isScatter(bucket.event);
      Action a = commonFields(
          Stream::kDpComm, Phase::kGradSync,
          bucket.expert ? (scatter ? "expert_grad_reduce_scatter" : "expert_grad_allreduce")
                        : (scatter ? "grad_bucket_reduce_scatter" : "grad_bucket_allreduce"),
          bucket.event, kEmbeddingLayer, -1, chunk);
      a.kind = ActionKind::kBucketStart;
      a.group = bucket.expert ? groupIndexOf(layout_.expertDpRanks(program_.coord))
                              : groupIndex(Stream::kDpComm);
      program_.actions.push_back(a);
    }
  }

  // The message `sender` sends over its link (boundary b: chunk b -> b+1), received by `task`'s
  // device (kRecv) or sent by it (kSend).
  void addTransfer(ActionKind kind, const TaskNode& sender, const StageTask& task,
                   const PipelineClass& links, std::string_view name) {
    const bool activation = sender.send == Send::kActivation;
    const int link = linkOf(sender);
    const int event = activation ? links.forward_p2p[link] : links.backward_p2p[link];
    // The peer: the receiver's virtual stage when sending, the sender's when receiving.
    const int peer_stage = kind == ActionKind::kRecv ? sender.virtual_stage
                                                     : sender.virtual_stage + (activation ? 1 : -1);
    Action a = commonFields(Stream::kPpComm, task.phase, name, event, kEmbeddingLayer,
                            task.micro_batch, task.chunk);
    a.kind = kind;
    a.peer = layout_.rank(program_.coord.tp, program_.coord.dp,
                          plan_.pipelineLayout().device(peer_stage), program_.coord.cp);
    const int64_t tag =
        2 * (int64_t{link} * plan_.micro_batches + task.micro_batch) + (activation ? 0 : 1);
    EVSIM_CHECK(tag < std::numeric_limits<int>::max(), "P2P tag {} overflows int", tag);
    a.tag = static_cast<int>(tag);
    program_.actions.push_back(a);
  }

  int groupIndex(Stream stream) {
    return groupIndexOf(collectiveGroup(plan_, program_.coord, stream));
  }

  int groupIndexOf(std::vector<int64_t> members) {
    std::sort(members.begin(), members.end());
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

RingPeers ringPeers(const RankProgram& program, int group) {
  const std::vector<int64_t>& members = program.groups.at(static_cast<size_t>(group));
  const auto it = std::find(members.begin(), members.end(), program.rank);
  EVSIM_CHECK(it != members.end(), "rank {} is not in its ring group", program.rank);
  const int n = static_cast<int>(members.size());
  const int me = static_cast<int>(it - members.begin());
  return RingPeers{(me + 1) % n, (me + n - 1) % n};
}

int64_t p2pTagBound(const IterationPlan& plan) {
  return 2 * static_cast<int64_t>(plan.virtualStages() - 1) * plan.micro_batches;
}

std::vector<int64_t> collectiveGroup(const IterationPlan& plan, const RankCoord& coord,
                                     Stream stream) {
  const RankLayout layout = plan.layout();
  const Strategy& s = plan.strategy;
  std::vector<int64_t> members;
  switch (stream) {
    case Stream::kTpComm:
      members = layout.tpRanks(coord);
      break;
    case Stream::kDpComm:
      members = layout.dpRanks(coord);
      break;
    case Stream::kCpComm:
      members = layout.cpRanks(coord);
      break;
    case Stream::kEpComm:
      members = layout.epRanks(coord);
      break;
    case Stream::kPpComm:
      for (int p = 0; p < s.pp; ++p) {
        members.push_back(layout.rank(coord.tp, coord.dp, p, coord.cp));
      }
      break;
    case Stream::kCompute:
    case Stream::kHost:
      EVSIM_THROW(Error, "a collective on the {} stream has no group", streamName(stream));
  }
  std::sort(members.begin(), members.end());
  return members;
}

RankProgram buildRankProgram(const IterationPlan& plan, int64_t rank) {
  EVSIM_CHECK(rank >= 0 && rank < plan.strategy.gpus(), "rank {} outside the {} ranks of {}", rank,
              plan.strategy.gpus(), plan.strategy.name());
  // The expert-TP collectives sit on the TP stream; collectiveGroup gives that stream the TP group.
  if (plan.strategy.expertTp() != plan.strategy.tp) {
    EVSIM_THROW(InputError, "--etp {}: eventrun runs expert tensor parallelism equal to M={} only",
                plan.strategy.expertTp(), plan.strategy.tp);
  }
  return ProgramBuilder(plan, rank).build();
}

}  // namespace evsim

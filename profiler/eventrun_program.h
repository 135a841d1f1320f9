#pragma once
// Rank programs of eventrun: the ordered actions one rank executes in one training iteration,
// derived from the IterationPlan exactly as the modeler's timing engine orders them
// (modeler/timing_engine.cpp, device_events.cpp), so that measured and simulated timelines have the
// same events. Pure: no MPI. The executor (eventrun_executor.h) runs a program; new op kinds or
// schedules only change this builder.
//
// Per stage task (forward/backward of micro-batch i, in stageTaskOrder):
//   recv   the input: activation from stage s-1 (forward) or gradient from stage s+1 (backward);
//          not an event (waiting for input is idle time; the transfer is the sender's event)
//   ops    the stage's forward/backward op list: compute ops on the CPU kernels, collectives in
//          the group their stream names
//   send   the output: "send_activation" to stage s+1 / "send_gradient" to stage s-1
// then the gradient all-reduce over the DP group ("grad_allreduce"), or with dp_overlap the DDP
// buckets ("grad_bucket_allreduce"), each issued after the op of the last backward task that
// completes it and waited for before the optimizer ops ("adam_step").

#include <cstdint>
#include <string_view>
#include <vector>

#include "events/iteration_plan.h"
#include "events/op_list.h"
#include "events/rank_layout.h"

namespace evsim {

enum class ActionKind {
  kCompute,      // run the event's kernel
  kCollective,   // blocking all-reduce / reduce-scatter / all-gather in `group`
  kSend,         // P2P send of the event's message_bytes to `peer`
  kRecv,         // wait for the matching receive from `peer` (posted at the iteration start)
  kBucketStart,  // issue a DP gradient bucket's all-reduce in `group` without waiting
  kBucketWait,   // wait until every issued bucket has completed
};

struct Action {
  ActionKind kind = ActionKind::kCompute;
  Stream stream = Stream::kCompute;
  Phase phase = Phase::kForward;
  std::string_view name;  // op name as the simulator writes it (static storage)
  int event = -1;         // plan event index (-1 for kBucketWait)
  int layer = kEmbeddingLayer;
  int micro_batch = -1;  // -1 outside micro-batch tasks
  int64_t peer = -1;     // kSend / kRecv: world rank of the other side
  int tag = 0;           // kSend / kRecv: 2 * micro_batch (+1 for gradients)
  int group = -1;        // kCollective / kBucketStart: index into RankProgram::groups

  // Whether the action is a timeline event (receives and waits are idle time).
  bool recorded() const { return kind != ActionKind::kRecv && kind != ActionKind::kBucketWait; }
};

struct RankProgram {
  int64_t rank = 0;
  RankCoord coord;
  // Distinct communication groups of the program's collectives: ascending world ranks, this rank
  // included. Sorted, so every member creates its communicators in the same global order.
  std::vector<std::vector<int64_t>> groups;
  std::vector<Action> actions;

  int recordedCount() const;
};

// World ranks of the group a collective on `stream` runs in, for the rank at `coord`:
//   tp-comm  the M ranks of its TP group (same dp, pp)
//   dp-comm  the D ranks of its DP group (same tp, pp)
//   pp-comm  the P ranks of its pipeline (same tp, dp): the pair when P = 2
// Throws Error for the compute stream.
std::vector<int64_t> collectiveGroup(const IterationPlan& plan, const RankCoord& coord,
                                     Stream stream);

// Throws Error when `rank` is outside the strategy's world or the plan holds an op the executor
// cannot run (a P2P event inside a stage op list has no peer rule yet).
RankProgram buildRankProgram(const IterationPlan& plan, int64_t rank);

}  // namespace evsim

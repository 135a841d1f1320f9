#pragma once
// Rank programs of eventrun: the ordered actions one rank executes in one training iteration,
// derived from the IterationPlan exactly as the modeler's timing engine orders them
// (modeler/timing_engine.cpp, device_events.cpp), so that measured and simulated timelines have the
// same events. Pure: no MPI. The executor (eventrun_executor.h) runs a program; new op kinds or
// schedules only change this builder.
//
// Per task of the device's order in the task graph (plan/task_graph.h, the graph the timing
// engine schedules; chunk c is virtual stage k = c*P + s, whose op list carries that chunk's layer
// numbers):
//   recv   the input: activation from virtual stage k-1 (device (k-1)%P, forward) or gradient from
//          k+1 (device (k+1)%P, backward); not an event (waiting for input is idle time; the
//          transfer is the sender's event)
//   ops    the chunk's forward/backward op list (a split backward's weight_grad ops in its W task,
//          the rest in B): compute ops on the CPU kernels (recomputed forward
//          ops in a backward task with phase recompute), collectives in the group their stream
//          names (TP all-reduces, sequence-parallel reduce-scatter/all-gather, ZeRO-3 per-layer
//          gathers and scatters on dp-comm, MoE all-to-alls on ep-comm), CP ring exchanges
//          (cp-comm) in the CP group
//   send   the output: "send_activation" to k+1 / "send_gradient" to k-1
// then the gradient sync of each chunk, v-1 first, over the DP group (x CP; the routed experts'
// gradients after it over the expert-data-parallel group): "grad_allreduce" (ZeRO 0) or
// "grad_reduce_scatter" (ZeRO 1/2), or with dp_overlap the DDP buckets ("grad_bucket_allreduce" /
// "grad_bucket_reduce_scatter"), each issued after the op of the chunk's last gradient task (B, or
// W when split) that completes it and all waited for before the optimizers; then the chunks'
// optimizer ops
// ("adam_step"), v-1 first; then under ZeRO 1/2 the chunks' "param_allgather", v-1 first. This is
// modeler/device_events.cpp's order.
//
// P2P tags: boundary b (chunk b -> b+1), micro-batch i, direction d (0 activation, 1 gradient):
// tag = 2 * (b * m + i) + d, unique within an iteration; p2pTagBound() is one past the largest.

#include <cstdint>
#include <string_view>
#include <vector>

#include "plan/iteration_plan.h"
#include "ops/op_list.h"
#include "plan/rank_layout.h"

namespace evsim {

enum class ActionKind {
  kCompute,      // run the event's kernel
  kCollective,   // blocking all-reduce / reduce-scatter / all-gather in `group`
  kSend,         // P2P send of the event's message_bytes to `peer`
  kRecv,         // wait for the matching receive from `peer` (posted at the iteration start)
  kBucketStart,  // issue a DP gradient bucket's all-reduce in `group` without waiting
  kBucketWait,   // wait until every issued bucket has completed
  // Context parallelism's K/V ring step in `group` (the CP ranks, ascending): send the event's
  // message to the next member, receive one from the previous, both at once. eventrun runs it
  // just before the attention step it feeds (the simulator overlaps them).
  kRingExchange,
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
  int tag = 0;           // kSend / kRecv: 2 * (boundary * m + micro_batch) (+1 for gradients)
  int group = -1;        // kCollective / kBucketStart: index into RankProgram::groups
  int chunk = 0;         // the device's model chunk (0 unless interleaved)

  // Whether the action is a timeline event (receives and waits are idle time).
  bool recorded() const { return kind != ActionKind::kRecv && kind != ActionKind::kBucketWait; }
};

// When one action ran: steady_clock microseconds on the running rank's clock.
struct ActionTime {
  double start_us = 0;
  double end_us = 0;
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

// A kRingExchange's neighbours: the positions, within `group`'s members, of the next member (sent
// to) and the previous one (received from) around the ring. Both executors use it.
struct RingPeers {
  int next = 0;
  int previous = 0;
};
RingPeers ringPeers(const RankProgram& program, int group);

// One past the largest P2P tag any rank of `plan` uses: 2 * (P*v - 1) * m.
int64_t p2pTagBound(const IterationPlan& plan);

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

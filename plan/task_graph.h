#pragma once
// The task graph of one pipeline's iteration: every task (forward F, backward B, weight gradient W
// of one micro-batch of one model chunk) as a node, its inputs as explicit edges, and each
// device's order from the schedule (pipeline_schedule.h). The timing engine list-schedules it, the
// device events and eventrun's rank programs walk it, the memory model follows its live
// activations. Built once per (schedule, P, v, m); the same for every pipeline class.
//
// Chunk c of device s is virtual stage k = c*P + s (K = P*v). Edges:
//   F(k, i) <- F(k-1, i)  transfer: the activation over link k-1 (the sender's send_activation)
//   B(k, i) <- B(k+1, i)  transfer: the gradient over link k (the sender's send_gradient)
//   B(k, i) <- F(k, i)    same device: the activations it consumes
//   W(k, i) <- B(k, i)    same device (split schedules only): the output gradients W needs
// A task's send runs on its device right after it (Megatron's P2P blocks compute): F of k < K-1
// sends its activation over link k, B of k > 0 its gradient over link k-1; W sends nothing.
// Recomputation (Recompute::kFull / kSelective) stays inside B, as in Megatron: the recomputed
// forward ops head the B task's op list.
//
// Fused tasks (DualPipeV's F&B, Megatron's combined 1F1B; StageTask::overlapped): a head node
// followed in its device's order by the nodes marked overlapped, run as one task by the timing
// engine (timing_engine.h has the duration rule). The graph keeps them as separate nodes with their
// own edges, so the dependencies, sends and memory walk stay per task; buildTaskGraph checks that a
// fused task is one forward and the backward (with its W, for a whole backward) of another
// micro-batch, and that no member feeds another's input except a B its own W.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "plan/iteration_plan.h"
#include "plan/pipeline_schedule.h"

namespace evsim {

enum class Send : uint8_t { kNone, kActivation, kGradient };

// TaskGraph::send_codes: a send of chunk `chunk`'s task as one small number (kNone: 0).
inline int sendCode(Send send, int chunk) {
  return send == Send::kNone ? 0 : 1 + 2 * chunk + (send == Send::kGradient);
}
// The inverse for a code above 0: the chunk, and whether it is a gradient.
inline int sendCodeChunk(int code) { return (code - 1) / 2; }
inline bool sendCodeGradient(int code) { return ((code - 1) & 1) != 0; }

// The virtual stage a link's message reaches: an activation over link k goes to k+1, a gradient
// over link k to k (from k+1).
inline int linkReceiver(Send send, int link) { return send == Send::kActivation ? link + 1 : link; }

// A node's edges follow the list above: its transfer input, if any (at most one), first; the
// timing engine's lone-task path reads only that one (lone_tasks.h). In 4 bytes: node ids are
// below 2^30 (buildTaskGraph checks the task count).
struct TaskEdge {
  int from : 31 = -1;         // the producing node
  bool transfer : 1 = false;  // crosses devices: the input arrives when the producer's send ends
};

// A node's task: StageTask's fields in 8 bytes (a chunk is below kMaxChunksPerDevice, a phase one
// of three), read as a StageTask where one is wanted.
struct NodeTask {
  int micro_batch = 0;
  int16_t chunk = 0;
  Phase phase : 8 = Phase::kForward;
  bool overlapped = false;
  operator StageTask() const { return StageTask{phase, micro_batch, chunk, overlapped}; }
  bool operator==(const NodeTask&) const = default;
};

// One task, in 20 bytes (issue 34: a search's largest simulations time 10^5 tasks, two at once).
// What follows from its id is not stored: its device and its position in the device's order
// (TaskGraph::deviceOf, positionOf: ids follow device order), and its send's link (linkOf).
struct TaskNode {
  NodeTask task;
  int virtual_stage = 0;  // k = chunk * P + device
  int first_edge = 0;
  Send send = Send::kNone;
  uint8_t fused_size = 1;  // on a fused task's head: its node count (1: not fused); 0 on the others
  uint8_t edge_count = 0;  // at most two (the list above)
};
// The sizes a search's memory estimate counts (modeler/pruned_search.cpp, simulationBytes).
static_assert(sizeof(TaskEdge) == 4 && sizeof(NodeTask) == 8 && sizeof(TaskNode) == 20);

// The link a node's send crosses: kActivation link k (k -> k+1), kGradient link k-1 (k -> k-1);
// -1 for none.
inline int linkOf(const TaskNode& node) {
  return node.send == Send::kActivation ? node.virtual_stage
         : node.send == Send::kGradient ? node.virtual_stage - 1
                                        : -1;
}

struct TaskGraph {
  int devices = 1;            // P
  int chunks = 1;             // v
  int64_t micro_batches = 1;  // m
  bool split_backward = false;
  bool fused = false;  // whether some task is fused (TaskNode::fused_size > 1 somewhere)
  // Views into `storage`, which every copy of the graph shares: buildTaskGraph keeps the graphs of
  // recent shapes, so a search's candidates that share (schedule, P, v, m) share one graph, and a
  // copy costs a handle, not the tasks.
  // Node ids follow device order: device s's task at position p of its order is node
  // s * tasks_per_device + p (nodeAt), every device running as many tasks.
  int tasks_per_device = 0;
  std::span<const TaskNode> nodes;
  std::span<const TaskEdge> edges;
  // Per node, its send as a small code: 0 for none, else sendCode(send, chunk). Within one device
  // a code names one link and direction (the chunk's virtual stage fixes the link), so the link
  // report and link sharing's check scan a device's bytes instead of its nodes (issue 34 item 3).
  std::span<const uint8_t> send_codes;

  struct Storage {
    std::vector<TaskNode> nodes;
    std::vector<TaskEdge> edges;
    std::vector<int> peak_in_flight;  // per device, peakInFlight's walk (empty: not walked)
    std::vector<uint8_t> send_codes;
  };
  std::shared_ptr<const Storage> storage;

  std::span<const TaskEdge> inputs(int node) const {
    const TaskNode& n = nodes[node];
    return edges.subspan(static_cast<size_t>(n.first_edge), static_cast<size_t>(n.edge_count));
  }
  // The node device `device` runs at `position` of its order, and the inverse.
  int nodeAt(int device, size_t position) const {
    return device * tasks_per_device + static_cast<int>(position);
  }
  int deviceOf(int node) const { return node / tasks_per_device; }
  size_t positionOf(int node) const { return static_cast<size_t>(node % tasks_per_device); }
  // Device s's send codes by position in its order.
  std::span<const uint8_t> deviceSendCodes(int device) const {
    return send_codes.subspan(static_cast<size_t>(nodeAt(device, 0)),
                              static_cast<size_t>(tasks_per_device));
  }
  int virtualStages() const { return devices * chunks; }
};

// Throws Error when the schedule's orders miss or repeat a task, or place a task before a
// same-device input (an internal bug). Graphs of recent shapes are kept (thread-safe, up to about
// 2^18 tasks in all; a schedule file's are not, as its orders may change in a process).
// `group`: the interleaved schedule's N (PipelineShape::group; 0: P). `fuse_moe_a2a`
// (--overlap-moe-expert-parallel-comm, Megatron's combined 1F1B): every forward followed in its
// device's order by the backward of another micro-batch or chunk runs fused with it, as a
// DualPipeV F&B task.
TaskGraph buildTaskGraph(Schedule schedule, int devices, int chunks, int64_t micro_batches,
                         int group = 0, bool fuse_moe_a2a = false);
// The graph of `plan`'s strategy.
TaskGraph buildTaskGraph(const IterationPlan& plan);

// Which task of a split backward runs `op`: ops marked weight_grad run in W, the rest in B; without
// a split B runs them all.
inline bool runsIn(const OpInstance& op, Phase task_phase, bool split_backward) {
  if (!split_backward) return task_phase == Phase::kBackward;
  return op.weight_grad == (task_phase == Phase::kWeightGrad);
}

// A DDP bucket closes after backward op `ready_after_op`; it is issued in the chunk's last
// gradient task (the last B, or the last W when split) after the op this returns, or before the
// task's first op when -1 (a split bucket whose ops include no weight-gradient op).
int bucketIssueOp(const OpList& backward, int ready_after_op, bool split_backward);

// Activations along one device's order: each F of chunk c holds chunk_bytes[c]; B frees them but
// keeps chunk_held_bytes[c] (what W reads: the wgrad GEMMs' inputs and output gradients; 0 without
// a split) until W. in_flight counts micro-batch chunks held (F +1, the freeing task -1).
struct ActivationPeak {
  int in_flight = 0;
  int64_t bytes = 0;
};
ActivationPeak peakActivations(const std::vector<StageTask>& order,
                               const std::vector<int64_t>& chunk_bytes,
                               const std::vector<int64_t>& chunk_held_bytes);
// The same walk reduced to what its peak can be for any chunk sizes: the states (per chunk, the
// micro-batches whose activations are held, then those whose W inputs are held) that no other
// state of the walk matches or exceeds in every count. Held bytes are a sum of counts times
// non-negative sizes, so their peak is at one of these: a search keeps them per (schedule, shape)
// instead of walking the order for every candidate (scheduleActivationStates).
struct ActivationStates {
  int chunks = 0;
  int in_flight = 0;        // the walk's peak in_flight
  std::vector<int> counts;  // per state, 2 x chunks counts
};
ActivationStates activationStates(const std::vector<StageTask>& order, int chunks);
// activationStates of an order of one chunk with whole backwards whose walk peaks at `peak` micro-
// batches in flight: a state is (in flight, 0), so the frontier is that one state.
ActivationStates oneChunkStates(int peak);
// peakActivations(order, ...) from activationStates(order, chunk_bytes.size()): the same result.
ActivationPeak peakActivations(const ActivationStates& states,
                               const std::vector<int64_t>& chunk_bytes,
                               const std::vector<int64_t>& chunk_held_bytes);
// The same walk's in_flight along `device`'s order in `graph`.
int peakInFlight(const TaskGraph& graph, int device);

}  // namespace evsim

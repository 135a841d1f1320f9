#pragma once
// The dependency-driven timing of one training iteration (DistSim's Algorithm 1), on costs alone:
// a list scheduler over the pipeline's task graph (task_graph.h).
//
// Each pipeline (a class of identical DP replicas) is P stage devices running K = P*v virtual
// stages (model chunks; v = 1 without interleaving): chunk c of device s is virtual stage
// k = c*P + s. Each device runs its tasks in the schedule's order; a task starts when its device is
// free and every input edge of the graph is satisfied: a transfer edge when the producer's send
// has ended, a same-device edge when the producer has ended. Sending occupies the sender's device
// right after the producing task (Megatron's P2P blocks compute) and the data arrives when the
// send ends. Nothing here knows a schedule: the graph carries it.
//
// Data parallelism, per device: each chunk has its own gradient sync (one DDP per chunk). After
// the device's last task the chunks' gradients are all-reduced over D one after another (chunk
// v-1 first, the order in which their last backwards finish), each starting no earlier than every
// replica's device has finished (the collective waits for its slowest member); then the chunks'
// optimizer steps run one after another as one optimizer interval. Under ZeRO 1/2 the all-reduce
// is a reduce-scatter, and after the optimizer the chunks' updated parameter shards are
// all-gathered (one interval, v-1 first, starting when the slowest replica is ready). With
// overlap, a chunk's gradient buckets are all-reduced on the device's DP stream as soon as that
// chunk's last gradient task (its last B, or its last W when the backward is split) has produced
// them, one after another (chunks in the same order); the optimizer waits for the last. All times
// are microseconds from the iteration start.
//
// Overlap slowdown (overlap_slowdown.h): a task that runs while its device's DP buckets are in
// flight is stretched by that rule (its run, compute and TP communication together, is the work),
// by each bucket's factor. The list scheduler places a chunk's buckets on the device's DP stream
// when it places the chunk's last gradient task, at the task's start plus each bucket's ready
// offset's work (the offset scaled by a straggler's factor, slowed by the buckets already in
// flight), so that task and every later one on the device see them. With several pipeline classes
// the buckets then wait for the slowest replica (below); the slowdown uses each class's own bucket
// times.
//
// Overlapped parameter gather (--overlap-param-gather, ZeRO 1/2; Megatron's forward pre-hooks):
// the all-gather of the updated parameters leaves the end of the step and runs, bucket by bucket,
// before and beside the first forward task of each chunk in the next iteration (one iteration's
// timeline starts with it). On each device's DP stream the buckets run back to back in forward
// order (the host, ahead of the GPU, dispatches bucket i+1 when it reaches bucket i's first
// module), dispatched at that task's start with one chunk per device (the first module's
// pre-hook: the first bucket is exposed on every stage), and at the iteration's start with
// several (Megatron's align_param_gather, the default with interleaving), chunk after chunk.
// FSDP under PP (torchtitan) gathers each fully_shard unit the same way, one bucket per unit,
// dispatched at each chunk's own first forward (TimingInput::align_param_gather false).
// The forward reaches bucket i's needed offset no earlier than the bucket's end:
//   t_0 = max(T, A_0);  t_i = max(t_{i-1} + (o_i - o_{i-1}), A_i);  end = t_n + (F - o_n),
// with its work slowed beside the buckets in flight (overlap_slowdown.h). What the waits add is
// exposed DP communication (StageTimeline::param_gather_wait_us), the slowdown overlap slowdown.
// Each pipeline class times its own gathers.
//
// ZeRO-2 with --grad-reduce-sync step (Strategy::grad_reduce_sync; the Llama 3 paper's
// "asynchronously reducing gradients"): each chunk's bucket reductions (StageCost::
// micro_batch_buckets) leave the backward task and are issued on the device's DP stream by every
// micro-batch's gradient task (its B, or its W when the backward is split), each when the task
// reaches its ready offset (slowed by the reductions in flight, as above), one after another
// in issue order: start = max(stream free, ready), end = start + its time. Nothing waits for them
// but the optimizer step (it starts at max(pipeline end, the stream's last end)), so they run
// beside later micro-batches' forwards and backwards (and slow them by their factor, as buckets
// do, and share links with their sends through link sharing). With a queue bound K
// (TimingInput::grad_reduce_queue > 0) a device whose task leaves more than K reductions pending
// when it ends (with its send) waits for the oldest until K remain: the next task starts no
// earlier than the end of reduction n-K-1 of the n issued (StageTimeline::grad_reduce_wait_us).
// Each class queues its own; the DP collectives then wait for the slowest replica (below): the
// device's grad_sync intervals are its reductions in issue order, each starting at
// max(stream free, its latest ready over the classes).
//
// Link sharing (modeler/link_flows.h) re-runs this timing with what shared links added to each
// send, DP collective and task (its collectives across nodes) (TimingInput's stretch fields): a
// send, collective or task ends that much later and everything after it follows. The overlap
// slowdown above sees each bucket in flight for its stretched time (standalone plus what sharing
// added), so compute slows for as long as the two really overlap, and only then.

// Fused tasks (task_graph.h; DualPipeV's F&B): the forward of micro-batch i and the backward of
// micro-batch j (with its W when the backward is whole) on one device run as one task on two
// streams, as DualPipe's overlapped_forward_backward does: the compute stream runs both tasks'
// compute (and TP communication), the communication stream their expert all-to-alls, each
// micro-batch's all-to-all beside the other's compute. The fused task lasts
//   max(sum of (task - its all-to-all), sum of all-to-alls)
// (times a straggler's factor, plus the members' jitter), not F + B: with no all-to-all it is
// F + B (+ W), with the all-to-all at most half of each task it is the compute alone. It starts
// when the device is free and every member's inputs have arrived; every member's run is that
// interval. Its P2P sends (F's activation, B's gradient) go out on the communication stream when
// it ends (DualPipe sends asynchronously): each arrives send time later, but the device goes on
// at once. Outside fused tasks a send still holds the device (the rule above).
// The compute of a fused task slows while the all-to-alls are in flight, by the overlap slowdown
// rule (overlap_slowdown.h) with the all-to-alls' factor f (StageCost::a2a_compute_slowdown):
// both start together, so the body lasts fusedTaskUs(C, A, f) = max(A, C + A (1 - 1/f)) when
// f C > A, and A when the compute fits inside the all-to-alls even slowed; the excess over
// max(C, A) is the task's overlap slowdown. Megatron's --overlap-moe-expert-parallel-comm fuses
// the interleaved schedule's steady-state F and B by the same rule (TimingInput::fuse_moe_a2a).

#include <array>
#include <cstdint>
#include <vector>

#include "plan/strategy.h"
#include "plan/task_graph.h"

namespace evsim {

// --overlap-param-gather: one bucket of the chunk's parameter all-gather, deferred from the end of
// the step to the chunk's first forward (below).
struct ParamGatherCost {
  double needed_offset_us = 0;  // where in the forward its parameters are first used
  double allgather_us = 0;
  double compute_slowdown = 1;  // of the forward beside it (overlap_slowdown.h)
};

struct BucketCost {
  double ready_offset_us = 0;  // from the start of the chunk's last gradient task (B, or W)
  double allreduce_us = 0;
  double compute_slowdown = 1;  // factor of compute beside it (overlap_slowdown.h); 1: none
};

// One per virtual stage (model chunk).
struct StageCost {
  double forward_us = 0;            // one micro-batch, compute + TP communication
  double backward_us = 0;           // B: the whole backward, or its input-gradient part when split
  double grad_allreduce_us = 0;     // without overlap (0 when D == 1)
  std::vector<BucketCost> buckets;  // with overlap
  // --grad-reduce-sync step (ZeRO-2): the chunk's bucket reductions, issued by every micro-batch's
  // gradient task (ready offsets from that task's start), in issue order.
  std::vector<BucketCost> micro_batch_buckets;
  double optimizer_us = 0;
  // ZeRO 1/2: the parameter all-gather after the optimizer step (0: none). grad_allreduce_us and
  // the buckets then hold reduce-scatters.
  double param_allgather_us = 0;
  double weight_grad_us = 0;  // W: the weight-gradient ops when the schedule splits (else 0)
  // --overlap-param-gather: the buckets in forward order (param_allgather_us is then 0).
  std::vector<ParamGatherCost> param_gathers;
  // The expert-parallel all-to-all time inside forward_us and backward_us (B): what the other
  // micro-batch of a fused task can hide (below). 0 without expert parallelism.
  double forward_overlap_us = 0;
  double backward_overlap_us = 0;
  // The factor by which compute beside those all-to-alls slows (overlap_slowdown.h: the network's
  // when the EP group crosses nodes, NVLink's inside one); 1: none.
  double a2a_compute_slowdown = 1;
};

struct PipelineCost {
  std::vector<double> send_forward_us;   // virtual stage k -> k+1 activation, size K-1
  std::vector<double> send_backward_us;  // virtual stage k+1 -> k gradient, size K-1
  // Stragglers: each device stage's compute slowdown in this class (size P, or empty for none).
  // Its tasks (compute and the TP collectives that wait on the slow rank) and its optimizer step
  // take this many times longer; sends and DP collectives do not.
  std::vector<double> stage_slowdown;
};

// Per-op random slowdowns (--jitter): every compute op of every task takes t (1 + sigma |z|) with
// z ~ N(0, 1) drawn per op (a half-normal: ops run slower than their profiled time, never faster).
// A task's extra time is the sum over its compute ops. Deterministic for a seed: the draws follow
// the list scheduler's placement order, one generator per pipeline class.
struct TaskJitter {
  double sigma = 0;  // 0: off
  uint64_t seed = 0;
  // Per virtual stage, per task phase (forward, backward B, weight gradient W): the compute ops'
  // times of one task.
  std::vector<std::array<std::vector<double>, 3>> op_us;
};

struct TimingInput {
  Schedule schedule = Schedule::kDapple;
  int64_t micro_batches = 1;
  int virtual_stages = 1;               // v; > 1 only with Schedule::kInterleaved
  int microbatch_group = 0;             // N of the interleaved schedule (0: P)
  // --overlap-moe-expert-parallel-comm: the steady state's F and B fused (plan/task_graph.h).
  bool fuse_moe_a2a = false;
  // Deferred parameter gathers of several chunks dispatched together at the iteration's start
  // (Megatron's align_param_gather); false: each chunk's at its first forward (FSDP2's pre-hooks).
  bool align_param_gather = true;
  std::vector<StageCost> stages;        // per virtual stage, K = P*v
  std::vector<PipelineCost> pipelines;  // at least one
  bool dp_overlap = false;
  // --grad-reduce-sync step: the stages' micro_batch_buckets queue on the DP stream (above);
  // grad_reduce_queue > 0 bounds the reductions pending when a task ends (0: no bound).
  bool grad_reduce_at_step = false;
  int grad_reduce_queue = 0;
  TaskJitter jitter;
  // Link sharing (modeler/link_flows.h): what transfers sharing its links added to each transfer,
  // which ends that much later (each empty: none). Sends: per pipeline class, per device stage, per
  // position in the device's order. The DP collectives (shared by every class): per device stage,
  // per grad_sync interval in the order they are placed, and the parameter all-gather.
  std::vector<std::vector<std::vector<double>>> send_stretch_us;
  // Tasks (per class, device stage, position): what sharing added to the collectives inside each
  // (TP, CP, EP across nodes; ZeRO-3 gathers), which end the task's run that much later.
  std::vector<std::vector<std::vector<double>>> task_stretch_us;
  std::vector<std::vector<double>> grad_sync_stretch_us;
  std::vector<double> param_allgather_stretch_us;
};

struct Interval {
  double start_us = 0;
  double end_us = 0;
  double duration() const { return end_us - start_us; }
};

// A task's times, in 24 bytes (issue 34: a search's largest simulations time 10^5 tasks, two at
// once). What it is (phase, micro-batch, chunk) is its node's (StageTimeline::node), and its send
// starts when its run ends: no copies here. When its input arrived is its transfer inputs'
// latest send end (the graph's edges); what DP buckets or gathers beside it added to its run is
// StageTimeline::overlap_slowdown_us, as few tasks have any.
struct TaskTiming {
  Interval run;            // compute + TP communication
  double send_end_us = 0;  // its P2P send after the task runs from run.end_us to here (empty
                           // when there is no next/previous stage)
  Interval send() const { return Interval{run.end_us, send_end_us}; }
};
static_assert(sizeof(TaskTiming) == 24);  // simulationBytes (modeler/pruned_search.cpp) counts it

// One per device stage (all its chunks).
struct StageTimeline {
  std::vector<TaskTiming> tasks;  // in schedule order
  int first_node = 0;             // the graph's node of tasks[0]; tasks[i]'s is first_node + i
  // Per task, what DP buckets in flight or deferred parameter gathers beside it added to its run
  // (a fused task's on its head), or empty where no task of the device has any.
  std::vector<double> overlap_slowdown_us;
  int node(size_t i) const { return first_node + static_cast<int>(i); }
  double overlapSlowdownUs(size_t i) const {
    return overlap_slowdown_us.empty() ? 0.0 : overlap_slowdown_us[i];
  }
  double pipeline_end_us = 0;     // end of the last task and its send
  // Per chunk (v-1 first) one all-reduce / reduce-scatter or one per bucket (empty when D == 1).
  std::vector<Interval> grad_sync;
  std::vector<int> grad_sync_chunk;  // the chunk of each grad_sync interval
  // --grad-reduce-sync step: per grad_sync interval its bucket in the chunk's
  // micro_batch_buckets (empty otherwise); per reduction, in issue order, when this class had it
  // ready; and what waiting for the queue bound added to the device's tasks.
  std::vector<int> grad_sync_bucket;
  std::vector<double> reduction_ready_us;
  double grad_reduce_wait_us = 0;
  Interval optimizer;                // all chunks' optimizer steps, v-1 first
  Interval param_allgather;          // ZeRO 1/2: all chunks' parameter all-gathers, v-1 first
  // --overlap-param-gather instead: each chunk's buckets (chunks in the order of their first
  // forward, buckets in forward order), and what waiting for them added to those forwards.
  std::vector<Interval> param_gathers;
  std::vector<int> param_gather_chunk;  // the chunk of each param_gathers interval
  double param_gather_wait_us = 0;
  int peak_activations = 0;          // micro-batch chunk activations held at once (graph walk)
  double busy_in_pipeline_us = 0;    // task runs + sends
  // Overlap slowdown only (else empty): per chunk, when each DP bucket was ready in this class.
  std::vector<std::vector<double>> bucket_ready_us;
};

struct PipelineTimeline {
  std::vector<StageTimeline> stages;  // per device stage, P
  double flush_us = 0;  // when the pipeline's last task ended (stage 0's last backward)
};

struct IterationTimeline {
  TaskGraph graph;  // the schedule's task graph, the same for every pipeline class
  std::vector<PipelineTimeline> pipelines;
  double iteration_us = 0;
};

// A fused task's body: C of compute beside A of all-to-alls slowing it by `factor` (above).
double fusedTaskUs(double compute_us, double comm_us, double factor);

// The task graph of the input's schedule and shape (buildTaskGraph), which computeTimeline times.
TaskGraph taskGraphOf(const TimingInput& input);
// Throws Error if the input is inconsistent or the graph deadlocks (an internal bug).
IterationTimeline computeTimeline(const TimingInput& input);
// The same on `graph`, buildTaskGraph of the input's schedule and shape (a timing of the same
// shape's IterationTimeline::graph): link sharing's second timing does not build it again.
IterationTimeline computeTimeline(const TimingInput& input, TaskGraph graph);

}  // namespace evsim

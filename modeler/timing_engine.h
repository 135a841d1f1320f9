#pragma once
// The dependency-driven timing of one training iteration (DistSim's Algorithm 1), on costs alone.
//
// Each pipeline (a class of identical DP replicas) is P stage devices running K = P*v virtual
// stages (model chunks; v = 1 without interleaving): chunk c of device s is virtual stage
// k = c*P + s. A task (forward or backward of one micro-batch of one chunk) starts when its device
// is free and its input has arrived: the activation from virtual stage k-1's forward, the gradient
// from virtual stage k+1's backward. Sending occupies the sender's device right after the
// producing task (Megatron's P2P blocks compute) and the data arrives when the send ends.
//
// Data parallelism, per device: each chunk has its own gradient sync (one DDP per chunk). After
// the device's last task the chunks' gradients are all-reduced over D one after another (chunk
// v-1 first, the order in which their last backwards finish), each starting no earlier than every
// replica's device has finished (the collective waits for its slowest member); then the chunks'
// optimizer steps run one after another as one optimizer interval. Under ZeRO 1/2 the all-reduce
// is a reduce-scatter, and after the optimizer the chunks' updated parameter shards are
// all-gathered (one interval, v-1 first, starting when the slowest replica is ready). With
// overlap, a chunk's gradient buckets are all-reduced on the device's DP stream as soon as that
// chunk's last backward has produced them, one after another (chunks in the same order); the
// optimizer waits for the last. All times are microseconds from the iteration start.

#include <cstdint>
#include <vector>

#include "events/strategy.h"
#include "modeler/schedule.h"

namespace evsim {

struct BucketCost {
  double ready_offset_us = 0;  // from the start of the stage's last backward task
  double allreduce_us = 0;
};

// One per virtual stage (model chunk).
struct StageCost {
  double forward_us = 0;  // one micro-batch, compute + TP communication
  double backward_us = 0;
  double grad_allreduce_us = 0;     // without overlap (0 when D == 1)
  std::vector<BucketCost> buckets;  // with overlap
  double optimizer_us = 0;
  // ZeRO 1/2: the parameter all-gather after the optimizer step (0: none). grad_allreduce_us and
  // the buckets then hold reduce-scatters.
  double param_allgather_us = 0;
};

struct PipelineCost {
  std::vector<double> send_forward_us;   // virtual stage k -> k+1 activation, size K-1
  std::vector<double> send_backward_us;  // virtual stage k+1 -> k gradient, size K-1
};

struct TimingInput {
  Schedule schedule = Schedule::kDapple;
  int64_t micro_batches = 1;
  int virtual_stages = 1;               // v; > 1 only with Schedule::kInterleaved
  std::vector<StageCost> stages;        // per virtual stage, K = P*v
  std::vector<PipelineCost> pipelines;  // at least one
  bool dp_overlap = false;
};

struct Interval {
  double start_us = 0;
  double end_us = 0;
  double duration() const { return end_us - start_us; }
};

struct TaskTiming {
  StageTask task;
  Interval run;   // compute + TP communication
  Interval send;  // P2P send after the task (empty when there is no next/previous stage)
  double input_ready_us = 0;  // when its input arrived (0 for inputs that need no transfer)
};

// One per device stage (all its chunks).
struct StageTimeline {
  std::vector<TaskTiming> tasks;  // in schedule order
  double pipeline_end_us = 0;     // end of the last task and its send
  // Per chunk (v-1 first) one all-reduce / reduce-scatter or one per bucket (empty when D == 1).
  std::vector<Interval> grad_sync;
  std::vector<int> grad_sync_chunk;  // the chunk of each grad_sync interval
  Interval optimizer;                // all chunks' optimizer steps, v-1 first
  Interval param_allgather;          // ZeRO 1/2: all chunks' parameter all-gathers, v-1 first
  int peak_activations = 0;          // micro-batch chunk activations held at once
  double busy_in_pipeline_us = 0;    // task runs + sends
};

struct PipelineTimeline {
  std::vector<StageTimeline> stages;  // per device stage, P
  double flush_us = 0;  // when the pipeline's last task ended (stage 0's last backward)
};

struct IterationTimeline {
  std::vector<PipelineTimeline> pipelines;
  double iteration_us = 0;
};

// Throws Error if the input is inconsistent or a schedule deadlocks (an internal bug).
IterationTimeline computeTimeline(const TimingInput& input);

}  // namespace evsim

#pragma once
// The dependency-driven timing of one training iteration (DistSim's Algorithm 1), on costs alone.
//
// Each pipeline (a class of identical DP replicas) is P stage devices. A stage task (forward or
// backward of one micro-batch) starts when its device is free and its input has arrived: the
// activation from stage s-1's forward, the gradient from stage s+1's backward. Sending occupies the
// sender's device right after the producing task (Megatron's P2P blocks compute) and the data
// arrives when the send ends. After a stage's last task, its gradients are all-reduced over D
// (starting when every replica's stage has finished: the collective waits for its slowest member),
// then the optimizer steps (under ZeRO 1/2 the all-reduce is a reduce-scatter, and the updated
// parameter shards are all-gathered after the step, again when the slowest replica is ready). With
// overlap, gradient buckets are all-reduced on the DP stream as
// soon as the last backward has produced them, one after another; the optimizer waits for the last.
// All times are microseconds from the iteration start.

#include <cstdint>
#include <vector>

#include "events/strategy.h"
#include "modeler/schedule.h"

namespace evsim {

struct BucketCost {
  double ready_offset_us = 0;  // from the start of the stage's last backward task
  double allreduce_us = 0;
};

struct StageCost {
  double forward_us = 0;   // one micro-batch, compute + TP communication
  double backward_us = 0;
  double grad_allreduce_us = 0;      // without overlap (0 when D == 1)
  std::vector<BucketCost> buckets;   // with overlap
  double optimizer_us = 0;
  // ZeRO 1/2: the parameter all-gather after the optimizer step (0: none). grad_allreduce_us and
  // the buckets then hold reduce-scatters.
  double param_allgather_us = 0;
};

struct PipelineCost {
  std::vector<double> send_forward_us;   // stage s -> s+1 activation, size P-1
  std::vector<double> send_backward_us;  // stage s+1 -> s gradient, size P-1
};

struct TimingInput {
  Schedule schedule = Schedule::kDapple;
  int64_t micro_batches = 1;
  std::vector<StageCost> stages;
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
  Interval run;             // compute + TP communication
  Interval send;            // P2P send after the task (empty when there is no next/previous stage)
  double input_ready_us = 0;  // when its input arrived (0 for inputs that need no transfer)
};

struct StageTimeline {
  std::vector<TaskTiming> tasks;  // in schedule order
  double pipeline_end_us = 0;     // end of the last task and its send
  std::vector<Interval> grad_sync;  // one all-reduce, or one per bucket (empty when D == 1)
  Interval optimizer;
  Interval param_allgather;  // ZeRO 1/2, after the optimizer (empty otherwise)
  int peak_activations = 0;
  double busy_in_pipeline_us = 0;  // task runs + sends
};

struct PipelineTimeline {
  std::vector<StageTimeline> stages;
  double flush_us = 0;  // when the pipeline's last task ended (stage 0's last backward)
};

struct IterationTimeline {
  std::vector<PipelineTimeline> pipelines;
  double iteration_us = 0;
};

// Throws Error if the input is inconsistent or a schedule deadlocks (an internal bug).
IterationTimeline computeTimeline(const TimingInput& input);

}  // namespace evsim

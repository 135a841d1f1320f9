#pragma once
// One simulated iteration: the plan (what runs), the cost of every event (how long, and where that
// figure came from), the timeline of every distinct device, and the metrics users read.
//
// Hierarchy (DistSim): the M TP ranks of a stage run the same op list in lockstep (model level);
// device stages run micro-batch tasks of their model chunks (one chunk per device unless
// interleaved) by the schedule (pipeline level); DP replicas with the same
// transfer placements form one pipeline class simulated once (data level). Per-rank timelines are
// expanded only when written out.

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "modeler/cost_model.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"

namespace evsim {

// Where each op of a virtual stage's (chunk's) forward/backward list starts within its task.
struct StageOpOffsets {
  std::vector<double> forward_start_us;  // per op, from the task start
  // Per backward op, from the start of the task that runs it (B, or W for weight_grad ops when the
  // schedule splits the backward).
  std::vector<double> backward_start_us;
  // The time the overlap slowdown adds to one micro-batch's forward task and to its backward (B
  // and W together): compute slowed beside the task's own transfers (overlap_slowdown.h).
  double forward_slowdown_us = 0;
  double backward_slowdown_us = 0;
};

// What link sharing (modeler/link_flows.h) added to one device's in-task collectives across
// nodes over the iteration, per kind.
struct TaskLinkStretch {
  double tp_us = 0, cp_us = 0, ep_us = 0, zero3_us = 0;  // what the tasks grew by, per kind
  // A CP exchange's stretch that the attention step beside it hid (communication time, not
  // exposed), and what the longer exchanges added to the overlap slowdown (stretched_task.h).
  double cp_hidden_us = 0, slowdown_us = 0;
};

struct DeviceMetrics {
  double compute_us = 0;           // including overlap_slowdown_us
  double overlap_slowdown_us = 0;  // what the overlap slowdown adds to tasks (overlap_slowdown.h)
  double tp_comm_us = 0;
  // The part of tp_comm_us the GEMMs beside it do not hide (--tp-comm-overlap; else all of it).
  double exposed_tp_comm_us = 0;
  double pp_comm_us = 0;
  double dp_comm_us = 0;          // gradient all-reduce time (may overlap compute)
  double exposed_dp_comm_us = 0;  // the part that does not overlap compute
  // ZeRO's parameter gathers and gradient scatters (ZeRO-3 inside the tasks, ZeRO 1/2's gather
  // after the optimizer), the part the device waits for: ZeRO-3's prefetched transfers beside
  // layers count what outlasts them, and with --overlap-param-gather ZeRO 1/2's gathers what the
  // forwards waited for. Part of exposed_dp_comm_us (their whole time is in dp_comm_us).
  double zero_comm_us = 0;
  double cp_comm_us = 0;          // context parallelism's K/V ring exchanges (overlap attention)
  double exposed_cp_comm_us = 0;  // the part that outlasts the attention steps
  // Expert parallelism's token all-to-alls, the part the device waits for: DeepEP's two hops
  // count as the longer, and fused tasks (DualPipeV, --overlap-moe-expert-parallel-comm) leave out
  // what the compute beside them hides. Unlike tp/cp/dp there is no separate total.
  double ep_comm_us = 0;
  double offload_us = 0;  // --offload's host stream: activation copies, the optimizer's host step
  double exposed_offload_us = 0;  // the part no layer hides (the optimizer's host step: all of it)
  double idle_us = 0;
  double bubble_fraction = 0;  // idle share of the pipeline phase (up to the flush)
  double utilization = 0;      // compute / iteration time
};

// Per device stage (pp coordinate), over all its chunks.
struct StageSummary {
  int stage = 0;
  int num_layers = 0;    // sum over the device's chunks
  DeviceMetrics device;  // averaged over the stage's pipeline classes
  int peak_activations = 0;
};

// Model FLOP utilisation against one named peak (MFU always says which peak it divides by).
struct MfuFigure {
  DType dtype = DType::kBf16;  // the peak's dtype
  double peak_tflops = 0;      // the device's datasheet dense peak for it
  double mfu = 0;              // model FLOP/s per GPU / that peak
};

// Model FLOP/s per GPU against the peak of the dtype the model's GEMMs run in (fp8 with `fp8:
// true`) first and, when that differs, the model dtype's (bf16) peak as well: FP8 runs report
// both, as NVIDIA does for its FP8 recipes.
std::vector<MfuFigure> mfuFigures(const DeviceSpec& device, const ModelConfig& model,
                                  double flops_per_gpu_per_s);
// "41.2% of 989 TFLOP/s bf16" (and ", 20.6% of 1979 TFLOP/s fp8, ..." for several).
std::string mfuText(const std::vector<MfuFigure>& figures);

struct SimulationSummary {
  double iteration_us = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_flops = 0;  // per iteration, all devices: GEMMs and attention (countsModelFlops),
                           // causal attention halved, recomputed ops excluded
  double flops_per_gpu_per_s = 0;
  double mfu = 0;  // against the peak of the GEMM dtype (mfu_by_peak.front())
  std::vector<MfuFigure> mfu_by_peak;
  double bubble_fraction = 0;                         // mean over devices
  DeviceMetrics min_device, mean_device, max_device;  // field-wise over devices
  std::vector<StageSummary> stages;
  int critical_stage = 0;                                   // the stage with the most busy time
  std::array<double, kProvenanceCount> provenance_share{};  // of all op time over all devices
};

struct Simulation {
  IterationPlan plan;
  std::vector<EventCost> costs;  // by event index
  TimingInput input;
  IterationTimeline timeline;
  std::vector<StageOpOffsets> offsets;  // per virtual stage
  // Per pipeline class and device stage, what link sharing added to the collectives inside its
  // tasks (modeler/link_flows.h; empty when sharing did not re-time).
  std::vector<std::vector<TaskLinkStretch>> task_link_stretch;
  SimulationSummary summary;

  double costUs(int event) const { return costs[event].time_us; }
};

// The timing engine's input for `plan` at `costs` (one per plan event), and where each op starts
// within its task (per virtual stage, into `offsets`). simulate() runs it; a fit that only needs
// the iteration time calls it with computeTimeline() directly, without copying the plan.
TimingInput timingInput(const IterationPlan& plan, const std::vector<EventCost>& costs,
                        std::vector<StageOpOffsets>& offsets);

// Runs the timing and metrics. `costs` has one entry per plan event. `stage_slowdown`, when given,
// holds per pipeline class of the plan each device stage's compute slowdown (stragglers.h:
// splitSlowReplicas); task times, their ops and the optimizer step scale by it.
Simulation simulate(IterationPlan plan, std::vector<EventCost> costs,
                    std::vector<std::vector<double>> stage_slowdown = {});

// simulate(), unless the timeline before link sharing already ends after `limit_us`: then nullopt,
// with that iteration time in `unshared_us` (else the full simulation's time before sharing).
// Sharing only stretches transfers and the tasks around them (every stretch >= 0, link_flows.h)
// and the timing engine's times only grow with its durations (fixed orders and edges), so the
// full iteration time is at least `unshared_us`: a search that needs only times up to `limit_us`
// skips the sharing pass, most of the simulation's cost under context parallelism across nodes.
std::optional<Simulation> simulateWithin(IterationPlan plan, std::vector<EventCost> costs,
                                         double limit_us, double& unshared_us);

// The compute slowdown of device stage `stage` in pipeline class `pipeline` (1 without
// stragglers).
double stageSlowdown(const Simulation& sim, int pipeline, int stage);

// Metrics of one device stage (all its chunks) of one pipeline class.
DeviceMetrics deviceMetrics(const Simulation& sim, int pipeline, int stage);

}  // namespace evsim

#pragma once
// Pipeline schedules as data: a schedule is the order in which each device runs its micro-batch
// tasks, one small file per schedule in plan/schedules/. Everything else about an iteration's
// structure (which task waits for which, what is sent where, what memory is held) follows from the
// tasks and is built once in plan/task_graph.h, which the timing engine, the device events,
// the memory model and eventrun's rank programs all walk.
//
// A task is the forward (F), the backward (B) or the weight gradient (W) of one micro-batch of one
// of the device's model chunks. Schedules that do not split the backward have no W tasks and their
// B runs the whole backward list; zero-bubble schedules (splitsBackward) run the ops marked
// OpInstance::weight_grad in a separate W task.
//
// A schedule can also be data: --schedule FILE.csv (schedules/schedule_file.h, Schedule::kFile).
//
// Adding a schedule: an enum value, name and parse line in plan/strategy.{h,cpp}, its file here
// in schedules/ (with its layout when it is not looped), one line in schedules/schedules.h, one
// case in schedules/registry.cpp and one in plan/CMakeLists.txt (docs/DESIGN.md counts them).

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/op_list.h"
#include "plan/pipeline_layout.h"
#include "plan/strategy.h"

namespace evsim {

struct StageTask {
  Phase phase = Phase::kForward;  // kForward, kBackward or kWeightGrad
  int micro_batch = 0;
  int chunk = 0;  // which of the device's model chunks (0 unless interleaved)
  // Runs overlapped with the task before it in the device's order, as one fused task (DualPipe's
  // F&B: the forward of one micro-batch beside the backward of another, each one's communication
  // behind the other's compute; task_graph.h). A fused task is a task with overlapped = false
  // followed by the overlapped ones.
  bool overlapped = false;
  bool operator==(const StageTask&) const = default;
};

// The most model chunks a device may hold: the task graph codes a send of chunk c in one byte
// (plan/task_graph.h sendCode: 1 + 2 c + 1 <= 255). Strategy validation and schedule files refuse
// more with an input error.
inline constexpr int kMaxChunksPerDevice = 127;

struct PipelineShape {
  int stages = 1;             // P devices
  int chunks = 1;             // v model chunks per device
  int64_t micro_batches = 1;  // m
  // N, the interleaved schedule's contiguous micro-batches per chunk (Strategy::microbatch_group);
  // 0: P. Other schedules ignore it.
  int group = 0;
};

class PipelineSchedule {
 public:
  virtual ~PipelineSchedule() = default;
  // Whether the backward is split into B (input gradient) and W (weight gradient) tasks.
  virtual bool splitsBackward() const { return false; }
  // Whether the schedule runs more than one model chunk per device.
  virtual bool allowsChunks() const { return false; }
  // How its virtual stages sit on the devices (pipeline_layout.h): looped unless it says V.
  virtual LayoutKind layout() const { return LayoutKind::kLooped; }
  // Whether its orders hold fused tasks (StageTask::overlapped; DualPipeV).
  virtual bool fusesTasks() const { return false; }
  // Chunks per device the schedule always runs (ZB-V: 2), or 0 when the strategy's
  // virtual_stages says (interleaved) or there is one.
  virtual int fixedChunks() const { return 0; }
  // Every task of `device` (its chunks' F, B and, when split, W for every micro-batch) exactly
  // once, in the order the device runs them. The shape has passed strategyViolation (interleaved:
  // m % P == 0; zero-bubble: m >= P); a shape the schedule cannot order throws Error.
  virtual std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const = 0;
  // Every device's order (index = device). Schedules whose orders come from one joint
  // construction (zb_h2.cpp) override this so it runs once.
  virtual std::vector<std::vector<StageTask>> orders(const PipelineShape& shape) const;
};

// The schedule object of `schedule` (static storage).
const PipelineSchedule& pipelineSchedule(Schedule schedule);
// Whether `strategy` runs fused F&B tasks: its schedule's (DualPipeV), or the interleaved
// schedule's steady state under --overlap-moe-expert-parallel-comm (task_graph.h).
inline bool fusesTasks(const Strategy& strategy) {
  return pipelineSchedule(strategy.schedule).fusesTasks() || strategy.moe_a2a_overlap;
}

// The layout of `schedule` over `devices` stages with `chunks` chunks each, and a strategy's
// (P, v = virtual_stages under a chunked schedule, 1 otherwise).
PipelineLayout pipelineLayout(Schedule schedule, int devices, int chunks);
PipelineLayout pipelineLayout(const Strategy& strategy);

using DeviceOrders = std::vector<std::vector<StageTask>>;  // index = device
// pipelineSchedule(schedule).orders(shape), computed once per (schedule, shape) and shared: a
// search asks for the same few shapes for every candidate's memory estimate and task graph.
// Thread-safe; the most recently used orders are kept, up to about 2^21 tasks (24 MiB) in all.
std::shared_ptr<const DeviceOrders> scheduleOrders(Schedule schedule, const PipelineShape& shape);
// Per device, activationStates of its order (task_graph.h), computed once per (schedule, shape)
// and shared like the orders (up to about 2^22 counts kept): the memory model's peak per candidate
// is then a few dot products instead of a walk of the order.
struct ActivationStates;
std::shared_ptr<const std::vector<ActivationStates>> scheduleActivationStates(
    Schedule schedule, const PipelineShape& shape);
// The same, walking `orders` (that shape's scheduleOrders) on a miss: the task graph's build
// fills the cache from the orders it has, so that a simulation's memory estimate does not compute
// orders too large to keep a second time (issue 34 item 3).
// `peaks` instead (orders of one chunk with whole backwards: each device's peak in flight, the
// task graph's build walks it anyway): the states are then oneChunkStates(peak), no walk.
std::shared_ptr<const std::vector<ActivationStates>> scheduleActivationStates(
    Schedule schedule, const PipelineShape& shape, const DeviceOrders* orders,
    const std::vector<int>* peaks = nullptr);

// pipelineSchedule(schedule).deviceOrder(stage, {stages, virtual_stages, micro_batches}) after
// checking the arguments (stage in range, m >= 1, v > 1 only for chunked schedules).
std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages,
                                      int64_t micro_batches, int virtual_stages = 1);

}  // namespace evsim

#include "plan/task_graph.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "common/checked.h"
#include "common/error.h"
#include "plan/fused_tasks.h"
#include "plan/shape_cache.h"

namespace evsim {

namespace {

constexpr int kPhases = 3;  // F, B, W

int phaseIndex(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return 0;
    case Phase::kBackward:
      return 1;
    case Phase::kWeightGrad:
      return 2;
    default:
      EVSIM_THROW(Error, "phase {} is not a pipeline task", phaseName(phase));
  }
}

// buildTaskGraph without the cache.
TaskGraph makeTaskGraph(Schedule schedule, int devices, int chunks, int64_t micro_batches,
                        int group, bool fuse_moe_a2a) {
  EVSIM_CHECK(devices >= 1 && chunks >= 1 && micro_batches >= 1, "task graph P={} v={} m={}",
              devices, chunks, micro_batches);
  const PipelineSchedule& sched = pipelineSchedule(schedule);
  EVSIM_CHECK(chunks == 1 || sched.allowsChunks(), "{} schedule with v={}", scheduleName(schedule),
              chunks);
  // Send codes are bytes (TaskGraph::send_codes); inputs are refused above this before here.
  EVSIM_CHECK(chunks <= kMaxChunksPerDevice, "task graph: v={} model chunks per device, at most {}",
              chunks, kMaxChunksPerDevice);
  // Node ids, edge offsets and positions are ints: checked before anything is sized by the count.
  const int64_t task_phases = sched.splitsBackward() ? 3 : 2;
  const int64_t tasks_a_device =
      checkedMul(checkedMul(task_phases, int64_t{chunks}, "tasks a device"), micro_batches,
                 "tasks a device");
  const int64_t tasks = checkedMul(tasks_a_device, int64_t{devices}, "tasks");
  EVSIM_CHECK(tasks < std::numeric_limits<int>::max() / 2,
              "task graph P={} v={} m={}: {} tasks, too many", devices, chunks, micro_batches,
              tasks);
  TaskGraph g;
  auto storage = std::make_shared<TaskGraph::Storage>();
  TaskGraph::Storage& st = *storage;
  g.devices = devices;
  g.chunks = chunks;
  g.micro_batches = micro_batches;
  g.split_backward = sched.splitsBackward();
  const PipelineLayout layout = pipelineLayout(schedule, devices, chunks);
  const int K = layout.stages();
  const int64_t m = micro_batches;
  // Per virtual stage, its device: sameDevice by lookup, not by division, in the loops below.
  std::vector<int> device_of(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) device_of[k] = layout.device(k);
  // Node ids: dense over (phase, virtual stage, micro-batch); -1 until the schedule places it. W
  // only where the schedule splits the backward (the orders are checked for a W before its slot).
  const int phases = g.split_backward ? kPhases : kPhases - 1;
  std::vector<int> id(static_cast<size_t>(phases * K * m), -1);
  std::shared_ptr<const DeviceOrders> shared_orders =
      scheduleOrders(schedule, PipelineShape{devices, chunks, micro_batches, group});
  const std::shared_ptr<const DeviceOrders> schedule_orders = shared_orders;  // not fused
  if (fuse_moe_a2a) shared_orders = fused_tasks::fuseForwardBackward(*shared_orders);
  const DeviceOrders& orders = *shared_orders;
  EVSIM_CHECK(static_cast<int>(orders.size()) == devices, "{} orders for {} devices", orders.size(),
              devices);
  const size_t tasks_per_device = static_cast<size_t>(tasks_a_device);
  g.tasks_per_device = static_cast<int>(tasks_per_device);
  // Node ids in device order (device s's position p is s * tasks_per_device + p), each node and
  // edge written in place.
  // Each node written whole, in id order (no default construction first: issue 34 item 3).
  st.nodes.reserve(tasks_per_device * devices);
  st.send_codes.resize(tasks_per_device * devices);
  st.peak_in_flight.assign(static_cast<size_t>(devices), 0);
  const Phase frees = g.split_backward ? Phase::kWeightGrad : Phase::kBackward;
  std::vector<int> stage_of_chunk(static_cast<size_t>(chunks));
  // The loops below read through local pointers: a node's write would otherwise reload every
  // vector's data and sizes (issue 34 item 3).
  const bool split = g.split_backward;
  const int* const device_at = device_of.data();
  int* const ids = id.data();
  const int64_t per_phase = static_cast<int64_t>(K) * m;
  for (int s = 0; s < devices; ++s) {
    EVSIM_CHECK(orders[s].size() == tasks_per_device, "{} schedule: device {} has {} tasks, not {}",
                scheduleName(schedule), s, orders[s].size(), tasks_per_device);
    for (int c = 0; c < chunks; ++c) stage_of_chunk[c] = layout.virtualStage(s, c);
    const int* const stage_of = stage_of_chunk.data();
    const StageTask* const tasks = orders[s].data();
    const int base = static_cast<int>(static_cast<size_t>(s) * tasks_per_device);
    uint8_t* const codes = st.send_codes.data() + base;
    int in_flight = 0, peak = 0;  // peakInFlight's walk, done here once
    for (size_t position = 0; position < tasks_per_device; ++position) {
      const StageTask t = tasks[position];
      EVSIM_CHECK(static_cast<unsigned>(t.chunk) < static_cast<unsigned>(chunks) &&
                      static_cast<uint64_t>(static_cast<int64_t>(t.micro_batch)) <
                          static_cast<uint64_t>(m) &&
                      (split || t.phase != Phase::kWeightGrad),
                  "{} schedule: device {} task {} mb {} chunk {}", scheduleName(schedule), s,
                  phaseName(t.phase), t.micro_batch, t.chunk);
      const int k = stage_of[t.chunk];
      int& node = ids[phaseIndex(t.phase) * per_phase + k * m + t.micro_batch];
      EVSIM_CHECK(node < 0, "{} schedule: device {} repeats {} of mb {} chunk {}",
                  scheduleName(schedule), s, phaseName(t.phase), t.micro_batch, t.chunk);
      node = base + static_cast<int>(position);
      Send send = Send::kNone;
      int code = 0;  // sendCode(send, t.chunk), set in the branches
      // A hand-over to a stage on the same device (the V layout's turn) is in memory: no send.
      if (t.phase == Phase::kForward) {
        peak = std::max(peak, ++in_flight);
        if (k + 1 < K && device_at[k] != device_at[k + 1]) {
          send = Send::kActivation, code = 1 + 2 * t.chunk;
        }
      } else if (t.phase == Phase::kBackward && k > 0 && device_at[k] != device_at[k - 1]) {
        send = Send::kGradient, code = 2 + 2 * t.chunk;
      }
      if (t.phase == frees) --in_flight;
      codes[position] = static_cast<uint8_t>(code);
      st.nodes.push_back(TaskNode{
          NodeTask{t.micro_batch, static_cast<int16_t>(t.chunk), t.phase, t.overlapped}, k, 0,
          send, 1, 0});
    }
    st.peak_in_flight[s] = peak;
  }
  // The memory model's activation states of these orders, while they are at hand: orders above
  // 65,536 tasks are too large to keep (ShapeCache, schedules/registry.cpp), and a simulation's memory estimate computed
  // them a second time (issue 34 item 3). A hit when the memory check came first (a search). One
  // chunk with whole backwards: from the peaks walked above, without a walk of their own.
  if (schedule != Schedule::kFile) {
    const PipelineShape shape{devices, chunks, micro_batches, group};
    if (chunks == 1 && !split) {
      scheduleActivationStates(schedule, shape, nullptr, &st.peak_in_flight);
    } else {
      scheduleActivationStates(schedule, shape, schedule_orders.get());
    }
  }
  // Edges, once every node exists (a device's order may name a producer on a later device): at
  // most two a task (B: the next stage's B and its own F), per micro-batch K-1 for the forwards,
  // 2K-1 for the backwards and K for the Ws: the exact size, written in place.
  st.edges.resize(static_cast<size_t>(m) *
                  static_cast<size_t>(3 * K - 2 + (g.split_backward ? K : 0)));
  const TaskNode* before_input = nullptr;
  TaskEdge* const edges = st.edges.data();
  int edge_count = 0;
  TaskNode* const nodes = st.nodes.data();
  const size_t node_count = st.nodes.size();
  auto producer = [&](int phase, int k, int i) { return ids[phase * per_phase + k * m + i]; };
  auto sameDevice = [&](int a, int b) { return device_at[a] == device_at[b]; };
  for (size_t node_id = 0; node_id < node_count; ++node_id) {
    TaskNode& n = nodes[node_id];
    n.first_edge = edge_count;
    const int k = n.virtual_stage;
    const int i = n.task.micro_batch;
    // A same-device input must come earlier in the device's order, or the device would wait
    // forever (the first such node reported after the fused tasks' checks). Ids follow device
    // order, so an earlier position on the same device is a smaller id.
    auto local = [&](int from) {
      if (from >= static_cast<int>(node_id) && !before_input) before_input = &n;
      edges[edge_count++] = {from, false};
    };
    switch (n.task.phase) {
      case Phase::kForward:
        if (k > 0) {
          if (sameDevice(k - 1, k)) {
            local(producer(0, k - 1, i));
          } else {
            edges[edge_count++] = {producer(0, k - 1, i), true};
          }
        }
        break;
      case Phase::kBackward:
        if (k + 1 < K) {
          if (sameDevice(k + 1, k)) {
            local(producer(1, k + 1, i));
          } else {
            edges[edge_count++] = {producer(1, k + 1, i), true};
          }
        }
        local(producer(0, k, i));
        break;
      default:
        local(producer(1, k, i));
        break;
    }
    n.edge_count = static_cast<uint8_t>(edge_count - n.first_edge);  // at most 2 (above)
  }
  EVSIM_CHECK(static_cast<size_t>(edge_count) == st.edges.size(), "{} edges, not {}", edge_count,
              st.edges.size());
  g.nodes = st.nodes;
  g.edges = st.edges;
  g.send_codes = st.send_codes;
  if (sched.fusesTasks() || fuse_moe_a2a) {
    fused_tasks::checkFusedTasks(g, st, schedule);
    g.fused = std::any_of(st.nodes.begin(), st.nodes.end(),
                          [](const TaskNode& n) { return n.fused_size > 1; });
  }
  EVSIM_CHECK(before_input == nullptr, "{} schedule: device {} runs {} of mb {} before its input",
              scheduleName(schedule), g.deviceOf(static_cast<int>(before_input - nodes)),
              phaseName(before_input->task.phase),
              before_input->task.micro_batch);
  g.storage = std::move(storage);
  return g;
}

}  // namespace

TaskGraph buildTaskGraph(Schedule schedule, int devices, int chunks, int64_t micro_batches,
                         int group, bool fuse_moe_a2a) {
  // A schedule file can be replaced in a process (tests): its graphs are not kept by shape.
  if (schedule == Schedule::kFile) {
    return makeTaskGraph(schedule, devices, chunks, micro_batches, group, fuse_moe_a2a);
  }
  if (schedule != Schedule::kInterleaved) group = 0;
  // Fused graphs apart from plain ones of the same shape.
  // Tasks: about 27 bytes each (a 20-byte node, one or two 4-byte edges, a 1-byte send code).
  static ShapeCache<TaskGraph> plain(4 * kKeptShapeTasks);  // keeps up to a quarter
  static ShapeCache<TaskGraph> fused(kKeptShapeTasks);
  return *(fuse_moe_a2a ? fused : plain)
              .get(
                  ShapeKey{static_cast<int>(schedule), devices, chunks, micro_batches, group},
                  [&] {
                    return makeTaskGraph(schedule, devices, chunks, micro_batches, group,
                                         fuse_moe_a2a);
                  },
                  [](const TaskGraph& g) { return g.nodes.size(); });
}

TaskGraph buildTaskGraph(const IterationPlan& plan) {
  return buildTaskGraph(plan.strategy.schedule, plan.deviceStages(), plan.chunksPerDevice(),
                        plan.micro_batches, plan.strategy.microbatch_group,
                        plan.strategy.moe_a2a_overlap);
}

int bucketIssueOp(const OpList& backward, int ready_after_op, bool split_backward) {
  if (!split_backward) return ready_after_op;
  for (int i = ready_after_op; i >= 0; --i) {
    if (backward[i].weight_grad) return i;
  }
  return -1;
}

int peakInFlight(const TaskGraph& graph, int device) {
  // Walked once when the graph was built.
  if (graph.storage &&
      graph.storage->peak_in_flight.size() == static_cast<size_t>(graph.devices)) {
    return graph.storage->peak_in_flight[static_cast<size_t>(device)];
  }
  const Phase frees = graph.split_backward ? Phase::kWeightGrad : Phase::kBackward;
  int in_flight = 0, peak = 0;
  for (size_t p = 0; p < static_cast<size_t>(graph.tasks_per_device); ++p) {
    const Phase phase = graph.nodes[graph.nodeAt(device, p)].task.phase;
    if (phase == Phase::kForward) peak = std::max(peak, ++in_flight);
    if (phase == frees) --in_flight;
  }
  return peak;
}

}  // namespace evsim

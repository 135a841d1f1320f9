#pragma once
// The list scheduler's fast path (timing_engine.cpp's timePipeline): a device's lone tasks placed
// one after another while nothing runs beside them (no DP buckets slowing them, no deferred
// parameter gathers, no stretch inside them), with the records it reads and writes. Moved out of
// timing_engine.cpp (one responsibility a file); timing_engine.h states the timing rules.

#include <algorithm>
#include <cstddef>
#include <random>

#include "modeler/timing_engine.h"
#include "plan/task_graph.h"

namespace evsim::lone {

inline int taskPhaseIndex(Phase phase) {
  return phase == Phase::kForward ? 0 : phase == Phase::kBackward ? 1 : 2;
}

inline double taskUs(const StageCost& cost, Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return cost.forward_us;
    case Phase::kBackward:
      return cost.backward_us;
    default:
      return cost.weight_grad_us;
  }
}

// The extra time of one task under per-op jitter (TaskJitter).
double jitterUs(const TaskJitter& jitter, int virtual_stage, Phase phase, std::mt19937_64& rng);

// Per node, when its output can be used (its run's end on its device, its send's end on
// another); run_end_us < 0 until it is placed (run times are never negative). Read by the
// consumers instead of the producer's node and timing: a 16-byte load per input edge.
struct Output {
  double run_end_us = -1;
  double send_end_us = 0;
};

// What placeLoneTasks reads of the graph, the links and the costs, and the outputs it writes: set
// once per class (issue 34 item 3: a device is resumed about once per task at 1F1B, and these
// were reloaded at each resume).
struct LoneGraph {
  const TaskNode* nodes;
  const TaskEdge* edges;
  const double* forward_us;
  const double* backward_us;
  const StageCost* stage_costs;
  Output* outputs;
};

// One device's state as placeLoneTasks moves it: its first node (its order's node ids follow on
// from it, TaskGraph::nodeAt) and task count, its timings, its send stretch (null: none), the
// next position, when it is free, its busy time, its slowdown.
struct LoneDevice {
  int first_node;
  size_t size;
  TaskTiming* timings;
  const double* stretch;
  size_t at;
  double free_us;
  double busy_us;
  double slow;
};

// Places the device's lone tasks from d.at on, while nothing is beside them (no DP buckets slowing
// them, no deferred parameter gathers, no stretch inside them): timePipeline's rules for one
// member, in the same operations (the same bits), without their loops, until a fused task (d.at
// left on it, -1 returned) or an input not placed yet (its node returned). kJittered and
// kStretched: whether jitter is drawn and sends are stretched, branched on once per resume.
// `draw(virtual_stage, phase)`: a task's jitter in µs (jitterUs on the class's generator), called
// once per placed task in placement order (kJittered only). Internal linkage and always inlined:
// timePipeline calls it once per resume (about once per task at 1F1B), and as an external
// template GCC left the call in place (+0.65 M instructions at m = 6,144, P = 16).
template <bool kJittered, bool kStretched, class Draw>
[[gnu::always_inline]] static inline int placeLoneTasks(const LoneGraph& g, LoneDevice& d,
                                                        Draw&& draw) {
  const int first_node = d.first_node;
  const size_t size = d.size;
  const TaskNode* const nodes = g.nodes;
  Output* const outputs = g.outputs;
  TaskTiming* const timings = d.timings;
  const double slow = d.slow;
  size_t at = d.at;
  double free_us = d.free_us, busy_us = d.busy_us;
  int blocked = -1;
  for (; at < size; ++at) {
    const int id = first_node + static_cast<int>(at);
    const TaskNode& node = nodes[id];
    if (node.fused_size != 1) break;
    // Only a transfer input can hold the task: a same-device producer comes earlier in the order
    // (buildTaskGraph checks it), so it is placed and its run ended by the device's free time,
    // which the start takes anyway. A node has at most one transfer input, its first edge
    // (task_graph.h): one edge read a task instead of the loop over all (issue 34 item 3).
    double ready = 0;
    if (node.edge_count > 0) {
      const TaskEdge& e = g.edges[node.first_edge];
      if (e.transfer) {
        const Output& from = outputs[e.from];
        if (from.run_end_us < 0) {
          blocked = e.from;
          break;
        }
        ready = std::max(ready, from.send_end_us);
      }
    }
    const Phase phase = node.task.phase;
    const int vs = node.virtual_stage;
    const Send send = node.send;
    const double body_us = taskUs(g.stage_costs[vs], phase);
    double jitter_us = 0.0;
    if constexpr (kJittered) jitter_us = draw(vs, phase);
    const double start_us = std::max(free_us, ready);
    const double end_us = start_us + (body_us + jitter_us) * slow;
    double send_end_us = end_us;
    // linkOf(node): an activation's link is the node's virtual stage, a gradient's the one before.
    if (send == Send::kActivation) send_end_us += g.forward_us[vs];
    if (send == Send::kGradient) send_end_us += g.backward_us[vs - 1];
    if constexpr (kStretched) send_end_us += d.stretch[at];
    // timePipeline's overlap slowdown (body - max(compute, comm)) * slow for one member (comm 0)
    // is 0, as task times are not below 0 (computeTimeline checks them; costs are checked finite
    // when they are read, io/profile_rows.cpp, cost_model.cpp): none is written.
    TaskTiming& t = timings[at];
    t.run = Interval{start_us, end_us};
    t.send_end_us = send_end_us;
    outputs[id] = Output{end_us, send_end_us};
    busy_us += send_end_us - end_us;
    busy_us += end_us - start_us;
    free_us = send_end_us;
  }
  d.at = at;
  d.free_us = free_us;
  d.busy_us = busy_us;
  return blocked;
}

}  // namespace evsim::lone

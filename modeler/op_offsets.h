#pragma once
// Where each op of a task starts, and the task's duration: the one rule the simulation times tasks
// by and the closed-form tier bounds them with.
//
// The ops of a task run one after another on the device, and each must first be issued by the host
// (the framework's Python and launch path, EventCost::host_us), which starts issuing when the task
// starts (Megatron synchronises on the task's P2P input): op i starts at max(host issued ops 1..i,
// op i-1 ended); an op OpInstance::issued_with_previous adds no host time (Transformer Engine's
// chunks of one call). With no host cost this is the plain prefix sum of the op times. An op that runs
// beside the next n ops (OpInstance::overlap_ops: a CP ring exchange beside its attention step, an
// activation offload beside a layer) starts in order but does not hold the device; from the op
// after those n on, the device waits for it (even when that op is itself one that runs beside
// others), and the task ends when every op has. Overlapping ops of one stream run one
// at a time (one copy engine, one ring): each starts after the previous one ends. Only the ops
// `in_task` selects run (a split backward's B or W); an op that waits for an overlapping one waits
// at the first selected op at or after its position.
//
// Overlap slowdown (overlap_slowdown.h): a compute-stream op that runs while an overlapping
// transfer is in flight takes longer by that rule; `slowdown(op)` gives the factor an overlapping
// op imposes on compute beside it (1: none, as for host copies). The closed-form tier passes no
// slowdown: factors are >= 1 and a task's end only grows with its ops' ends, so its times stay
// lower bounds.

#include <algorithm>
#include <array>
#include <cstddef>

#include "common/error.h"
#include "modeler/cost_source.h"
#include "modeler/overlap_slowdown.h"
#include "ops/op_list.h"

namespace evsim {

// The host time to issue `op`, from its event's cost `c`: a framework op's host_us, or, for an op
// issued from inside one framework call (OpInstance::host_calls), its calls x host_call_us.
inline double issueHostUs(const OpInstance& op, const EventCost& c) {
  return op.host_calls > 0 ? op.host_calls * c.host_call_us : c.host_us;
}

// `cost(op)` gives {host_us, time_us} (issueHostUs for a cost model's answer); `start_at(i, t)`
// is told where selected op i starts; `slowdown(op)` the factor of an overlapping op (see above).
template <typename Select, typename Cost, typename OnStart, typename Slowdown>
double opOffsets(const OpList& ops, Select in_task, Cost cost, OnStart start_at,
                 Slowdown slowdown) {
  // Ops running beside later ones: the index of the first op that waits for each, and its end.
  // Nesting is shallow (a CP exchange inside an offloaded layer, two offloads in flight).
  struct Beside {
    size_t release = 0;
    double end = 0;
    SlowInterval transfer;  // its interval and the factor it slows compute by
  };
  std::array<Beside, 8> beside;
  size_t pending = 0;
  std::array<double, kStreamCount> stream_free{};  // of the overlapping ops on each stream
  double device_free = 0, host_issued = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInstance& op = ops[i];
    if (!in_task(op)) continue;
    const auto [host_us, time_us] = cost(op);
    if (!op.issued_with_previous) host_issued += host_us;
    // Ops released here hold the device from this point on, whether this op runs beside later
    // ones or not (a copy issued next, a layer whose prefetch was beside the one before).
    for (size_t j = 0; j < pending;) {
      if (beside[j].release <= i) {
        device_free = std::max(device_free, beside[j].end);
        beside[j] = beside[--pending];
      } else {
        ++j;
      }
    }
    double& stream_free_at = stream_free[static_cast<size_t>(op.stream)];
    const double start = std::max({device_free, host_issued, stream_free_at});
    start_at(i, start);
    if (op.overlap_ops > 0) {
      // A pipelined op (OpInstance::pipelined_with_next) leaves its stream to the next op.
      const double end = start + time_us;
      if (!op.pipelined_with_next) stream_free_at = end;
      EVSIM_CHECK(pending < beside.size(), "op '{}': more than {} overlapping ops at once", op.name,
                  beside.size());
      beside[pending++] = {i + 1 + static_cast<size_t>(op.overlap_ops), end,
                           SlowInterval{start, end, slowdown(op)}};
      continue;  // the next ops start beside it
    }
    device_free = start + time_us;
    if (op.stream == Stream::kCompute && pending > 0) {
      std::array<SlowInterval, 8> transfers;
      for (size_t j = 0; j < pending; ++j) transfers[j] = beside[j].transfer;
      device_free = slowedEndUs(start, time_us, std::span(transfers.data(), pending));
    }
  }
  for (size_t j = 0; j < pending; ++j) device_free = std::max(device_free, beside[j].end);
  return device_free;
}

// Without overlap slowdown (the closed-form tier's lower bound).
template <typename Select, typename Cost, typename OnStart>
double opOffsets(const OpList& ops, Select in_task, Cost cost, OnStart start_at) {
  return opOffsets(ops, in_task, cost, start_at, [](const OpInstance&) { return 1.0; });
}

}  // namespace evsim

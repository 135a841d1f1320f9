#pragma once
// Expands a simulation into the events of one rank, in time order per stream: every op of every
// micro-batch task of the task graph (of each of the rank's model chunks when interleaved; a split
// backward's weight_grad ops in its W tasks, phase weight-grad), the P2P sends, the
// gradient all-reduces and the optimizer step (per chunk). Identical ranks
// (the TP ranks of a stage, the DP replicas of a pipeline class) expand from the same timeline, so
// writing thousands of ranks never re-simulates anything.

#include <cstdint>
#include <functional>
#include <string_view>

#include "ops/op_list.h"
#include "modeler/simulation.h"

namespace evsim {

struct DeviceEvent {
  Stream stream = Stream::kCompute;
  Phase phase = Phase::kForward;
  std::string_view name;  // op name, "send_activation", "send_gradient", "grad_allreduce", ...
  int event = -1;         // plan event index
  int layer = kEmbeddingLayer;
  int micro_batch = -1;  // -1 outside micro-batch tasks
  double start_us = 0;
  double duration_us = 0;
  int chunk = 0;  // the device's model chunk (0 unless interleaved)
};

// Calls `visit` for every event of `rank`, task by task.
void forEachDeviceEvent(const Simulation& sim, int64_t rank,
                        const std::function<void(const DeviceEvent&)>& visit);

}  // namespace evsim

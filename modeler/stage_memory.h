#pragma once
// One device stage's memory figures (memory_model.h's StageMemory) from the device's chunk sums:
// the moments of the step (backward, loss, optimizer step, output merge) and the reserved bytes.
// Internal to modeler/memory_model.cpp's two estimates (estimateMemory, estimateMemoryPeak).

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "modeler/memory_components.h"
#include "modeler/memory_model.h"

namespace evsim {

// Byte sums saturate (beyond int64 is out of memory, not an error), and so does this rounding:
// llround beyond int64 is unspecified (x86 gives INT64_MIN, a negative).
inline int64_t clampedRound(double bytes) {
  return bytes < 9.2e18 ? std::llround(bytes) : std::numeric_limits<int64_t>::max();
}

// What every device stage's figures share: the strategy's bytes per parameter and the buffers and
// overheads that do not depend on the stage.
struct StrategyTerms {
  int zero = 0;
  bool offload_optimizer = false, offload_activations = false, fsdp = false;
  bool bf16_main_grad = false;  // Megatron's main gradients in 16 bits (--grad-reduce-in-bf16)
  StateBytesPerParameter dense_state, expert_state;
  double dense_host = 0, expert_host = 0;
  int64_t tp_cp_buffer = 0, pp_buffer = 0, workspace = 0, userbuffers = 0, overhead = 0;
  // The part of tp_cp_buffer a linear's backward frees before its gradient hooks run (the SP input
  // gradient): not held at a bucket's cast (memory_components.h, bucketMoment).
  int64_t sp_grad_input = 0;
  int communicators = 0;
  double fragmentation = 0;
};

// strategyTerms after the checks both estimates make of their arguments.
StrategyTerms checkedStrategyTerms(const ModelConfig& model, const Strategy& strategy,
                                   const std::vector<DeviceChunkSums>& devices, double headroom,
                                   const MemoryOverheads& overheads);
// One device stage's figures. Without `full` only what its peak and host bytes need: the model
// states' split into weights, gradients and optimizer state and the reserved bytes are left 0 (a
// search's memory check reads the peak alone, hundreds of thousands of times).
StageMemory stageMemory(const ModelConfig& model, const Strategy& strategy, const StrategyTerms& t,
                        const DeviceChunkSums& sums, int device, int64_t capacity_bytes,
                        bool full);
// A lower bound on stageMemory(...).peak_bytes from a few of its terms, for a search that only
// needs to know that a candidate is out of memory: the model states, the held activations, the
// cuBLAS workspace and the overhead beside the allocator (CUDA context, NCCL, userbuffers). The
// peak is the larger of two moments (backward, optimizer step) plus that overhead; the backward's
// adds those same states, activations and workspace to transients and buffers that are all >= 0,
// and saturating addition of non-negative terms is monotone, so the bound never exceeds the peak.
// About a tenth of stageMemory's instructions (no transient or buffer is computed).
int64_t stagePeakLowerBound(const StrategyTerms& t, const DeviceChunkSums& sums);
int64_t usableBytes(int64_t capacity_bytes, double headroom);
// A node's host bytes: its GPUs' offloaded state and activations, the largest device's each.
int64_t nodeHostBytes(const StageMemory& mem, const HostCapacity& host);

}  // namespace evsim

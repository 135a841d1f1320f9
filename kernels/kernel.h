#pragma once
// Runnable compute events. The profiler builds one ComputeKernel per compute event and times run()
// (construction allocates and fills the buffers and is never timed).
//
// Call order: construct (makeCpuKernel / makeCudaKernel) -> run() any number of times ->
// synchronize() before reading a clock on asynchronous backends. run() does the event's work
// exactly once; on CUDA it only enqueues the work on the kernel's stream.

#include <cstdint>
#include <memory>

#include "events/event.h"

namespace evsim {

// One runnable compute event. Owns its input and output buffers, sized from the event's dims and
// filled with random values (never all zeros: zero inputs can hit fast paths that real training
// never sees, e.g. sparse-aware BLAS or denormal-free arithmetic).
class ComputeKernel {
 public:
  virtual ~ComputeKernel() = default;
  // Executes the event's work once (asynchronously on CUDA).
  virtual void run() = 0;
  // Waits until all work enqueued by run() has finished. A no-op on the CPU.
  virtual void synchronize() {}
};

// CPU implementation of `event` (float32 whatever the event dtype; see kernels/cpu/cpu_ops.h).
// `seed` picks the random inputs. Throws InputError naming the signature for a communication
// event or an unknown op.
std::unique_ptr<ComputeKernel> makeCpuKernel(const Event& event, uint64_t seed = 1);

}  // namespace evsim

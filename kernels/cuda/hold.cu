// A kernel that holds its stream until the host releases it (nvbench's "blocking kernel"): the
// host enqueues every timed repetition while the device waits, so CUDA events recorded between
// repetitions measure the device's time for each one, not the host's time to launch it.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace evsim::cuda {

namespace {

__global__ void holdKernel(const volatile int* release, unsigned long long timeout_ns,
                           int* timed_out) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*release == 0) {
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {  // never hang the stream: give up and say so
      *timed_out = 1;
      return;
    }
  }
}

}  // namespace

void holdStream(const volatile int* release, double timeout_s, int* timed_out,
                cudaStream_t stream) {
  holdKernel<<<1, 1, 0, stream>>>(release, static_cast<unsigned long long>(timeout_s * 1e9),
                                  timed_out);
  EVSIM_CUDA_CHECK_LAUNCH(holdKernel);
}

}  // namespace evsim::cuda

#include "kernels/cpu/cpu_threads.h"

#include <algorithm>
#include <thread>

// Declared weak: present when the BLAS linked is OpenBLAS, null otherwise (reference BLAS, BLIS).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace evsim {

int hostCores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

int cpuThreadsPerRank(int ranks_on_host) { return std::max(1, hostCores() / std::max(1, ranks_on_host)); }

void setCpuKernelThreads(int threads) {
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(std::max(1, threads));
}

}  // namespace evsim

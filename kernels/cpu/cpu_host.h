#pragma once
// Facts about the host the CPU kernels run on, and the policies eventprof and eventrun share so a
// kernel is timed the way it later runs:
// - threads: when `ranks_on_host` processes (MPI ranks) share the host, each gets the host's cores
//   split evenly, at least one (OpenBLAS would otherwise start one thread per core in every rank,
//   and the ranks would fight for the cores);
// - cache: inside a training iteration a kernel's inputs were last touched many ops ago, and the
//   iteration's working set (weights, activations of every micro-batch in flight) is far larger
//   than the caches, so the kernel reads them from memory; a profiler repeating one kernel back to
//   back would time it with its data hot. lastLevelCacheBytes() sizes how much other data must
//   pass to evict it (nvbench flushes the GPU's L2 between timed runs for the same reason).

#include <cstdint>

namespace evsim {

// Cores this process may use (its CPU affinity mask; hardware_concurrency as a fallback; >= 1).
int hostCores();

// Threads per rank for `ranks_on_host` ranks sharing `host_cores` cores (MpiWorld::host_cores):
// max(1, min(hostCores(), host_cores / ranks_on_host)) — never more than this rank may run on.
int cpuThreadsPerRank(int ranks_on_host, int host_cores);

// Limits this process's BLAS threads (OpenBLAS's openblas_set_num_threads when the BLAS in use is
// OpenBLAS; other BLAS builds are left as they are). Our own kernels are single-threaded.
void setCpuKernelThreads(int threads);

// The last-level cache of cpu0 in bytes (sysfs); 32 MiB when the system does not say.
int64_t lastLevelCacheBytes();

}  // namespace evsim

#pragma once
// How many cores the CPU kernels of one process may use when `ranks_on_host` processes (MPI ranks)
// share this host: the host's cores split evenly, at least one. eventprof and eventrun apply the
// same policy, so a kernel is timed the way it later runs. OpenBLAS would otherwise start one thread
// per core in every rank, and ranks would fight for the cores.

namespace evsim {

// Cores of this host (std::thread::hardware_concurrency, at least 1).
int hostCores();

// Threads per rank for `ranks_on_host` ranks: max(1, hostCores() / ranks_on_host).
int cpuThreadsPerRank(int ranks_on_host);

// Limits this process's BLAS threads (OpenBLAS's openblas_set_num_threads when the BLAS in use is
// OpenBLAS; other BLAS builds are left as they are). Our own kernels are single-threaded.
void setCpuKernelThreads(int threads);

}  // namespace evsim

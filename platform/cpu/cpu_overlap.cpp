// CpuDevice::timeComputeBeside: a kernel on a worker thread while this rank's MPI thread runs the
// transfer back to back. Only this (the main) thread calls MPI, so MPI_Init's default threading
// suffices; the worker only runs kernels and reads the clock.
//
// The transfers go on until every member's worker has finished (a one-int MPI_MIN all-reduce after
// each transfer), so each timed kernel ran with a transfer in flight except for those small
// all-reduces' gaps. On a CPU the "transfer" is MPI moving bytes through shared memory with the
// host's cores: it slows the kernel by taking cores and memory bandwidth, as NCCL takes SMs and HBM
// bandwidth on a GPU.
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "common/error.h"
#include "mpi/mpi_check.h"
#include "mpi/mpi_collectives.h"
#include "mpi/mpi_wait.h"
#include "platform/cpu/cpu_device.h"

namespace evsim {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> timeKernels(std::vector<std::unique_ptr<ComputeKernel>>& kernels, int warmup,
                                int repeats) {
  size_t next = 0;
  for (int i = 0; i < warmup; ++i) kernels[next++ % kernels.size()]->run();
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    ComputeKernel& kernel = *kernels[next++ % kernels.size()];
    const Clock::time_point start = Clock::now();
    kernel.run();
    kernel.synchronize();
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return samples;
}

}  // namespace

Device::OverlapSamples CpuDevice::timeComputeBeside(const Event& compute, const Event& transfer,
                                                    const CommGroup& group, int warmup,
                                                    int repeats) {
  std::vector<std::unique_ptr<ComputeKernel>> kernels = cacheColdCopies(compute, seed_);
  OverlapSamples out;
  {
    CommWatch watch("the barrier before a kernel timed alone");
    EVSIM_MPI_CHECK(MPI_Barrier(group.comm));  // the members time their kernels alone together
  }
  out.alone_us = timeKernels(kernels, warmup, repeats);

  MpiCollectiveBuffers buffers = makeMpiBuffers(transfer, group.size);
  const std::string what = fmt::format("'{}' beside '{}' over world ranks {}", transfer.signature(),
                                       compute.signature(), fmt::join(group.world_ranks, ","));
  {
    CommWatch watch(what);
    EVSIM_MPI_CHECK(MPI_Barrier(group.comm));
    runMpiCollective(transfer, buffers, group.comm);  // the first transfer before the kernels
  }
  std::atomic<bool> worker_done{false};
  std::exception_ptr worker_error;
  std::thread worker([&] {
    try {
      out.beside_us = timeKernels(kernels, warmup, repeats);
    } catch (...) {
      worker_error = std::current_exception();
    }
    worker_done.store(true);
  });
  try {
    for (int all_done = 0; all_done == 0;) {
      CommWatch watch(what);
      runMpiCollective(transfer, buffers, group.comm);
      int mine = worker_done.load() ? 1 : 0;
      EVSIM_MPI_CHECK(MPI_Allreduce(&mine, &all_done, 1, MPI_INT, MPI_MIN, group.comm));
    }
  } catch (...) {
    worker.join();
    throw;
  }
  worker.join();
  if (worker_error) std::rethrow_exception(worker_error);
  return out;
}

}  // namespace evsim

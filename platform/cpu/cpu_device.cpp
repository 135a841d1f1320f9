#include "platform/cpu/cpu_device.h"

#include <algorithm>
#include <climits>
#include <chrono>
#include <fstream>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "kernels/cpu/cpu_host.h"
#include "kernels/kernel.h"
#include "mpi/mpi_check.h"
#include "mpi/mpi_collectives.h"
#include "mpi/mpi_wait.h"

namespace evsim {

namespace {

using Clock = std::chrono::steady_clock;

// Most kernel copies cycled through to keep each timed run's data out of the caches.
constexpr int64_t kMaxKernelCopies = 256;

double elapsedUs(Clock::time_point since) {
  return std::chrono::duration<double, std::micro>(Clock::now() - since).count();
}

}  // namespace

CpuDevice::CpuDevice(uint64_t seed, int ranks_on_host, int host_cores, WaitMode wait)
    : seed_(seed), host_cores_(host_cores), wait_(wait) {
  setCpuKernelThreads(cpuThreadsPerRank(ranks_on_host, host_cores));
}

std::string CpuDevice::cannotMeasure(const Event& event) const {
  if (!isCommunication(event.kind)) return "";
  const int64_t elements = mpiElementCount(event);
  if (elements <= INT_MAX) return "";
  return fmt::format("{} elements exceed MPI's int count ({}) on the cpu backend", elements,
                     INT_MAX);
}

int CpuDevice::computeSlots(int ranks_on_host) const {
  return std::max(1, std::min(ranks_on_host, host_cores_));
}

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "cpu";
}

std::string CpuDevice::deviceName() const { return cpuModelName(); }

std::vector<std::unique_ptr<ComputeKernel>> cacheColdCopies(const Event& event, uint64_t seed) {
  // Copies of the kernel, each with its own buffers, taken in turn: between two runs of one copy
  // the others pass more than the last-level cache, so every timed run reads its data from memory,
  // as inside an iteration (kernels/cpu/cpu_host.h). The CPU kernels work in fp32. Tiny kernels
  // stop at kMaxKernelCopies, partly cached: their time is small either way.
  const int64_t kernel_bytes =
      std::max<int64_t>(1, event.memory_bytes * 4 / std::max<int64_t>(1, dtypeBytes(event.dtype)));
  const int64_t wanted = 2 * lastLevelCacheBytes() / kernel_bytes + 1;
  const int copies = static_cast<int>(std::clamp<int64_t>(wanted, 1, kMaxKernelCopies));
  std::vector<std::unique_ptr<ComputeKernel>> kernels;
  for (int c = 0; c < copies; ++c) kernels.push_back(makeCpuKernel(event, seed + 104729 * c));
  return kernels;
}

std::vector<double> CpuDevice::timeCompute(const Event& event, int warmup, int repeats) {
  std::vector<std::unique_ptr<ComputeKernel>> kernels = cacheColdCopies(event, seed_);
  size_t next = 0;
  auto nextKernel = [&]() -> ComputeKernel& { return *kernels[next++ % kernels.size()]; };
  for (int i = 0; i < warmup; ++i) nextKernel().run();
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    ComputeKernel& kernel = nextKernel();
    Clock::time_point start = Clock::now();
    kernel.run();
    kernel.synchronize();
    samples.push_back(elapsedUs(start));
  }
  return samples;
}

std::vector<double> CpuDevice::timeP2P(const Event& event, const CommGroup& group, int warmup,
                                       int repeats) {
  EVSIM_CHECK(group.size == 2, "p2p over {} ranks", group.size);
  MpiCollectiveBuffers b = makeMpiBuffers(event, 2);
  const int elements = static_cast<int>(b.elements);
  const bool sender = group.rank == 0;
  std::vector<double> samples;
  const std::string what = fmt::format("p2p '{}' between world ranks {}", event.signature(),
                                       fmt::join(group.world_ranks, ","));
  for (int i = 0; i < warmup + repeats; ++i) {
    CommWatch watch(what);  // one repetition at a time: the deadline bounds each
    EVSIM_MPI_CHECK(MPI_Barrier(group.comm));
    Clock::time_point start = Clock::now();
    if (sender) {
      EVSIM_MPI_CHECK(MPI_Send(b.send.data(), elements, b.type, 1, /*tag=*/i, group.comm));
    } else {
      EVSIM_MPI_CHECK(
          MPI_Recv(b.recv.data(), elements, b.type, 0, /*tag=*/i, group.comm, MPI_STATUS_IGNORE));
    }
    double us = elapsedUs(start);
    if (i >= warmup) samples.push_back(us);
  }
  return samples;
}

std::vector<double> CpuDevice::timeCollective(const Event& event, const CommGroup& group,
                                              int warmup, int repeats) {
  MpiCollectiveBuffers buffers = makeMpiBuffers(event, group.size);
  std::vector<double> samples;
  const std::string what =
      fmt::format("'{}' over world ranks {}", event.signature(), fmt::join(group.world_ranks, ","));
  for (int i = 0; i < warmup + repeats; ++i) {
    CommWatch watch(what);
    EVSIM_MPI_CHECK(MPI_Barrier(group.comm));
    Clock::time_point start = Clock::now();
    runMpiCollective(event, buffers, group.comm);
    double us = elapsedUs(start);
    if (i >= warmup) samples.push_back(us);
  }
  return samples;
}

}  // namespace evsim

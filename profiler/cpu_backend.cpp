#include "profiler/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "kernels/cpu/cpu_host.h"
#include "kernels/kernel.h"
#include "profiler/mpi_check.h"

namespace evsim {

namespace {

using Clock = std::chrono::steady_clock;

// Most kernel copies cycled through to keep each timed run's data out of the caches.
constexpr int64_t kMaxKernelCopies = 256;

double elapsedUs(Clock::time_point since) {
  return std::chrono::duration<double, std::micro>(Clock::now() - since).count();
}

// MPI element type and count for `bytes` of `dtype`: 16-bit types travel as MPI_INT16_T (MPI has
// no half types; summing integers costs the same as the reduction a GPU would do), fp32 as float.
struct MpiBuffer {
  MPI_Datatype type = MPI_UINT8_T;
  int64_t elements = 0;
  int64_t element_bytes = 1;
};

MpiBuffer mpiBuffer(const Event& event, int64_t bytes) {
  MpiBuffer b;
  b.element_bytes = dtypeBytes(event.dtype);
  b.type = b.element_bytes == 4 ? MPI_FLOAT : MPI_INT16_T;
  if (bytes % b.element_bytes != 0) {  // odd byte counts: bytes (summable, unlike MPI_BYTE)
    b.type = MPI_UINT8_T;
    b.element_bytes = 1;
  }
  b.elements = bytes / b.element_bytes;
  if (b.elements > INT_MAX) {
    EVSIM_THROW(Error, "'{}': {} elements exceed MPI's int count", event.signature(), b.elements);
  }
  return b;
}

// Fills with small non-zero values: sums over 8 ranks never overflow 16-bit integers.
std::vector<char> makeBuffer(int64_t elements, int64_t element_bytes) {
  std::vector<char> buffer(static_cast<size_t>(elements * element_bytes));
  if (element_bytes == 4) {
    for (int64_t i = 0; i < elements; ++i) reinterpret_cast<float*>(buffer.data())[i] = 1.0f;
  } else if (element_bytes == 2) {
    for (int64_t i = 0; i < elements; ++i) reinterpret_cast<int16_t*>(buffer.data())[i] = 1;
  } else {
    std::fill(buffer.begin(), buffer.end(), char{1});
  }
  return buffer;
}

}  // namespace

CpuBackend::CpuBackend(uint64_t seed, int ranks_on_host) : seed_(seed) {
  setCpuKernelThreads(cpuThreadsPerRank(ranks_on_host));
}

int CpuBackend::computeSlots(int ranks_on_host) const {
  return std::max(1, std::min(ranks_on_host, hostCores()));
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

std::string CpuBackend::deviceName() const { return cpuModelName(); }

std::vector<double> CpuBackend::timeCompute(const Event& event, int warmup, int repeats) {
  // Copies of the kernel, each with its own buffers, taken in turn: between two runs of one copy
  // the others pass more than the last-level cache, so every timed run reads its data from memory,
  // as inside an iteration (kernels/cpu/cpu_host.h). The CPU kernels work in fp32. Tiny kernels
  // stop at kMaxKernelCopies, partly cached: their time is small either way.
  const int64_t kernel_bytes =
      std::max<int64_t>(1, event.memory_bytes * 4 / std::max<int64_t>(1, dtypeBytes(event.dtype)));
  const int64_t wanted = 2 * lastLevelCacheBytes() / kernel_bytes + 1;
  const int copies = static_cast<int>(std::clamp<int64_t>(wanted, 1, kMaxKernelCopies));
  std::vector<std::unique_ptr<ComputeKernel>> kernels;
  for (int c = 0; c < copies; ++c) kernels.push_back(makeCpuKernel(event, seed_ + 104729 * c));
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

std::vector<double> CpuBackend::timeP2P(const Event& event, const CommGroup& group, int warmup,
                                        int repeats) {
  EVSIM_CHECK(group.size == 2, "p2p over {} ranks", group.size);
  MpiBuffer layout = mpiBuffer(event, event.message_bytes);
  std::vector<char> buffer = makeBuffer(layout.elements, layout.element_bytes);
  const bool sender = group.rank == 0;
  std::vector<double> samples;
  for (int i = 0; i < warmup + repeats; ++i) {
    EVSIM_MPI_CHECK(MPI_Barrier(group.comm));
    Clock::time_point start = Clock::now();
    if (sender) {
      EVSIM_MPI_CHECK(MPI_Send(buffer.data(), static_cast<int>(layout.elements), layout.type, 1,
                               /*tag=*/i, group.comm));
    } else {
      EVSIM_MPI_CHECK(MPI_Recv(buffer.data(), static_cast<int>(layout.elements), layout.type, 0,
                               /*tag=*/i, group.comm, MPI_STATUS_IGNORE));
    }
    double us = elapsedUs(start);
    if (i >= warmup) samples.push_back(us);
  }
  return samples;
}

std::vector<double> CpuBackend::timeCollective(const Event& event, const CommGroup& group,
                                               int warmup, int repeats) {
  MpiBuffer full = mpiBuffer(event, event.message_bytes);
  // Reduce-scatter and all-gather split the full buffer into one shard per rank; a remainder of
  // fewer than group.size elements is dropped (it would not change the time measurably).
  const int64_t shard = full.elements / group.size;
  EVSIM_CHECK(event.kind == EventKind::kAllReduce || shard > 0, "'{}': fewer elements than ranks",
              event.signature());
  std::vector<char> send, recv;
  if (event.kind == EventKind::kAllGather) {
    send = makeBuffer(shard, full.element_bytes);
    recv = makeBuffer(shard * group.size, full.element_bytes);
  } else {
    send = makeBuffer(event.kind == EventKind::kAllReduce ? full.elements : shard * group.size,
                      full.element_bytes);
    recv =
        makeBuffer(event.kind == EventKind::kAllReduce ? full.elements : shard, full.element_bytes);
  }
  std::vector<double> samples;
  for (int i = 0; i < warmup + repeats; ++i) {
    EVSIM_MPI_CHECK(MPI_Barrier(group.comm));
    Clock::time_point start = Clock::now();
    switch (event.kind) {
      case EventKind::kAllReduce:
        EVSIM_MPI_CHECK(MPI_Allreduce(send.data(), recv.data(), static_cast<int>(full.elements),
                                      full.type, MPI_SUM, group.comm));
        break;
      case EventKind::kReduceScatter:
        EVSIM_MPI_CHECK(MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(shard),
                                                 full.type, MPI_SUM, group.comm));
        break;
      case EventKind::kAllGather:
        EVSIM_MPI_CHECK(MPI_Allgather(send.data(), static_cast<int>(shard), full.type, recv.data(),
                                      static_cast<int>(shard), full.type, group.comm));
        break;
      default:
        EVSIM_THROW(Error, "'{}' is not a collective", event.signature());
    }
    double us = elapsedUs(start);
    if (i >= warmup) samples.push_back(us);
  }
  return samples;
}

}  // namespace evsim

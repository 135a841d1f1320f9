#pragma once
// CPU backend: compute events through kernels/cpu timed with steady_clock, communication through
// MPI (MPI_Send/MPI_Recv, MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather), each repetition
// after a barrier of the measuring ranks. It needs no GPU, so the whole profiler is exercised in
// CI.

#include <cstdint>

#include "profiler/backend.h"

namespace evsim {

class CpuBackend : public ProfilerBackend {
 public:
  // `seed` picks the kernels' random inputs (the harness passes one per rank). `ranks_on_host`
  // ranks share this host's cores: each gets cpuThreadsPerRank of them for its BLAS.
  CpuBackend(uint64_t seed, int ranks_on_host);

  std::string name() const override { return "cpu"; }
  std::string deviceName() const override;
  std::map<std::string, std::string> versions() const override { return {}; }

  // At most one timing rank per core: two ranks on one core would each time a kernel at half speed.
  int computeSlots(int ranks_on_host) const override;
  std::vector<double> timeCompute(const Event& event, int warmup, int repeats) override;
  std::vector<double> timeP2P(const Event& event, const CommGroup& group, int warmup,
                              int repeats) override;
  std::vector<double> timeCollective(const Event& event, const CommGroup& group, int warmup,
                                     int repeats) override;

 private:
  uint64_t seed_;
};

// "model name" of /proc/cpuinfo, or "cpu" when it cannot be read.
std::string cpuModelName();

}  // namespace evsim

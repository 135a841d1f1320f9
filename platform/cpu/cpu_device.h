#pragma once
// The CPU platform: compute events through kernels/cpu timed with steady_clock, communication
// through MPI (the events/collectives registry's MPI calls), each repetition after a barrier of the
// measuring ranks; rank programs run by
// runner/'s CpuRankExecutor with this device's seed and wait mode. It needs no
// GPU, so both tools are exercised whole in CI.

#include <cstdint>

#include "kernels/kernel.h"
#include "platform/device.h"
#include "mpi/mpi_wait.h"

namespace evsim {

class CpuDevice : public Device {
 public:
  // `seed` picks the kernels' random inputs (the harness passes one per rank). `ranks_on_host`
  // ranks share the host's `host_cores` cores (MpiWorld::host_cores): each gets cpuThreadsPerRank
  // of them for its BLAS, in eventprof and eventrun alike (so eventrun runs the kernels as they
  // were profiled). `wait`: how an executor waits for MPI.
  CpuDevice(uint64_t seed, int ranks_on_host, int host_cores, WaitMode wait = WaitMode::kSpin);

  std::string platform() const override { return "cpu"; }
  std::string deviceName() const override;
  std::map<std::string, std::string> versions() const override { return {}; }

  // At most one timing rank per core: two ranks on one core would each time a kernel at half speed.
  int computeSlots(int ranks_on_host) const override;
  std::string cannotMeasure(const Event& event) const override;
  std::vector<double> timeCompute(const Event& event, int warmup, int repeats) override;
  std::vector<double> timeP2P(const Event& event, const CommGroup& group, int warmup,
                              int repeats) override;
  std::vector<double> timeCollective(const Event& event, const CommGroup& group, int warmup,
                                     int repeats) override;
  // What eventrun's CPU executor (runner/executor_factory.h) runs programs with.
  uint64_t seed() const { return seed_; }
  WaitMode waitMode() const { return wait_; }
  // The kernel on a second thread while this (MPI) thread runs the transfer in a loop, until
  // every member's kernels are done (cpu_overlap.cpp).
  OverlapSamples timeComputeBeside(const Event& compute, const Event& transfer,
                                   const CommGroup& group, int warmup, int repeats) override;

 private:
  uint64_t seed_;
  int host_cores_;
  WaitMode wait_;
};

// Copies of `event`'s CPU kernel (inputs from `seed`) to take in turn, enough that each run reads
// its data from memory rather than the last-level cache.
std::vector<std::unique_ptr<ComputeKernel>> cacheColdCopies(const Event& event, uint64_t seed);

// "model name" of /proc/cpuinfo, or "cpu" when it cannot be read.
std::string cpuModelName();

}  // namespace evsim

#pragma once
// What a profiling backend measures. The harness (profile_session.cpp) decides what to measure,
// on which ranks, and how per-rank times become one record; a backend only times one event on this
// rank. Backends: CpuBackend (steady_clock + MPI, always built) and the CUDA backend (CUPTI + NCCL,
// profiler/cuda/, built when EVSIM_WITH_CUDA). backend_factory.cpp is the one place that chooses.
//
// Times are microseconds, one entry per timed repetition, warm-up runs excluded. Call order: every
// rank of `group` calls the communication methods for the same event at the same time (they are
// collective over group.comm); timeCompute is local to this rank.

#include <mpi.h>

#include <map>
#include <string>
#include <vector>

#include "events/event.h"
#include "mpi/comm_group.h"

namespace evsim {

class ProfilerBackend {
 public:
  virtual ~ProfilerBackend() = default;

  virtual std::string name() const = 0;        // "cpu" | "cuda": the profile's metadata.backend
  virtual std::string deviceName() const = 0;  // this rank's device, for metadata.devices
  // Versions of the backend's own libraries ("cuda", "nccl", "cupti"); MPI's is added by the
  // harness.
  virtual std::map<std::string, std::string> versions() const = 0;
  // One line about how this rank timed its events worth printing after the run ("" for none).
  virtual std::string timingNote() const { return ""; }

  // How many of the `ranks_on_host` ranks sharing a host may time compute events at once without
  // slowing each other: one per GPU on CUDA (every rank has its own), the host's cores on the CPU.
  virtual int computeSlots(int ranks_on_host) const { return ranks_on_host; }
  // `warmup` untimed runs, then `repeats` timed runs of a compute event on this rank's device.
  virtual std::vector<double> timeCompute(const Event& event, int warmup, int repeats) = 0;
  // One side of a point-to-point transfer of event.message_bytes: group.size == 2, group rank 0
  // sends, rank 1 receives. Returns this side's times; the harness keeps min(send, recv).
  virtual std::vector<double> timeP2P(const Event& event, const CommGroup& group, int warmup,
                                      int repeats) = 0;
  // The event's collective (all-reduce, reduce-scatter, all-gather) over group, with
  // event.message_bytes as the full buffer (see comm_math.h). Returns this rank's times.
  virtual std::vector<double> timeCollective(const Event& event, const CommGroup& group, int warmup,
                                             int repeats) = 0;
};

}  // namespace evsim

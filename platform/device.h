#pragma once
// One Device per platform: this rank's kernels, communicator and clock, the single thing both
// tools stand on. eventprof measures events on it (timeCompute / timeP2P / timeCollective);
// eventrun runs a whole rank program with it (runner/executor_factory.h builds the platform's
// executor). Platforms: CpuDevice (kernels/cpu + MPI + steady_clock, platform/cpu/, always built)
// and the CUDA device (kernels/cuda + NCCL + CUPTI / CUDA events, platform/cuda/, built when
// EVSIM_WITH_CUDA). device_factory.cpp is the one file that chooses; adding a platform is one
// folder here plus one branch there (and its executor in runner/executor_factory.cpp).
//
// Times are microseconds, one entry per timed repetition, warm-up runs excluded. Call order: every
// rank of `group` calls the communication methods for the same event at the same time (they are
// collective over group.comm); timeCompute is local to this rank.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "events/event.h"
#include "mpi/comm_group.h"

namespace evsim {

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string platform() const = 0;    // "cpu" | "cuda": the profile's metadata.backend
  virtual std::string deviceName() const = 0;  // this rank's device, for metadata.devices
  // Versions of the platform's own libraries ("cuda", "nccl", "cupti"); MPI's is added by the
  // harness.
  virtual std::map<std::string, std::string> versions() const = 0;
  // The device's maximum SM clock in MHz (0 when the platform has none to report: the CPU), for
  // the sustained-clock measurement (profiler/sustained_gemm.h).
  virtual double maxClockMhz() const { return 0; }
  // One line about how this rank timed its events worth printing after the run ("" for none).
  virtual std::string timingNote() const { return ""; }

  // --- measuring one event (eventprof) ---
  // How many of the `ranks_on_host` ranks sharing a host may time compute events at once without
  // slowing each other: one per GPU on CUDA (every rank has its own), the host's cores on the CPU.
  virtual int computeSlots(int ranks_on_host) const { return ranks_on_host; }
  // Why this platform cannot measure `event` at all ("" when it can): checked for every event
  // before measuring starts, so a run does not fail halfway (issue 33).
  virtual std::string cannotMeasure(const Event& /*event*/) const { return ""; }
  // `warmup` untimed runs, then `repeats` timed runs of a compute event on this rank's device.
  virtual std::vector<double> timeCompute(const Event& event, int warmup, int repeats) = 0;
  // One side of a point-to-point transfer of event.message_bytes: group.size == 2, group rank 0
  // sends, rank 1 receives. Returns this side's times; the harness keeps min(send, recv).
  virtual std::vector<double> timeP2P(const Event& event, const CommGroup& group, int warmup,
                                      int repeats) = 0;
  // The event's collective (events/collectives/ registry) over group, with event.message_bytes as
  // the full buffer. Returns this rank's times.
  virtual std::vector<double> timeCollective(const Event& event, const CommGroup& group, int warmup,
                                             int repeats) = 0;

  // --- overlap slowdown (eventprof --overlap; modeler/overlap_slowdown.h) ---
  // A compute event timed alone and while `transfer` (a collective over `group`, with
  // transfer.message_bytes as its buffer) is in flight on this device the whole time: `repeats`
  // samples of each, warm-up runs excluded, taken the same way so that they compare. Collective
  // over group.comm (every member calls it at once). Beside-samples are only of repetitions that
  // ran wholly inside the transfers' span. Platforms that cannot say so throw CollectiveInputError.
  struct OverlapSamples {
    std::vector<double> alone_us;
    std::vector<double> beside_us;
  };
  virtual OverlapSamples timeComputeBeside(const Event& compute, const Event& transfer,
                                           const CommGroup& group, int warmup, int repeats);
};

}  // namespace evsim

#pragma once
// The measurement harness: decides (on rank 0) what to measure, spreads compute events over all
// ranks, measures communication events on the groups group_planner.h picks, turns per-rank samples
// into records, and has rank 0 re-write the profile database after every completed step, so a
// crash or Ctrl-C loses at most the events in flight.
//
// Call order: MPI_Init -> queryMpiWorld -> discoverTopology -> makeDevice
// (platform/device_factory.h) -> ProfileSession
// ::run on every rank (collective over MPI_COMM_WORLD) -> MPI_Finalize.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "events/event.h"
#include "io/profile_db.h"
#include "mpi/mpi_env.h"
#include "mpi/topology.h"
#include "platform/device.h"
#include "profiler/modeled_cost.h"
#include "profiler/progress.h"

namespace evsim {

struct ProfileOptions {
  std::string output_path;
  int warmup = 5;    // untimed runs before each event's timed repetitions
  int repeats = 20;  // timed repetitions per event
  bool resume = false;
  bool intra_node_only = false;
  std::FILE* log = stderr;  // rank 0's progress and summary (nullptr: quiet)
};

struct ProfileSummary {
  size_t measured_compute = 0;
  size_t measured_communication = 0;
  size_t already_measured = 0;
  std::vector<std::string> unmeasurable;  // "signature: reason"
  size_t scaled = 0;                      // communication records scaled from a smaller group
  size_t records_in_profile = 0;
  double wall_s = 0;
  // Devices the run holds: the ranks that time compute (every rank on GPUs; on a CPU host with
  // more ranks than cores, its cores), so held device-seconds do not count ranks sharing a core.
  int devices = 0;
  double heldDeviceSeconds() const { return wall_s * devices; }
  // Profiling cost: the sum over ranks of the time spent inside device measurement calls.
  double measuring_device_s = 0;
  // One modeled iteration of the strategies covered (set by the caller after run(); empty when
  // the events came from a file and the strategies are unknown).
  std::optional<ModeledIterationCost> modeled;
};

class ProfileSession {
 public:
  ProfileSession(const MpiWorld& world, const Topology& topo, Device& device,
                 ProfileOptions options);

  // Collective. `wanted` is read on rank 0 only. Throws CollectiveInputError (all ranks) for bad
  // input found before measuring: unmeasurable events, a profile that cannot be resumed, an
  // unwritable output.
  ProfileSummary run(const std::vector<Event>& wanted);
  // The profile's metadata (backend, hosts, devices, versions). Collective.
  ProfileMetadata collectMetadata();

 private:
  struct Work;
  Work prepare(const std::vector<Event>& wanted, const ProfileMetadata& metadata, ProfileDb& db);
  // World ranks that time compute events (collective), ascending.
  std::vector<int> timingRanks() const;
  void measureCompute(const std::vector<Event>& events, const std::vector<int>& timers,
                      ProfileDb& db, Progress& progress, size_t& done);
  void measureCommunication(const std::vector<Event>& events, ProfileDb& db, Progress& progress,
                            size_t& done, ProfileSummary& summary);
  void save(const ProfileDb& db) const;

  MpiWorld world_;
  Topology topo_;
  Device& device_;
  ProfileOptions options_;
  double busy_s_ = 0;  // this rank's time inside device measurement calls
};

void printSummary(std::FILE* out, const ProfileSummary& summary, const std::string& output_path,
                  int world_size);

}  // namespace evsim

#pragma once
// What this run measures, decided on rank 0 before any measurement: the events still missing from
// a resumed profile, split into compute and communication, minus those the profiling cluster
// cannot measure. MPI-free and deterministic, so it is unit-tested directly.

#include <optional>
#include <string>
#include <vector>

#include "events/event.h"
#include "io/profile_db.h"
#include "mpi/topology.h"

namespace evsim {

struct WorkPlan {
  std::vector<Event> compute;
  std::vector<Event> communication;
  std::vector<std::string> already_measured;  // signatures found in the resumed profile
  std::vector<std::string> unmeasurable;      // "signature: reason", skipped with --intra-node-only

  size_t total() const { return compute.size() + communication.size(); }
};

// `previous` is the profile being resumed (nullptr for a fresh run). Inter-node events on a
// one-node cluster stop the run (InputError saying what to do) unless `intra_node_only`, in which
// case they are listed in `unmeasurable`; intra-node events where no node has 2 ranks always stop.
WorkPlan planWork(const std::vector<Event>& wanted, const ProfileDb* previous, const Topology& topo,
                  bool intra_node_only);

// Why a profile measured with `previous` metadata cannot be continued on `current` hardware
// (backend, device names, world size, ranks per node), or nullopt when it can.
std::optional<std::string> resumeMismatch(const ProfileMetadata& previous,
                                          const ProfileMetadata& current);
// Throws InputError naming `path` with resumeMismatch's reason.
void checkResumable(const ProfileMetadata& previous, const ProfileMetadata& current,
                    const std::string& path);

}  // namespace evsim

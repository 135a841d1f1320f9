#pragma once
// NCCL's choice of algorithm and protocol for one collective, and its time: every algorithm
// (algorithm.h) x protocol (LL, LL128, Simple) that runs the collective on the group's hardware
// is estimated, and the cheapest wins, as NCCL's tuner does (src/graph/tuning.cc, enqueue.cc). A
// forced algorithm (the cluster's nccl.algorithm, or `--nccl-algo`, as NCCL_ALGO) restricts the
// choice to it; for a collective it does not run (tree for all-gather), the tuner chooses as if
// unforced, as NCCL falls back. All times in µs; `bytes` is nccl-tests' size.
// How it chooses: by NCCL's own estimate (nccl_estimate.h: its tuning.cc tables), exactly as NCCL
// would; the chosen pair is then costed by the fitted physics (algorithm.h) plus the cluster's
// fixed per-collective cost (nccl.launch_us).

#include <cstdint>
#include <string>

#include "config/cluster_config.h"
#include "events/event.h"
#include "modeler/network/fabric.h"

namespace evsim {

struct CollectiveChoice {
  double time_us = 0;
  std::string algorithm;  // "ring", "tree", ..., "p2p"; "none" for a group of one
  NcclProtocol protocol = NcclProtocol::kSimple;
  GroupOnFabric group;
};

class NcclTuner {
 public:
  // `forced_algorithm` overrides the cluster's nccl.algorithm when not empty ("auto" or a name of
  // ncclAlgorithmNames(); anything else is an InputError).
  explicit NcclTuner(const ClusterConfig& cluster, std::string forced_algorithm = "");

  CollectiveChoice choose(EventKind kind, const Placement& placement, int64_t bytes) const;
  double timeUs(EventKind kind, const Placement& placement, int64_t bytes) const {
    return choose(kind, placement, bytes).time_us;
  }

 private:
  const ClusterConfig& cluster_;  // outlives the tuner
  NetworkTopology topology_;      // a copy: the tuner can be copied with its owner
  std::string forced_;
};

}  // namespace evsim

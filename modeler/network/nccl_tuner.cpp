// The argmin over algorithms and protocols; nccl_tuner.h states the contract.
#include "modeler/network/nccl_tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"
#include "modeler/network/algorithm.h"

namespace evsim {

namespace {

// Every algorithm, one file each (algorithm.h); adding one is its file and a line here.
const std::vector<const NcclAlgorithm*>& allAlgorithms() {
  static const std::vector<const NcclAlgorithm*> all = {
      &algorithms::kRing,    &algorithms::kTree, &algorithms::kNvls, &algorithms::kNvlsTree,
      &algorithms::kCollNet, &algorithms::kPat,  &algorithms::kP2p};
  return all;
}

constexpr NcclProtocol kProtocols[] = {NcclProtocol::kLL, NcclProtocol::kLL128,
                                       NcclProtocol::kSimple};

}  // namespace

NcclTuner::NcclTuner(const ClusterConfig& cluster, std::string forced_algorithm)
    : cluster_(cluster) {
  NetworkTopology scratch;
  topology_ = topologyOf(cluster, scratch);
  forced_ = forced_algorithm.empty() ? topology_.nccl.algorithm : std::move(forced_algorithm);
  const auto& names = ncclAlgorithmNames();
  if (forced_ != "auto" && std::find(names.begin(), names.end(), forced_) == names.end()) {
    EVSIM_THROW(InputError,
                "NCCL algorithm '{}': must be auto, ring, tree, nvls, nvls_tree, collnet or pat",
                forced_);
  }
}

CollectiveChoice NcclTuner::choose(EventKind kind, const Placement& placement,
                                   int64_t bytes) const {
  CollectiveChoice best;
  best.group = mapGroup(cluster_, topology_, placement);
  if (placement.group_size < 2 && kind != EventKind::kP2P) {
    best.algorithm = "none";
    return best;
  }
  for (const bool only_forced : {true, false}) {
    if (only_forced && forced_ == "auto") continue;
    best.time_us = std::numeric_limits<double>::infinity();
    for (const NcclAlgorithm* algorithm : allAlgorithms()) {
      if (only_forced && algorithm->name != forced_) continue;
      for (NcclProtocol protocol : kProtocols) {
        std::optional<AlgorithmCost> cost = algorithm->cost(kind, best.group, protocol, bytes);
        if (!cost || cost->algbw_gb_s <= 0) continue;
        const double t = cost->timeUs(bytes);
        if (t < best.time_us) {
          best.time_us = t;
          best.algorithm = std::string(algorithm->name);
          best.protocol = protocol;
        }
      }
    }
    if (std::isfinite(best.time_us)) return best;
  }
  EVSIM_THROW(Error, "internal: no NCCL algorithm runs {} over {} ranks on {} nodes",
              eventKindName(kind), placement.group_size, placement.nodes);
}

}  // namespace evsim

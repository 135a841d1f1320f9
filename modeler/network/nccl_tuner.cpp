// The argmin over algorithms and protocols; nccl_tuner.h states the contract.
#include "modeler/network/nccl_tuner.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "common/error.h"
#include "modeler/network/algorithm.h"
#include "modeler/network/nccl_estimate.h"

namespace evsim {

namespace {

// Every algorithm, one file each (algorithm.h); adding one is its file and a line here. In NCCL's
// order (tree, ring, CollNet, NVLS, NVLS-tree, PAT): on a tie NCCL keeps the first.
const NcclAlgorithm* const kAlgorithms[] = {&algorithms::kTree,    &algorithms::kRing,
                                            &algorithms::kCollNet, &algorithms::kNvls,
                                            &algorithms::kNvlsTree, &algorithms::kPat};

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
  // Send/recv and all-to-all: grouped point-to-point, no tuner choice.
  if (kind == EventKind::kP2P || kind == EventKind::kAllToAll) {
    std::optional<AlgorithmCost> cost =
        algorithms::kP2p.cost(kind, best.group, NcclProtocol::kSimple, bytes);
    if (cost && cost->algbw_gb_s > 0) {
      best.time_us = cost->timeUs(bytes) + best.group.tuning->launch_us;
      best.algorithm = std::string(algorithms::kP2p.name);
      return best;
    }
  }
  // NCCL's own estimate chooses (nccl_estimate.h); the fitted physics costs the choice. A pair
  // NCCL would run but the physics has no formula for is passed over for NCCL's next best.
  for (const bool only_forced : {true, false}) {
    if (only_forced && forced_ == "auto") continue;
    struct Candidate {
      double nccl_us;
      const NcclAlgorithm* algorithm;
      NcclProtocol protocol;
    };
    Candidate candidates[std::size(kProtocols) * std::size(kAlgorithms)];
    int count = 0;
    for (const NcclAlgorithm* algorithm : kAlgorithms) {
      if (only_forced && algorithm->name != forced_) continue;
      for (NcclProtocol protocol : kProtocols) {
        std::optional<AlgorithmCost> nccl =
            ncclEstimate(algorithm->name, kind, best.group, protocol, bytes);
        if (nccl) candidates[count++] = {nccl->timeUs(bytes), algorithm, protocol};
      }
    }
    std::stable_sort(candidates, candidates + count,
                     [](const Candidate& x, const Candidate& y) { return x.nccl_us < y.nccl_us; });
    for (int i = 0; i < count; ++i) {
      std::optional<AlgorithmCost> cost =
          candidates[i].algorithm->cost(kind, best.group, candidates[i].protocol, bytes);
      if (!cost || cost->algbw_gb_s <= 0) continue;
      best.time_us = cost->timeUs(bytes) + best.group.tuning->launch_us;
      best.algorithm = std::string(candidates[i].algorithm->name);
      best.protocol = candidates[i].protocol;
      return best;
    }
  }
  EVSIM_THROW(Error, "internal: no NCCL algorithm runs {} over {} ranks on {} nodes",
              eventKindName(kind), placement.group_size, placement.nodes);
}

}  // namespace evsim

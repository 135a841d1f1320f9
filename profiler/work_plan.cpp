#include "profiler/work_plan.h"

#include "common/error.h"
#include "profiler/group_planner.h"

namespace evsim {

WorkPlan planWork(const std::vector<Event>& wanted, const ProfileDb* previous, const Topology& topo,
                  bool intra_node_only) {
  WorkPlan plan;
  std::vector<std::string> inter_blocked, intra_blocked;
  for (const Event& event : wanted) {
    std::string signature = event.signature();
    if (previous != nullptr && previous->find(signature) != nullptr) {
      plan.already_measured.push_back(signature);
      continue;
    }
    if (!isCommunication(event.kind)) {
      plan.compute.push_back(event);
      continue;
    }
    GroupPlan group = planEventGroup(topo, event);
    if (group.unmeasurable.empty()) {
      plan.communication.push_back(event);
    } else if (event.placement.interNode() && topo.nodes() < 2) {
      inter_blocked.push_back(signature);
      plan.unmeasurable.push_back(signature + ": " + group.unmeasurable);
    } else {
      intra_blocked.push_back(signature + ": " + group.unmeasurable);
    }
  }
  if (!intra_blocked.empty()) {
    EVSIM_THROW(InputError,
                "{} communication event(s) cannot be measured on this cluster ({} ranks on {} "
                "node(s)), e.g. '{}'; run more ranks per node",
                intra_blocked.size(), topo.world_size, topo.nodes(), intra_blocked.front());
  }
  if (!inter_blocked.empty() && !intra_node_only) {
    EVSIM_THROW(InputError,
                "{} inter-node event(s) need at least 2 nodes, but the profiling cluster is 1 node "
                "({}), e.g. '{}'; run on 2+ nodes, emulate nodes with --ranks-per-node K, or pass "
                "--intra-node-only to leave them unmeasured",
                inter_blocked.size(), topo.node_names.front(), inter_blocked.front());
  }
  return plan;
}

std::optional<std::string> resumeMismatch(const ProfileMetadata& previous,
                                          const ProfileMetadata& current) {
  if (previous.backend != current.backend) {
    return fmt::format("backend {} there, {} now", previous.backend, current.backend);
  }
  if (previous.world_size != current.world_size) {
    return fmt::format("world size {} there, {} now", previous.world_size, current.world_size);
  }
  if (previous.ranks_per_node != current.ranks_per_node) {
    return fmt::format("{} ranks per node there, {} now", previous.ranks_per_node,
                       current.ranks_per_node);
  }
  if (previous.devices != current.devices) {
    return fmt::format("devices [{}] there, [{}] now", fmt::join(previous.devices, ", "),
                       fmt::join(current.devices, ", "));
  }
  return std::nullopt;
}

void checkResumable(const ProfileMetadata& previous, const ProfileMetadata& current,
                    const std::string& path) {
  if (auto why = resumeMismatch(previous, current)) {
    EVSIM_THROW(InputError,
                "{}: cannot --resume: it was measured on other hardware ({}); write to a new -o "
                "file or drop --resume to start over",
                path, *why);
  }
}

}  // namespace evsim

#include "events/comm_factors.h"

#include "common/error.h"
#include "events/collective.h"

namespace evsim {

double busBandwidthFactor(EventKind kind, int group_size) {
  EVSIM_CHECK(group_size >= 1, "group size {} of {}", group_size, eventKindName(kind));
  if (kind == EventKind::kCompute) return 1.0;
  return collectiveOf(kind).bus_factor(group_size);
}

double ringScaleFactor(EventKind kind, int measured_group_size, int target_group_size) {
  EVSIM_CHECK(measured_group_size >= 2 && measured_group_size <= target_group_size,
              "cannot scale from {} to {} ranks", measured_group_size, target_group_size);
  if (kind == EventKind::kCompute || kind == EventKind::kP2P) return 1.0;
  // All-to-all and broadcast do not follow the ring volume factor: callers never scale them
  // (profiler/group_planner.h's planEventGroup, modeler/profile_sources.h).
  EVSIM_CHECK(collectiveOf(kind).ring_scalable || measured_group_size == target_group_size,
              "{} cannot be scaled from {} to {} ranks", eventKindName(kind), measured_group_size,
              target_group_size);
  if (measured_group_size == target_group_size) return 1.0;
  return busBandwidthFactor(kind, target_group_size) /
         busBandwidthFactor(kind, measured_group_size);
}

}  // namespace evsim

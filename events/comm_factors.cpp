#include "events/comm_factors.h"

#include "common/error.h"

namespace evsim {

namespace {
// (n-1)/n: the share of the buffer each rank of a ring sends per pass.
double ringShare(int n) { return double(n - 1) / double(n); }
}  // namespace

double busBandwidthFactor(EventKind kind, int group_size) {
  EVSIM_CHECK(group_size >= 1, "group size {} of {}", group_size, eventKindName(kind));
  switch (kind) {
    case EventKind::kAllReduce:
      return 2.0 * ringShare(group_size);
    case EventKind::kReduceScatter:
    case EventKind::kAllGather:
      return ringShare(group_size);
    case EventKind::kP2P:
    case EventKind::kCompute:
      return 1.0;
  }
  return 1.0;
}

double ringScaleFactor(EventKind kind, int measured_group_size, int target_group_size) {
  EVSIM_CHECK(measured_group_size >= 2 && measured_group_size <= target_group_size,
              "cannot scale from {} to {} ranks", measured_group_size, target_group_size);
  if (kind == EventKind::kP2P || kind == EventKind::kCompute) return 1.0;
  return ringShare(target_group_size) / ringShare(measured_group_size);
}

}  // namespace evsim

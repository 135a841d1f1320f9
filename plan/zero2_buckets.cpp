#include "plan/zero2_buckets.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

int64_t zero2BucketElements(const Strategy& strategy, int64_t wire_bytes) {
  EVSIM_CHECK(wire_bytes > 0, "element of {} bytes", wire_bytes);
  if (strategy.dp_bucket_bytes <= 0) return kDeepSpeedReduceBucketElements;
  return std::max<int64_t>(1, strategy.dp_bucket_bytes / wire_bytes);
}

int64_t zero2BufferBytes(const Strategy& strategy, int64_t wire_bytes, int64_t elem_bytes) {
  return (strategy.dp_overlap ? 2 : 1) * zero2BucketElements(strategy, wire_bytes) * elem_bytes;
}

std::vector<Zero2Bucket> zero2Buckets(const std::vector<std::pair<int, int64_t>>& backward_layers,
                                      int64_t bucket_elements) {
  EVSIM_CHECK(bucket_elements > 0, "bucket of {} elements", bucket_elements);
  std::vector<Zero2Bucket> out;
  int64_t pending = 0;
  for (size_t i = 0; i < backward_layers.size(); ++i) {
    const auto& [layer, params] = backward_layers[i];
    pending += params;
    const bool last = i + 1 == backward_layers.size();
    // DeepSpeed reduces the bucket before a gradient that would overflow it goes in.
    if (pending > 0 && (last || pending + backward_layers[i + 1].second > bucket_elements)) {
      out.push_back({layer, pending});
      pending = 0;
    }
  }
  return out;
}

void overlapZero2Reductions(OpList& backward) {
  auto reduction = [&](size_t i) {
    return backward[i].stream == Stream::kDpComm &&
           (backward[i].name == kZero2ReduceName || backward[i].name == kZero2ExpertReduceName);
  };
  for (size_t i = 0; i < backward.size(); ++i) {
    if (!reduction(i)) continue;
    size_t next = i + 1;
    while (next < backward.size() &&
           !(reduction(next) && backward[next].layer != backward[i].layer)) {
      ++next;
    }
    // The last bucket: the epilogue waits for it (no op runs beside it).
    backward[i].overlap_ops = next < backward.size() ? static_cast<int>(next - i - 1) : 0;
  }
}

}  // namespace evsim

#pragma once
// `eventsim calibrate --overlap PROFILE`: the overlap slowdown factor per traffic kind
// (config/device_config.h, OverlapSlowdown) from kernels timed alone and beside a transfer
// (io/profile_db.h, OverlapRecord; eventprof --overlap).
//
// eventprof keeps the transfer in flight for the whole of every timed kernel, so by the rule of
// modeler/overlap_slowdown.h (the op progresses at rate 1/f while overlapped) a kernel of time a
// alone takes b = f a beside it. The fit is the least-squares f of b = f a over a kind's records
// (each kernel's median times): f = sum(a b) / sum(a^2), which weights long kernels most (their
// times are the least noisy). A measured f below 1 (noise: the transfer cannot speed a kernel up)
// is kept at 1 and said so in the source.

#include <optional>
#include <string>
#include <vector>

#include "io/profile_db.h"

namespace evsim {

struct OverlapFit {
  bool inter_node = false;  // the transfers' kind: across nodes (network) or inside one (NVLink)
  double factor = 1;        // fitted, in [1, OverlapSlowdown::kMax]
  double raw_factor = 1;    // before the bounds [1, OverlapSlowdown::kMax]
  int points = 0;
  double rms_error_pct = 0;  // of b against f a, over the points
  std::string source;        // "fitted: ..." for the device file
};

// One fit per traffic kind present among `records` (NVLink first). `origin` names the profile in
// the sources. Throws InputError when there are no records.
std::vector<OverlapFit> fitOverlapSlowdown(const std::vector<OverlapRecord>& records,
                                           const std::string& origin);

}  // namespace evsim

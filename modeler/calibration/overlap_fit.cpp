#include "modeler/calibration/overlap_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "config/device_config.h"

namespace evsim {

std::vector<OverlapFit> fitOverlapSlowdown(const std::vector<OverlapRecord>& records,
                                           const std::string& origin) {
  if (records.empty()) {
    EVSIM_THROW(InputError, "{}: no overlap records (measure them with eventprof --overlap)",
                origin);
  }
  std::vector<OverlapFit> out;
  for (bool inter_node : {false, true}) {
    double ab = 0, aa = 0;
    int n = 0;
    for (const OverlapRecord& r : records) {
      if (r.transfer.placement.interNode() != inter_node) continue;
      ab += r.alone.median_us * r.beside.median_us;
      aa += r.alone.median_us * r.alone.median_us;
      ++n;
    }
    if (n == 0) continue;
    OverlapFit fit;
    fit.inter_node = inter_node;
    fit.points = n;
    fit.raw_factor = ab / aa;
    // Kept inside what a device file accepts: below 1 is noise; past kMax no GPU slows (NCCL
    // takes a few SMs), but a loaded or oversubscribed CPU host does (the CPU backend's ranks
    // share cores), and the device file written must still load.
    fit.factor = std::clamp(fit.raw_factor, 1.0, OverlapSlowdown::kMax);
    double sq = 0;
    for (const OverlapRecord& r : records) {
      if (r.transfer.placement.interNode() != inter_node) continue;
      const double e = r.beside.median_us / (fit.factor * r.alone.median_us) - 1;
      sq += e * e;
    }
    fit.rms_error_pct = 100 * std::sqrt(sq / n);
    fit.source = fmt::format(
        "fitted: {} kernels alone and beside a{} transfer (eventprof --overlap) in {}: least "
        "squares of beside = f x alone{} (rms error {:.1f}%)",
        n, inter_node ? "n inter-node" : "n intra-node", origin,
        fit.raw_factor < 1 ? fmt::format(", measured {:.3f} < 1 kept at 1", fit.raw_factor)
        : fit.raw_factor > OverlapSlowdown::kMax
            ? fmt::format(", measured {:.3f} > {} kept at {}: a loaded or oversubscribed host, "
                          "not a GPU",
                          fit.raw_factor, OverlapSlowdown::kMax, OverlapSlowdown::kMax)
            : "",
        fit.rms_error_pct);
    out.push_back(fit);
  }
  return out;
}

}  // namespace evsim

#include "modeler/calibration/collective_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/error.h"
#include "common/units.h"
#include "events/comm_factors.h"
#include "modeler/calibration/nelder_mead.h"
#include "modeler/device_model.h"

namespace evsim {

namespace {

constexpr int kParameters = 5;
constexpr int kMaxEvaluations = 6000;

// Parameters live in log space: every one is positive, and their scales differ by 1e3.
CollectiveCurve curveAt(int group, const std::vector<double>& x) {
  CollectiveCurve c;
  c.group = group;
  c.floor_us = std::exp(x[0]);
  c.ll_latency_us = std::exp(x[1]);
  c.ll_busbw_gb_s = std::exp(x[2]);
  c.simple_latency_us = std::exp(x[3]);
  c.simple_busbw_gb_s = std::exp(x[4]);
  return c;
}

// The q-norm of log(predicted / measured) over the points.
double logErrorNorm(const CollectiveCurve& c, const std::vector<CollectivePoint>& points, int q) {
  double sum = 0;
  for (const CollectivePoint& p : points) {
    double e = std::abs(std::log(curveUs(c, EventKind::kAllReduce, c.group, p.bytes) / p.time_us));
    sum += std::pow(e, q);
  }
  return std::pow(sum / double(points.size()), 1.0 / q);
}

}  // namespace

CollectiveFit fitAllReduceCurve(int group, const std::vector<CollectivePoint>& points,
                                const std::string& what) {
  std::set<int64_t> sizes;
  for (const CollectivePoint& p : points) {
    if (p.bytes <= 0 || !(p.time_us > 0)) {
      EVSIM_THROW(InputError, "{}: a point of {} bytes in {} us cannot be fitted", what, p.bytes,
                  p.time_us);
    }
    sizes.insert(p.bytes);
  }
  if (group < 2 || sizes.size() < size_t{kParameters}) {
    EVSIM_THROW(InputError,
                "{}: an all-reduce curve over {} ranks needs >= 2 ranks and >= {} message sizes, "
                "got {}",
                what, group, kParameters, sizes.size());
  }
  // Starting points from the data: the smallest time as floor and latencies, the bus bandwidth
  // reached at the largest size for the bandwidth protocol, and fractions of it for the other.
  auto [smallest, largest] = std::minmax_element(
      points.begin(), points.end(),
      [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
  const double factor = busBandwidthFactor(EventKind::kAllReduce, group);
  const double t0 = smallest->time_us;
  const double top_busbw_gb_s =
      factor * double(largest->bytes) / largest->time_us * kUsPerSecond / kBytesPerGB;
  const std::vector<double> step(kParameters, 0.3);
  MinimizeResult best{{}, std::numeric_limits<double>::max(), 0};
  for (double ll_share : {0.4, 0.65}) {
    for (double latency_share : {0.3, 0.6}) {
      std::vector<double> x = {std::log(t0), std::log(t0 * latency_share),
                               std::log(top_busbw_gb_s * ll_share), std::log(t0),
                               std::log(top_busbw_gb_s)};
      auto objective = [&](int q) {
        return [&, q](const std::vector<double>& v) {
          return logErrorNorm(curveAt(group, v), points, q);
        };
      };
      MinimizeResult r = minimizeNelderMead(objective(2), x, step, kMaxEvaluations);
      r = minimizeNelderMead(objective(8), r.x, step, kMaxEvaluations);
      if (r.value < best.value) best = r;
    }
  }
  CollectiveFit fit;
  fit.curve = curveAt(group, best.x);
  fit.points = static_cast<int>(points.size());
  for (const CollectivePoint& p : points) {
    double e = std::abs(curveUs(fit.curve, EventKind::kAllReduce, group, p.bytes) / p.time_us - 1);
    fit.mean_abs_error_pct += 100 * e / double(points.size());
    fit.max_abs_error_pct = std::max(fit.max_abs_error_pct, 100 * e);
  }
  return fit;
}

}  // namespace evsim

#include "modeler/calibration/kernel_fit.h"

#include <cmath>

#include "common/error.h"
#include "modeler/calibration/fit_coordinates.h"
#include "modeler/device_model.h"

namespace evsim {

namespace {

constexpr double kGemmFamilySplitFlops = 1e9;  // issue 19's targets differ above and below

std::span<const fit_coordinates::Coordinate> kernelCoordinates() {
  return std::span(fit_coordinates::kAll).first(fit_coordinates::kKernelCount);
}

std::string familyOf(const Event& e) {
  if (e.op == "gemm" || e.op == "bgemm") {
    return e.flops >= kGemmFamilySplitFlops ? e.op + " >= 1 GFLOP" : e.op + " < 1 GFLOP";
  }
  return e.op;
}

std::vector<double> predictUs(const std::vector<KernelPoint>& points,
                              const ClusterConfig& cluster) {
  DeviceModel model(cluster);
  std::vector<double> out;
  out.reserve(points.size());
  for (const KernelPoint& p : points) out.push_back(model.estimateUs(p.record->event));
  return out;
}

}  // namespace

std::vector<KernelPoint> kernelPoints(const ProfileDb& db, int hold_out_every,
                                      const std::string& origin) {
  std::vector<KernelPoint> points;
  int index = 0;
  for (const ProfileRecord& r : db.records()) {
    if (r.event.kind != EventKind::kCompute) continue;
    if (!(r.time.median_us > 0)) {
      EVSIM_THROW(InputError, "{}: {}: median time {} us is not positive", origin, r.signature,
                  r.time.median_us);
    }
    const bool held_out = hold_out_every > 0 && index % hold_out_every == hold_out_every - 1;
    points.push_back({&r, !held_out, familyOf(r.event)});
    ++index;
  }
  if (points.empty()) EVSIM_THROW(InputError, "{}: no compute records to fit kernels to", origin);
  return points;
}

double kernelMapePct(const std::vector<KernelPoint>& points,
                     const std::vector<double>& predicted_us, bool in_fit,
                     const std::string& family) {
  double sum = 0;
  int count = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].in_fit != in_fit || (!family.empty() && points[i].family != family)) continue;
    sum += std::abs(predicted_us[i] / points[i].record->time.median_us - 1);
    ++count;
  }
  return count > 0 ? 100 * sum / count : -1;
}

KernelFit fitKernelModel(const std::vector<KernelPoint>& points, ClusterConfig cluster,
                         const std::string& source, int max_evaluations, double prior_weight) {
  EVSIM_CHECK(cluster.device.model.has_value(), "kernel fit needs a starting model");
  int fitted = 0;
  for (const KernelPoint& p : points) fitted += p.in_fit ? 1 : 0;
  if (fitted == 0) EVSIM_THROW(InputError, "no kernel is selected for the fit");

  DeviceModelParams& params = *cluster.device.model;
  const std::vector<double> start = fit_coordinates::toCoordinates(params, kernelCoordinates());
  auto mean_squared_log_error = [&](const std::vector<double>& x) {
    fit_coordinates::setFromCoordinates(x, kernelCoordinates(), params);
    std::vector<double> predicted = predictUs(points, cluster);
    double sum = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      if (!points[i].in_fit) continue;
      const double e = std::log(predicted[i] / points[i].record->time.median_us);
      sum += e * e;
    }
    return sum / fitted;
  };
  int evaluations = 0;
  const std::vector<double> best = fit_coordinates::minimizeWithPrior(
      mean_squared_log_error, start, prior_weight, max_evaluations, 1e-10, evaluations);
  fit_coordinates::setFromCoordinates(best, kernelCoordinates(), params);
  for (const fit_coordinates::Coordinate& c : kernelCoordinates()) {
    (params.*c.param).source = source;
  }

  KernelFit fit;
  fit.params = params;
  fit.predicted_us = predictUs(points, cluster);
  fit.evaluations = evaluations;
  return fit;
}

}  // namespace evsim

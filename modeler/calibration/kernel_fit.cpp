#include "modeler/calibration/kernel_fit.h"

#include <cmath>
#include <map>

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
  if (isGemmOp(e.op)) {
    return e.flops >= kGemmFamilySplitFlops ? e.op + " >= 1 GFLOP" : e.op + " < 1 GFLOP";
  }
  return e.op;
}

// Memory-bound ops with enough fitted kernels to get an efficiency of their own.
constexpr int kMinKernelsPerOp = 2;

std::vector<std::string> perOpMemoryOps(const std::vector<KernelPoint>& points) {
  std::map<std::string, int> fitted;
  for (const KernelPoint& p : points) {
    const std::string& op = p.record->event.op;
    if (p.in_fit && !isGemmOp(op)) ++fitted[op];
  }
  std::vector<std::string> ops;
  for (const auto& [op, n] : fitted) {
    if (n >= kMinKernelsPerOp) ops.push_back(op);
  }
  return ops;
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
  const std::vector<std::string> ops = perOpMemoryOps(points);
  auto squared_log_error = [&](const std::vector<size_t>& which) {
    DeviceModel model(cluster);
    double sum = 0;
    for (size_t i : which) {
      const double e =
          std::log(model.estimateUs(points[i].record->event) / points[i].record->time.median_us);
      sum += e * e;
    }
    return sum / double(which.size());  // a mean, so the prior weighs the same for every block
  };
  std::vector<size_t> all_fitted;
  std::map<std::string, std::vector<size_t>> fitted_of_op;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!points[i].in_fit) continue;
    all_fitted.push_back(i);
    fitted_of_op[points[i].record->event.op].push_back(i);
  }
  // Block coordinate descent: the five shared parameters by Nelder-Mead with the ops' own
  // efficiencies held, then each op's efficiency alone by golden-section search on its logit (only
  // its kernels depend on it), a few rounds. One Nelder-Mead over every coordinate would be ~20-
  // dimensional and stalls where the many GEMMs dominate the objective.
  const std::vector<double> shared_prior =
      fit_coordinates::toCoordinates(params, kernelCoordinates());
  std::map<std::string, double> op_prior;
  for (const std::string& op : ops) {
    auto it = params.memory_efficiency_by_op.find(op);
    op_prior[op] = fit_coordinates::toLogit(it != params.memory_efficiency_by_op.end()
                                                ? it->second.value
                                                : params.memory_efficiency.value);
    params.memory_efficiency_by_op[op].value = fit_coordinates::fromLogit(op_prior[op]);
  }
  constexpr int kRounds = 4;
  constexpr double kLogitRange = 5;  // efficiencies from 0.7% to 99.3%
  constexpr int kGoldenIterations = 50;
  int evaluations = 0;
  std::vector<double> shared = shared_prior;
  for (int round = 0; round < kRounds; ++round) {
    shared = fit_coordinates::minimizeWithPrior(
        [&](const std::vector<double>& x) {
          fit_coordinates::setFromCoordinates(x, kernelCoordinates(), params);
          return squared_log_error(all_fitted);
        },
        shared, shared_prior, prior_weight, max_evaluations / kRounds, 1e-10, evaluations);
    fit_coordinates::setFromCoordinates(shared, kernelCoordinates(), params);
    for (const std::string& op : ops) {
      SourcedValue& efficiency = params.memory_efficiency_by_op[op];
      const double prior = op_prior[op];
      efficiency.value = fit_coordinates::fromLogit(fit_coordinates::goldenSection(
          [&](double logit) {
            ++evaluations;
            efficiency.value = fit_coordinates::fromLogit(logit);
            return squared_log_error(fitted_of_op[op]) +
                   prior_weight * (logit - prior) * (logit - prior);
          },
          -kLogitRange, kLogitRange, kGoldenIterations));
    }
  }
  for (const fit_coordinates::Coordinate& c : kernelCoordinates()) {
    (params.*c.param).source = source;
  }
  for (const std::string& op : ops) params.memory_efficiency_by_op[op].source = source;

  KernelFit fit;
  fit.params = params;
  fit.predicted_us = predictUs(points, cluster);
  fit.evaluations = evaluations;
  return fit;
}

}  // namespace evsim

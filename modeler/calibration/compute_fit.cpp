#include "modeler/calibration/compute_fit.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "modeler/calibration/fit_coordinates.h"

namespace evsim {

using fit_coordinates::kAll;

double meanAbsPctError(const RunSet& runs, const std::vector<double>& predicted_ms,
                       const std::vector<bool>& select, bool value) {
  double sum = 0;
  int count = 0;
  for (size_t i = 0; i < predicted_ms.size(); ++i) {
    if (select[i] != value) continue;
    sum += std::abs(predicted_ms[i] / runs.planned()[i].run.iteration_ms - 1);
    ++count;
  }
  return count > 0 ? 100 * sum / count : -1;
}

ComputeFit fitComputeModel(const RunSet& runs, ClusterConfig cluster,
                           const std::vector<bool>& in_fit, const std::string& source, int threads,
                           int max_evaluations, double prior_weight) {
  EVSIM_CHECK(cluster.device.model.has_value(), "fit needs a starting model");
  EVSIM_CHECK(in_fit.size() == runs.planned().size(), "{} fit flags for {} runs", in_fit.size(),
              runs.planned().size());
  int fitted = 0;
  for (bool f : in_fit) fitted += f ? 1 : 0;
  if (fitted == 0) EVSIM_THROW(InputError, "no measured run is selected for the fit");

  DeviceModelParams& p = *cluster.device.model;
  const std::vector<double> start = fit_coordinates::toCoordinates(p, kAll);
  auto mean_squared_log_error = [&](const std::vector<double>& x) {
    fit_coordinates::setFromCoordinates(x, kAll, p);
    std::vector<double> predicted = runs.predictMs(cluster, threads);
    double sum = 0;
    for (size_t i = 0; i < predicted.size(); ++i) {
      if (!in_fit[i]) continue;
      double e = std::log(predicted[i] / runs.planned()[i].run.iteration_ms);
      sum += e * e;
    }
    return sum / fitted;
  };
  int evaluations = 0;
  const std::vector<double> best = fit_coordinates::minimizeWithPrior(
      mean_squared_log_error, start, start, prior_weight, max_evaluations, 1e-9, evaluations);
  fit_coordinates::setFromCoordinates(best, kAll, p);
  for (const fit_coordinates::Coordinate& c : kAll) (p.*c.param).source = source;

  ComputeFit fit;
  fit.params = p;
  fit.evaluations = evaluations;
  fit.predicted_ms = runs.predictMs(cluster, threads);
  fit.fit_mape_pct = meanAbsPctError(runs, fit.predicted_ms, in_fit, true);
  fit.holdout_mape_pct = meanAbsPctError(runs, fit.predicted_ms, in_fit, false);
  return fit;
}

}  // namespace evsim

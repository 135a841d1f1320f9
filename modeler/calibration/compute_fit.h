#pragma once
// Fits the device model's compute and host parameters (GEMM efficiency, per-tile overhead, fixed
// time per GEMM kernel, memory efficiency, fixed time per memory-bound kernel, host issue time per
// op) to measured iteration times, with the collective curves held fixed. The objective is the
// mean squared log error of predicted vs measured iteration time over the runs chosen for the
// fit; efficiencies are searched through a logistic transform (kept in (0, 1)), the rest in log
// space (kept > 0), with a weak prior towards the starting values (parameters the runs cannot
// separate, like the GEMM efficiency of host-bound runs, stay physical). Six physical parameters
// for hundreds of runs: it fits kernel behaviour, not rows.

#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "modeler/calibration/run_set.h"

namespace evsim {

struct ComputeFit {
  DeviceModelParams params;          // the fitted model (curves and uncertainty as given)
  std::vector<double> predicted_ms;  // per planned run, at the fitted parameters
  double fit_mape_pct = 0;           // over the runs in the fit
  double holdout_mape_pct = -1;      // over the others; -1 when every run was in the fit
  int evaluations = 0;
};

// Weight of the prior per squared coordinate (log or logit) away from the start: a factor e away
// costs as much as a 3% systematic error over every run.
inline constexpr double kDefaultPriorWeight = 0.001;

// `cluster.device.model` is the starting point and the prior (its curves are kept); `in_fit[i]`
// says whether planned run i is fitted. Every fitted parameter's source becomes `source`.
ComputeFit fitComputeModel(const RunSet& runs, ClusterConfig cluster,
                           const std::vector<bool>& in_fit, const std::string& source, int threads,
                           int max_evaluations, double prior_weight = kDefaultPriorWeight);

// Mean absolute percentage error of predicted vs measured over the runs where `select` is true.
double meanAbsPctError(const RunSet& runs, const std::vector<double>& predicted_ms,
                       const std::vector<bool>& select, bool value);

}  // namespace evsim

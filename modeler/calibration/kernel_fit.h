#pragma once
// Fits the device model's kernel parameters (GEMM efficiency, per-tile overhead, fixed time per
// GEMM kernel, memory efficiency, fixed time per memory-bound kernel, and a memory efficiency of
// its own for every memory-bound op with at least two kernels in the fit) to measured kernel times:
// the compute records of a profile database, e.g. scripts/gpu's sweep timed by eventprof with CUPTI
// on one GPU. The objective is the mean squared log error of the device model's estimate against
// the measured median over the kernels in the fit, with the weak prior of compute_fit.h towards the
// starting values. The host issue time is not a kernel property and is left as given.
//
// Held-out kernels: every `hold_out_every`-th compute record in profile order (0: none), so that a
// sweep written family by family is held out across every family.

#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "io/profile_db.h"
#include "modeler/calibration/compute_fit.h"

namespace evsim {

struct KernelPoint {
  const ProfileRecord* record = nullptr;
  bool in_fit = true;
  // Family for the report: "gemm >= 1 GFLOP", "gemm < 1 GFLOP" (bgemm alike), or the op.
  std::string family;
};

struct KernelFit {
  DeviceModelParams params;
  std::vector<double> predicted_us;  // per point, at the fitted parameters
  int evaluations = 0;
};

// The compute records of `db`; InputError when there are none.
std::vector<KernelPoint> kernelPoints(const ProfileDb& db, int hold_out_every,
                                      const std::string& origin);

KernelFit fitKernelModel(const std::vector<KernelPoint>& points, ClusterConfig cluster,
                         const std::string& source, int max_evaluations,
                         double prior_weight = kDefaultPriorWeight);

// Mean absolute percentage error over the points with in_fit == `in_fit` and, when `family` is not
// empty, that family; -1 when there are none.
double kernelMapePct(const std::vector<KernelPoint>& points,
                     const std::vector<double>& predicted_us, bool in_fit,
                     const std::string& family = "");

}  // namespace evsim

#pragma once
// `eventsim calibrate`: fits a device model (config/device_config.h) to measurements —
//   1. the NCCL all-reduce curve of each group size found among the intra-node all-reduce records
//      of a profile database (from `eventsim import-nccl-tests` or eventprof);
//   2. then the compute and host parameters to measured iteration times (compute_fit.h), the
//      curves held fixed, on the runs `fit_where` selects; the other runs are held out and
//      predicted with the fitted model;
//   or 2'. the kernel parameters to measured kernel times (kernel_fit.h): a profile's compute
//      records, every hold_out_every-th held out; the host issue time stays the cluster device's.
//   3. and/or the overlap slowdown per traffic kind from kernels timed alone and beside a transfer
//      (overlap_fit.h); on its own it leaves the device's model as it is.
// The device's uncertainty is the cross-validated MAPE (see CalibrationInput::cross_validate), or
// the held-out MAPE when runs were held out, else the fit's own.

#include <optional>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "io/profile_db.h"
#include "io/sustained_gemm_file.h"
#include "modeler/calibration/collective_fit.h"
#include "modeler/calibration/compute_fit.h"
#include "modeler/calibration/kernel_fit.h"
#include "modeler/calibration/overlap_fit.h"
#include "modeler/calibration/run_set.h"

namespace evsim {

// A filter on measured runs: "hidden=1024" (keys: hidden, layers, heads, gpus, tp, dp, pp,
// micro_batch, global_batch). Empty: every run.
struct RunFilter {
  std::string key;
  int64_t value = 0;
  int64_t keyOf(const MeasuredRun& run) const;  // the run's value of `key`
  bool matches(const MeasuredRun& run) const { return keyOf(run) == value; }
};
// Throws InputError naming `flag` on an unknown key or a malformed value.
RunFilter parseRunFilter(const std::string& text, const std::string& flag);

struct CalibrationInput {
  ClusterConfig cluster;  // its device's datasheet and collective curves; compute parameters
                          // always start from startingModel()
  std::string device_id;  // the fitted device's name
  const ProfileDb* collectives = nullptr;
  std::string collectives_origin;
  std::vector<MeasuredRun> runs;
  std::string runs_origin;
  RunSettings settings;
  std::optional<RunFilter> fit_where;
  // Cross-validation by group: for each value of this key (e.g. "hidden"), fit on the runs with
  // that value and predict the others; then fit on every run. The device's uncertainty is the
  // mean held-out MAPE over the folds. Excludes fit_where.
  std::string cross_validate;
  // Kernel times to fit instead of runs (excludes runs).
  const ProfileDb* kernels = nullptr;
  std::string kernels_origin;
  int hold_out_every = 0;
  // Overlap records (ProfileDb::overlapRecords) to fit the overlap slowdown to.
  const ProfileDb* overlap = nullptr;
  std::string overlap_origin;
  // eventprof --sustained-gemm-s's record: sets the device's clocks (sustained_clock.h), after
  // any compute fit.
  std::optional<SustainedGemmRecord> sustained;
  std::string sustained_origin;
  int threads = 1;
  int max_evaluations = 400;
};

struct CalibrationReport {
  DeviceSpec device;  // the fitted device, ready for deviceConfigYaml
  std::vector<CollectiveFit> collective_fits;
  std::optional<ComputeFit> compute_fit;
  std::vector<bool> in_fit;  // per planned run
  struct Fold {
    int64_t value = 0;  // of the cross-validation key
    double fit_mape_pct = 0, holdout_mape_pct = 0;
  };
  std::vector<Fold> folds;
  // Per planned run: predicted by the fold that held it out, averaged over such folds (empty
  // without cross-validation).
  std::vector<double> cross_validated_ms;
  std::optional<RunSet> runs;
  std::vector<KernelPoint> kernel_points;
  std::optional<KernelFit> kernel_fit;
  std::vector<OverlapFit> overlap_fits;
};

// Throws InputError when there is nothing to fit or the inputs cannot be used.
CalibrationReport calibrate(const CalibrationInput& input);

// Where the compute and host fit starts: typical values of a modern GPU under
// a PyTorch framework. They are also the fit's weak prior (compute_fit.h): values the runs cannot
// tell apart stay near them. Each is replaced by the fit, or keeps the source "assumed: starting
// point" when its part is not fitted.
DeviceModelParams startingModel();

}  // namespace evsim

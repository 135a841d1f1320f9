#pragma once
// `eventsim calibrate`: fits a device model (events/device_config.h) to measurements —
//   1. the NCCL all-reduce curve of each group size found among the intra-node all-reduce records
//      of a profile database (from `eventsim import-nccl-tests` or eventprof);
//   2. then the compute and host parameters to measured iteration times (compute_fit.h), the
//      curves held fixed, on the runs `fit_where` selects; the other runs are held out and
//      predicted with the fitted model.
// The device's uncertainty is the held-out MAPE when runs were held out, else the fit's own.

#include <optional>
#include <string>
#include <vector>

#include "events/cluster_config.h"
#include "modeler/calibration/collective_fit.h"
#include "modeler/calibration/compute_fit.h"
#include "modeler/calibration/run_set.h"
#include "modeler/profile_db.h"

namespace evsim {

// A filter on measured runs: "hidden=1024" (keys: hidden, layers, heads, gpus, tp, dp, pp,
// micro_batch, global_batch). Empty: every run.
struct RunFilter {
  std::string key;
  int64_t value = 0;
  bool matches(const MeasuredRun& run) const;
};
// Throws InputError naming `flag` on an unknown key or a malformed value.
RunFilter parseRunFilter(const std::string& text, const std::string& flag);

struct CalibrationInput {
  ClusterConfig cluster;  // its device is the starting point (a model is added if it has none)
  std::string device_id;  // the fitted device's name
  const ProfileDb* collectives = nullptr;
  std::string collectives_origin;
  std::vector<MeasuredRun> runs;
  std::string runs_origin;
  RunSettings settings;
  std::optional<RunFilter> fit_where;
  int threads = 1;
  int max_evaluations = 400;
};

struct CalibrationReport {
  DeviceSpec device;  // the fitted device, ready for deviceConfigYaml
  std::vector<CollectiveFit> collective_fits;
  std::optional<ComputeFit> compute_fit;
  std::vector<bool> in_fit;  // per planned run
  std::optional<RunSet> runs;
};

// Throws InputError when there is nothing to fit or the inputs cannot be used.
CalibrationReport calibrate(const CalibrationInput& input);

// Where fitting starts when the device file has no model yet: mid-range values of a modern GPU
// under a PyTorch framework. Only a starting point; each is replaced by the fit, or keeps the
// source "assumed: starting point" when its part is not fitted.
DeviceModelParams startingModel();

}  // namespace evsim

#include "modeler/calibration/calibrate.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/error.h"
#include "common/strings.h"
#include "modeler/calibration/sustained_clock.h"

namespace evsim {

namespace {

const std::map<std::string, int64_t MeasuredRun::*, std::less<>>& filterKeys() {
  static const std::map<std::string, int64_t MeasuredRun::*, std::less<>> keys = {
      {"hidden", &MeasuredRun::hidden},
      {"layers", &MeasuredRun::layers},
      {"heads", &MeasuredRun::heads},
      {"gpus", &MeasuredRun::gpus},
      {"micro_batch", &MeasuredRun::micro_batch},
      {"global_batch", &MeasuredRun::global_batch},
      {"seq", &MeasuredRun::seq}};
  return keys;
}

bool isRunFilterKey(std::string_view key) {
  return filterKeys().count(key) > 0 || key == "tp" || key == "dp" || key == "pp";
}
constexpr const char* kRunFilterKeysText =
    "hidden, layers, heads, gpus, tp, dp, pp, micro_batch, global_batch, seq";

// The measured intra-node all-reduce records of the profile, grouped by group size, one point per
// message size (the same size filed under several dtypes counts once).
std::map<int, std::vector<CollectivePoint>> intraNodeAllReduces(const ProfileDb& db) {
  std::map<int, std::map<int64_t, double>> by_size;
  for (const ProfileRecord& r : db.records()) {
    if (r.event.kind != EventKind::kAllReduce || r.event.placement.interNode() || r.scaled)
      continue;
    by_size[r.event.placement.group_size].emplace(r.event.message_bytes, r.time.median_us);
  }
  std::map<int, std::vector<CollectivePoint>> out;
  for (const auto& [group, sizes] : by_size) {
    for (const auto& [bytes, time_us] : sizes) out[group].push_back({bytes, time_us});
  }
  return out;
}

// One fold per value of the cross-validation key: fit on it, predict the rest.
void crossValidate(const CalibrationInput& input, const ClusterConfig& cluster,
                   CalibrationReport& report) {
  const RunSet& runs = *report.runs;
  std::set<int64_t> values;
  if (input.cross_validate.find('=') != std::string::npos) {
    EVSIM_THROW(InputError, "--cross-validate '{}': give a key (e.g. hidden), not KEY=VALUE",
                input.cross_validate);
  }
  if (!isRunFilterKey(input.cross_validate)) {  // said as given, not as the probe's "KEY=0"
    EVSIM_THROW(InputError, "--cross-validate '{}': expected a KEY, one of {}",
                input.cross_validate, kRunFilterKeysText);
  }
  RunFilter probe = parseRunFilter(input.cross_validate + "=0", "--cross-validate");
  for (const PlannedRun& r : runs.planned()) {
    values.insert(probe.keyOf(r.run));
  }
  if (values.size() < 2) {
    EVSIM_THROW(InputError, "--cross-validate {}: the runs have only one value of it",
                input.cross_validate);
  }
  std::vector<double> sum(runs.planned().size(), 0.0);
  std::vector<int> count(runs.planned().size(), 0);
  for (int64_t value : values) {
    probe.value = value;
    std::vector<bool> in_fold;
    for (const PlannedRun& r : runs.planned()) in_fold.push_back(probe.matches(r.run));
    ComputeFit fit =
        fitComputeModel(runs, cluster, in_fold, "fold", input.threads, input.max_evaluations);
    report.folds.push_back({value, fit.fit_mape_pct, fit.holdout_mape_pct});
    for (size_t i = 0; i < in_fold.size(); ++i) {
      if (in_fold[i]) continue;
      sum[i] += fit.predicted_ms[i];
      ++count[i];
    }
  }
  for (size_t i = 0; i < sum.size(); ++i) {
    report.cross_validated_ms.push_back(count[i] > 0 ? sum[i] / count[i] : 0.0);
  }
}

// The kernel parameters from measured kernel times; the device's uncertainty becomes their held-out
// MAPE (else the fit's own).
void fitKernels(const CalibrationInput& input, ClusterConfig& cluster, CalibrationReport& report) {
  const ProfileDb& db = *input.kernels;
  report.kernel_points = kernelPoints(db, input.hold_out_every, input.kernels_origin);
  const std::vector<KernelPoint>& points = report.kernel_points;
  int fitted = 0;
  for (const KernelPoint& p : points) fitted += p.in_fit ? 1 : 0;
  const std::string gpu = db.metadata.devices.empty() ? "an unnamed GPU" : db.metadata.devices[0];
  const std::string timer = db.metadata.versions.count("cupti") ? "CUPTI" : "CUDA events";
  const std::string source =
      fmt::format("measured: fitted to {} kernels timed with {} on {}, {} ({})", fitted, timer, gpu,
                  db.metadata.date.substr(0, 10), input.kernels_origin);
  report.kernel_fit = fitKernelModel(points, cluster, source, input.max_evaluations);
  DeviceModelParams& model = *cluster.device.model;
  const SourcedValue host = model.host_op_us, call = model.host_call_us;
  model = report.kernel_fit->params;
  model.host_op_us = host;
  model.host_call_us = call;
  const double held_out = kernelMapePct(points, report.kernel_fit->predicted_us, false);
  if (held_out >= 0) {
    model.uncertainty_pct = {held_out,
                             fmt::format("measured: MAPE of the {} held-out kernels of {}",
                                         points.size() - fitted, input.kernels_origin)};
  } else {
    model.uncertainty_pct = {
        kernelMapePct(points, report.kernel_fit->predicted_us, true),
        fmt::format("measured: MAPE of the fit itself ({} kernels of {}; none held out)", fitted,
                    input.kernels_origin)};
  }
}

}  // namespace

int64_t RunFilter::keyOf(const MeasuredRun& run) const {
  if (key == "tp") return run.tp;
  if (key == "dp") return run.dp;
  if (key == "pp") return run.pp;
  return run.*filterKeys().at(key);
}

RunFilter parseRunFilter(const std::string& text, const std::string& flag) {
  size_t eq = text.find('=');
  RunFilter f;
  f.key = text.substr(0, eq);
  if (eq == std::string::npos || !isRunFilterKey(f.key)) {
    EVSIM_THROW(InputError, "{} '{}': expected KEY=VALUE with KEY one of {}", flag, text,
                kRunFilterKeysText);
  }
  const std::optional<int64_t> value = parseInteger(std::string_view(text).substr(eq + 1));
  if (!value) EVSIM_THROW(InputError, "{} '{}': the value is not an integer", flag, text);
  f.value = *value;
  return f;
}

DeviceModelParams startingModel() {
  const std::string start = "assumed: starting point (not fitted)";
  DeviceModelParams p;
  p.gemm_efficiency = {0.8, start};      // cuBLAS on large GEMMs: ~80% of the tensor-core peak
  p.gemm_tile_overhead_k = {64, start};  // a main-loop stage or two of prologue and epilogue
  p.gemm_kernel_us = {3, start};         // launch-to-first-tile latency on the GPU
  p.memory_efficiency = {0.7, start};    // streaming kernels reach 70-90% of the datasheet
  p.memory_kernel_us = {3, start};
  p.host_op_us = {30, start};  // PyTorch eager: Python, dispatcher, launch
  p.host_call_us = {7, start};  // one eager call (no fit moves it: measured, ops/cp_ring_host.h)
  p.uncertainty_pct = {50, start};
  return p;
}

CalibrationReport calibrate(const CalibrationInput& input) {
  if (!input.cross_validate.empty() && input.fit_where) {
    EVSIM_THROW(InputError, "--cross-validate and --fit-where exclude each other");
  }
  const bool fits_model =
      input.collectives != nullptr || !input.runs.empty() || input.kernels != nullptr;
  if (!fits_model && input.overlap == nullptr && !input.sustained) {
    EVSIM_THROW(InputError,
                "nothing to calibrate: give measured runs (--runs), kernels (--kernels), "
                "collectives (--collectives), overlap records (--overlap) and/or a sustained-GEMM "
                "record (--sustained-gemm)");
  }
  if (input.kernels != nullptr && !input.runs.empty()) {
    EVSIM_THROW(InputError, "--kernels and --runs exclude each other: fit one or the other");
  }
  CalibrationReport report;
  ClusterConfig cluster = input.cluster;
  DeviceSpec& device = cluster.device;
  if (device.sm_count <= 0) {
    EVSIM_THROW(InputError,
                "cluster '{}': its device '{}' has no sm_count: calibrate needs a device file "
                "(configs/devices/) with the datasheet's SM count",
                cluster.name, device.name);
  }
  // A compute fit (runs or kernels) always starts from, and is pulled towards, startingModel():
  // starting from the cluster's existing fit would let a held-out fold see runs it predicts.
  // Existing collective curves are kept unless refitted. Collectives alone, or an overlap fit,
  // keep the device's compute parameters as they are (a bundled H100 fit was written back as
  // unfitted defaults by `calibrate --collectives`, issue 31).
  const bool fits_compute = !input.runs.empty() || input.kernels != nullptr;
  if (fits_compute) {
    std::vector<CollectiveCurve> curves;
    std::optional<SourcedValue> host, call;
    if (device.model) {
      curves = device.model->allreduce_curves;
      host = device.model->host_op_us;
      call = device.model->host_call_us;
    }
    device.model = startingModel();
    device.model->allreduce_curves = std::move(curves);
    // A kernel fit says nothing about the framework's host time: keep the device's. No fit
    // (kernels or iterations) moves one torch call's host time: it is measured, not fitted.
    if (input.kernels != nullptr && host) device.model->host_op_us = *host;
    if (call) device.model->host_call_us = *call;
  } else if (fits_model && !device.model) {
    device.model = startingModel();  // curves for a device without a model yet
  }
  device.id = input.device_id;

  if (input.collectives != nullptr) {
    auto groups = intraNodeAllReduces(*input.collectives);
    if (groups.empty()) {
      EVSIM_THROW(InputError, "{}: no intra-node all-reduce records to fit a curve to",
                  input.collectives_origin);
    }
    std::vector<CollectiveCurve>& curves = device.model->allreduce_curves;
    for (const auto& [group, points] : groups) {
      std::string what =
          fmt::format("{}: all-reduce over {} ranks", input.collectives_origin, group);
      CollectiveFit fit = fitAllReduceCurve(group, points, what);
      fit.curve.source =
          fmt::format("fitted: {} sizes of {} (mean error {:.1f}%, worst {:.1f}%)", fit.points,
                      input.collectives_origin, fit.mean_abs_error_pct, fit.max_abs_error_pct);
      // Replaces the curve of this group size; curves of other sizes stay.
      const int fitted_group = group;  // a structured binding cannot be captured before C++20 clang
      std::erase_if(curves, [&](const CollectiveCurve& c) { return c.group == fitted_group; });
      curves.push_back(fit.curve);
      report.collective_fits.push_back(fit);
    }
    std::sort(curves.begin(), curves.end(),
              [](const CollectiveCurve& a, const CollectiveCurve& b) { return a.group < b.group; });
  }

  if (!input.runs.empty()) {
    device.peakTflops(input.settings.dtype);  // a missing peak is an input error, before threads
    report.runs.emplace(input.runs, cluster, input.settings);
    const RunSet& runs = *report.runs;
    if (runs.planned().empty()) {
      // Every row refused by the planner: nothing to fit, and the line names the file (issue 33).
      const auto& [first, why] = runs.skipped().front();
      EVSIM_THROW(InputError, "{}: all {} runs were skipped, nothing to fit (line {}: {})",
                  input.runs_origin, runs.skipped().size(), first.line, why);
    }
    for (const PlannedRun& r : runs.planned()) {
      report.in_fit.push_back(!input.fit_where || input.fit_where->matches(r.run));
    }
    if (!input.cross_validate.empty()) crossValidate(input, cluster, report);
    std::string where = input.fit_where
                            ? fmt::format("{}={}", input.fit_where->key, input.fit_where->value)
                            : std::string("all");
    int fitted = static_cast<int>(std::count(report.in_fit.begin(), report.in_fit.end(), true));
    std::string source =
        fmt::format("fitted: {} runs ({}) of {}", fitted, where, input.runs_origin);
    report.compute_fit =
        fitComputeModel(runs, cluster, report.in_fit, source, input.threads, input.max_evaluations);
    device.model = report.compute_fit->params;
    const ComputeFit& fit = *report.compute_fit;
    if (!report.folds.empty()) {
      double sum = 0;
      for (const CalibrationReport::Fold& f : report.folds) sum += f.holdout_mape_pct;
      device.model->uncertainty_pct = {
          sum / double(report.folds.size()),
          fmt::format("cross-validated: mean held-out MAPE over {} folds by {} of {}",
                      report.folds.size(), input.cross_validate, input.runs_origin)};
    } else if (fit.holdout_mape_pct >= 0) {
      device.model->uncertainty_pct = {
          fit.holdout_mape_pct, fmt::format("fitted: MAPE of the {} held-out runs of {}",
                                            runs.planned().size() - fitted, input.runs_origin)};
    } else {
      device.model->uncertainty_pct = {
          fit.fit_mape_pct,
          fmt::format("fitted: MAPE of the fit itself ({} runs of {}; not cross-validated)", fitted,
                      input.runs_origin)};
    }
  }
  if (input.kernels != nullptr) fitKernels(input, cluster, report);
  if (input.overlap != nullptr) {
    report.overlap_fits = fitOverlapSlowdown(input.overlap->overlapRecords(), input.overlap_origin);
    OverlapSlowdown& slowdown = device.overlap_slowdown;
    slowdown.given = true;  // a kind not measured keeps the device's value (or 1)
    for (const OverlapFit& fit : report.overlap_fits) {
      (fit.inter_node ? slowdown.network : slowdown.nvlink) = {fit.factor, fit.source};
    }
  }
  if (input.sustained) applySustainedClock(*input.sustained, input.sustained_origin, device);
  report.device = device;
  return report;
}

}  // namespace evsim

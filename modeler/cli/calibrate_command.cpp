#include "modeler/cli/calibrate_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "common/atomic_file.h"
#include "common/error.h"
#include "io/cli_checks.h"
#include "io/run_options.h"
#include "modeler/calibration/calibrate.h"

namespace evsim {

namespace {

struct CalibrateArgs {
  std::string cluster;
  std::string device_name;
  std::string runs;
  std::string collectives;
  std::string kernels;
  std::string overlap;
  std::string sustained_gemm;
  int hold_out_every = 3;
  std::string fit_where;
  std::string cross_validate;
  std::string dtype = "fp16";
  int64_t vocab = 50257;
  std::string schedule = "dapple";
  std::string recompute = "full";
  int threads = 0;
  int max_evaluations = 400;
  std::string output;
  std::string predictions;
};

std::string predictionsCsv(const CalibrationReport& report) {
  std::string out =
      "line,gpus,global_batch,micro_batch,hidden,heads,layers,seq,tp,dp,pp,measured_ms,"
      "predicted_ms,error_pct,set,cross_validated_ms\n";
  const RunSet& runs = *report.runs;
  for (size_t i = 0; i < runs.planned().size(); ++i) {
    const MeasuredRun& r = runs.planned()[i].run;
    double predicted = report.compute_fit->predicted_ms[i];
    std::string cross_validated = report.cross_validated_ms.empty()
                                      ? ""
                                      : fmt::format("{:.4f}", report.cross_validated_ms[i]);
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.3f},{},{}\n", r.line, r.gpus,
                    r.global_batch, r.micro_batch, r.hidden, r.heads, r.layers, r.seq, r.tp, r.dp,
                    r.pp, r.iteration_ms, predicted, 100 * (predicted / r.iteration_ms - 1),
                    report.in_fit[i] ? "fit" : "held-out", cross_validated);
  }
  for (const auto& [r, why] : runs.skipped()) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.4f},,,skipped,\n", r.line, r.gpus,
                       r.global_batch, r.micro_batch, r.hidden, r.heads, r.layers, r.seq, r.tp,
                       r.dp, r.pp, r.iteration_ms);
  }
  return out;
}

std::string kernelPredictionsCsv(const CalibrationReport& report) {
  std::string out = "signature,family,measured_us,predicted_us,error_pct,set\n";
  const std::vector<KernelPoint>& points = report.kernel_points;
  for (size_t i = 0; i < points.size(); ++i) {
    const double measured = points[i].record->time.median_us;
    const double predicted = report.kernel_fit->predicted_us[i];
    out += fmt::format("\"{}\",{},{:.3f},{:.3f},{:.2f},{}\n", points[i].record->signature,
                       points[i].family, measured, predicted, 100 * (predicted / measured - 1),
                       points[i].in_fit ? "fit" : "held-out");
  }
  return out;
}

std::string kernelParamsText(const DeviceModelParams& p) {
  return fmt::format(
      "GEMM efficiency {:.3f}, tile overhead {:.1f} (k), GEMM kernel {:.2f} us, memory efficiency "
      "{:.3f}, memory kernel {:.2f} us",
      p.gemm_efficiency.value, p.gemm_tile_overhead_k.value, p.gemm_kernel_us.value,
      p.memory_efficiency.value, p.memory_kernel_us.value);
}

// Per op family: MAPE of the fitted and the held-out kernels.
void printKernelReport(const CalibrationReport& report) {
  const KernelFit& f = *report.kernel_fit;
  fmt::print("kernels: {} ({} evaluations)\n", kernelParamsText(f.params), f.evaluations);
  if (!f.params.memory_efficiency_by_op.empty()) {
    std::string by_op;
    for (const auto& [op, v] : f.params.memory_efficiency_by_op) {
      by_op += fmt::format("{}{} {:.3f}", by_op.empty() ? "" : ", ", op, v.value);
    }
    fmt::print("memory efficiency by op: {}\n", by_op);
  }
  std::vector<std::string> families;
  for (const KernelPoint& k : report.kernel_points) {
    if (std::find(families.begin(), families.end(), k.family) == families.end()) {
      families.push_back(k.family);
    }
  }
  fmt::print("{:<20} {:>6} {:>10} {:>8} {:>12}\n", "family", "fitted", "MAPE", "held-out", "MAPE");
  auto count = [&](const std::string& family, bool in_fit) {
    return std::count_if(
        report.kernel_points.begin(), report.kernel_points.end(),
        [&](const KernelPoint& k) { return k.family == family && k.in_fit == in_fit; });
  };
  auto pct = [](double v) { return v < 0 ? std::string("-") : fmt::format("{:.2f}%", v); };
  for (const std::string& family : families) {
    fmt::print("{:<20} {:>6} {:>10} {:>8} {:>12}\n", family, count(family, true),
               pct(kernelMapePct(report.kernel_points, f.predicted_us, true, family)),
               count(family, false),
               pct(kernelMapePct(report.kernel_points, f.predicted_us, false, family)));
  }
  auto memory_bound = [](const KernelPoint& k) {
    return k.family.rfind("gemm", 0) != 0 && k.family.rfind("bgemm", 0) != 0;
  };
  auto memory_mape = [&](bool in_fit) {
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < report.kernel_points.size(); ++i) {
      const KernelPoint& k = report.kernel_points[i];
      if (k.in_fit != in_fit || !memory_bound(k)) continue;
      sum += std::abs(f.predicted_us[i] / k.record->time.median_us - 1);
      ++n;
    }
    return std::make_pair(n, n > 0 ? 100 * sum / n : -1.0);
  };
  const auto [mem_fit_n, mem_fit] = memory_mape(true);
  const auto [mem_out_n, mem_out] = memory_mape(false);
  fmt::print("{:<20} {:>6} {:>10} {:>8} {:>12}\n", "memory-bound (all)", mem_fit_n, pct(mem_fit),
             mem_out_n, pct(mem_out));
  fmt::print("{:<20} {:>6} {:>10} {:>8} {:>12}\n", "all",
             std::count_if(report.kernel_points.begin(), report.kernel_points.end(),
                           [](const KernelPoint& k) { return k.in_fit; }),
             pct(kernelMapePct(report.kernel_points, f.predicted_us, true)),
             std::count_if(report.kernel_points.begin(), report.kernel_points.end(),
                           [](const KernelPoint& k) { return !k.in_fit; }),
             pct(kernelMapePct(report.kernel_points, f.predicted_us, false)));
}

void printReport(const CalibrationReport& report) {
  for (const CollectiveFit& f : report.collective_fits) {
    const CollectiveCurve& c = f.curve;
    fmt::print(
        "all-reduce over {} ranks: floor {:.1f} us; low-latency {:.1f} us + {:.0f} GB/s; "
        "bandwidth {:.1f} us + {:.0f} GB/s bus; {} sizes, mean error {:.1f}%, worst {:.1f}%\n",
        c.group, c.floor_us, c.ll_latency_us, c.ll_busbw_gb_s, c.simple_latency_us,
        c.simple_busbw_gb_s, f.points, f.mean_abs_error_pct, f.max_abs_error_pct);
  }
  for (const CalibrationReport::Fold& f : report.folds) {
    fmt::print("cross-validation fold {}: MAPE {:.2f}% fitted, {:.2f}% held out\n", f.value,
               f.fit_mape_pct, f.holdout_mape_pct);
  }
  if (report.compute_fit) {
    const ComputeFit& f = *report.compute_fit;
    const DeviceModelParams& p = f.params;
    fmt::print("compute: {}, host {:.2f} us per op ({} evaluations)\n", kernelParamsText(p),
               p.host_op_us.value, f.evaluations);
    int fitted = static_cast<int>(std::count(report.in_fit.begin(), report.in_fit.end(), true));
    fmt::print("iteration time: MAPE {:.2f}% over {} fitted runs", f.fit_mape_pct, fitted);
    if (f.holdout_mape_pct >= 0) {
      fmt::print(", {:.2f}% over {} held-out runs", f.holdout_mape_pct,
                 report.in_fit.size() - fitted);
    }
    fmt::print("; {} runs skipped\n", report.runs->skipped().size());
  }
  if (report.kernel_fit) printKernelReport(report);
  if (report.device.model && report.device.model->clocks) {
    const ClockParams* clocks = &*report.device.model->clocks;
    fmt::print("clocks: fit {:.0f} MHz, sustained {:.0f} MHz (compute x{:.3f})\n",
               clocks->fit_mhz.value, clocks->sustained_mhz.value, clocks->computeSlowdown());
  }
  for (const OverlapFit& f : report.overlap_fits) {
    fmt::print("overlap slowdown ({}): x{:.3f} over {} kernels{}, rms error {:.1f}%\n",
               f.inter_node ? "network" : "nvlink", f.factor, f.points,
               f.raw_factor < 1 ? fmt::format(" (measured {:.3f}, kept at 1)", f.raw_factor) : "",
               f.rms_error_pct);
  }
}

void runCalibrate(const CalibrateArgs& args, const JsonSink& sink) {
  CalibrationInput input;
  input.cluster = loadClusterConfig(resolveConfigPath(args.cluster, "clusters"));
  input.device_id = args.device_name.empty() ? input.cluster.device.id : args.device_name;
  if (input.device_id.empty()) {
    EVSIM_THROW(InputError,
                "--name is required: the cluster's device is inline, not a device file");
  }
  std::optional<ProfileDb> db;
  if (!args.collectives.empty()) {
    db = ProfileDb::load(args.collectives);
    input.collectives = &*db;
    input.collectives_origin = args.collectives;
  }
  std::optional<ProfileDb> kernels;
  if (!args.kernels.empty()) {
    kernels = ProfileDb::load(args.kernels);
    input.kernels = &*kernels;
    input.kernels_origin = args.kernels;
    input.hold_out_every = args.hold_out_every;
  }
  std::optional<ProfileDb> overlap;
  if (!args.overlap.empty()) {
    overlap = ProfileDb::load(args.overlap);
    input.overlap = &*overlap;
    input.overlap_origin = args.overlap;
  }
  if (!args.sustained_gemm.empty()) {
    input.sustained = loadSustainedGemm(args.sustained_gemm);
    input.sustained_origin = args.sustained_gemm;
  }
  if (!args.runs.empty()) {
    input.runs = loadMeasuredRuns(args.runs);
    input.runs_origin = args.runs;
  }
  input.settings.dtype = parseDType(args.dtype, "--dtype");
  input.settings.vocab = args.vocab;
  input.settings.schedule = parseSchedule(args.schedule);
  input.settings.recompute = parseRecompute(args.recompute);
  input.cross_validate = args.cross_validate;
  if (!args.fit_where.empty()) input.fit_where = parseRunFilter(args.fit_where, "--fit-where");
  input.threads = args.threads > 0
                      ? args.threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  input.max_evaluations = args.max_evaluations;
  if (!args.predictions.empty() && args.runs.empty() && args.kernels.empty()) {
    EVSIM_THROW(InputError,
                "--predictions needs --runs or --kernels (the predictions are of measurements)");
  }
  CalibrationReport report = calibrate(input);
  if (!sink) printReport(report);
  // The device file is read back before it is written: a fit that ran into a bound (a parameter
  // the loader refuses) is reported here, not by the next simulate.
  const std::string device_yaml = deviceConfigYaml(report.device);
  try {
    parseDeviceConfig(device_yaml, args.output);
  } catch (const InputError& e) {
    EVSIM_THROW(InputError, "calibrate: the fitted device is not usable ({}): check the runs",
                e.what());
  }
  // Both written, then both published together (common/atomic_file.h): a failure leaves neither,
  // and two calibrations at once leave one's pair.
  std::optional<AtomicFileWriter> predictions;
  if (!args.predictions.empty()) {
    predictions.emplace(args.predictions);
    predictions->stream() << (report.kernel_fit ? kernelPredictionsCsv(report)
                                                : predictionsCsv(report));
  }
  AtomicFileWriter device(args.output);
  device.stream() << device_yaml;
  if (predictions) predictions->finish();
  device.finish();
  std::vector<AtomicFileWriter*> outputs{&device};
  if (predictions) outputs.insert(outputs.begin(), &*predictions);
  publishTogether(outputs);
  if (sink) {
    nlohmann::json out = {
        {"device_file", args.output},
        {"device", report.device.id.empty() ? report.device.name : report.device.id},
        {"predictions_file", nullptr}};
    if (!args.predictions.empty()) out["predictions_file"] = args.predictions;
    sink(out);
    return;
  }
  fmt::print("device file: {}\n", args.output);
  if (!args.predictions.empty()) fmt::print("predictions: {}\n", args.predictions);
}

}  // namespace

void registerCalibrateCommand(CLI::App& app, JsonSink sink) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "fit a device model to measured collectives, kernels or iterations (docs/CALIBRATION.md)");
  cmd->add_option("--cluster", args->cluster,
                  "cluster YAML or bundled name: node shape, links, and the device to start from")
      ->required();
  cmd->add_option("--name", args->device_name,
                  "name of the fitted device (default: the cluster's device file's name)");
  cmd->add_option("--runs", args->runs,
                  "CSV of measured iterations (vTrain's columns: # GPUs, global batch, micro "
                  "batch, hidden size, attention heads, # layers, sequence length, tensor/data/"
                  "pipeline parallelism, iteration time (ms))");
  cmd->add_option("--collectives", args->collectives,
                  "profile database whose intra-node all-reduce records give the NCCL curves "
                  "(e.g. from eventsim import-nccl-tests)");
  cmd->add_option("--kernels", args->kernels,
                  "profile database whose compute records (measured kernels, e.g. scripts/gpu's "
                  "sweep) the kernel parameters are fitted to; excludes --runs");
  cmd->add_option("--overlap", args->overlap,
                  "profile database whose overlap records (eventprof --overlap: kernels alone and "
                  "beside an all-reduce) give the overlap slowdown per traffic kind");
  cmd->add_option("--sustained-gemm", args->sustained_gemm,
                  "eventprof --sustained-gemm-s's record: sets the device's clocks.sustained_mhz "
                  "(compute-bound kernels of a training step at the power limit)");
  cmd->add_option("--hold-out-every", args->hold_out_every,
                  "with --kernels: hold out every N-th compute record (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--fit-where", args->fit_where,
                  "fit on the runs with KEY=VALUE (e.g. hidden=1024) and hold out the rest");
  cmd->add_option("--cross-validate", args->cross_validate,
                  "KEY: fit on each value of KEY (e.g. hidden) in turn and predict the other "
                  "runs; the device's uncertainty is the mean held-out MAPE");
  cmd->add_option("--dtype", args->dtype, "dtype of the runs")->capture_default_str();
  cmd->add_option("--vocab", args->vocab, "vocabulary size of the runs")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--schedule", args->schedule, "pipeline schedule of the runs")
      ->capture_default_str();
  cmd->add_option("--recompute", args->recompute, "activation recomputation of the runs")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--max-evaluations", args->max_evaluations,
                  "model evaluations of the compute fit")
      ->capture_default_str()
      ->check(CLI::Range(10, 100000));
  cmd->add_option("-o,--output", args->output, "device file to write")
      ->required()
      ->check(kFileName);
  cmd->add_option("--predictions", args->predictions,
                  "CSV of every run's measured and predicted time (fit, held-out or skipped)");
  cmd->callback([args, sink] { runCalibrate(*args, sink); });
}

}  // namespace evsim

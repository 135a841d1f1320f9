// Calibration: the measured-runs reader, and the fits recovering known parameters from synthetic
// measurements made with those parameters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "modeler/calibration/calibrate.h"
#include "modeler/calibration/collective_fit.h"
#include "modeler/calibration/kernel_fit.h"
#include "modeler/calibration/measured_runs.h"
#include "modeler/calibration/nelder_mead.h"
#include "modeler/device_model.h"

namespace evsim {
namespace {

const std::string kHeader =
    "\xEF\xBB\xBF# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence "
    "length,tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n";

TEST(MeasuredRuns, ReadsVtrainColumnsAfterAByteOrderMark) {
  auto runs = parseMeasuredRuns(kHeader + "8,32,4,1024,16,24,1024,2,2,2,219.732754\n", "runs.csv");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].line, 2);
  EXPECT_EQ(runs[0].gpus, 8);
  EXPECT_EQ(runs[0].global_batch, 32);
  EXPECT_EQ(runs[0].micro_batch, 4);
  EXPECT_EQ(runs[0].tp, 2);
  EXPECT_EQ(runs[0].dp, 2);
  EXPECT_EQ(runs[0].pp, 2);
  EXPECT_DOUBLE_EQ(runs[0].iteration_ms, 219.732754);
}

TEST(MeasuredRuns, BadRowsNameFileLineAndColumn) {
  auto message = [](const std::string& text) {
    try {
      parseMeasuredRuns(text, "runs.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(kHeader + "8,32,4,1024,16,24,1024,2,2,4,219.7\n"),
            "runs.csv:2: tensor x data x pipeline parallelism = 2 x 2 x 4 != 8 GPUs");
  EXPECT_EQ(message(kHeader + "8,32,x,1024,16,24,1024,2,2,2,219.7\n"),
            "runs.csv:2: micro batch 'x': not a positive integer");
  EXPECT_EQ(message(kHeader + "8,32,4,1024,16,24,1024,2,2,2\n"),
            "runs.csv:2: 10 cells, the header has 11");
  EXPECT_EQ(message("gpus,time\n1,2\n").rfind("runs.csv:1: no column '# GPUs'", 0), 0u);
  EXPECT_EQ(message(kHeader), "runs.csv: no measured runs (a header and data rows)");
}

TEST(NelderMead, FindsTheMinimumOfAQuadratic) {
  // (x - 3)^2 + 10 (y + 1)^2 has its minimum 0 at (3, -1).
  auto f = [](const std::vector<double>& v) {
    return (v[0] - 3) * (v[0] - 3) + 10 * (v[1] + 1) * (v[1] + 1);
  };
  MinimizeResult r = minimizeNelderMead(f, {0, 0}, {1, 1}, 2000, 1e-14);
  EXPECT_NEAR(r.x[0], 3, 1e-4);
  EXPECT_NEAR(r.x[1], -1, 1e-4);
}

TEST(CollectiveFit, RecoversTheCurveThatMadeTheData) {
  CollectiveCurve truth{8, 94, 37, 155, 99, 231, ""};
  std::vector<CollectivePoint> points;
  for (int64_t mib = 1; mib <= 1024; mib *= 2) {
    for (int64_t part : {4, 5, 6, 7}) {
      int64_t bytes = mib * part / 4 * (1 << 20);
      points.push_back({bytes, curveUs(truth, EventKind::kAllReduce, 8, bytes)});
    }
  }
  CollectiveFit fit = fitAllReduceCurve(8, points, "synthetic");
  EXPECT_LT(fit.max_abs_error_pct, 0.5);
  // The parameters that shape the curve come back: the floor (small sizes) and the bandwidth
  // protocol's bus bandwidth (large sizes).
  EXPECT_NEAR(fit.curve.floor_us, 94, 94 * 0.01);
  EXPECT_NEAR(fit.curve.simple_busbw_gb_s, 231, 231 * 0.01);
}

TEST(CollectiveFit, TooFewSizesIsAnInputError) {
  std::vector<CollectivePoint> points = {{1 << 20, 90}, {2 << 20, 92}};
  EXPECT_THROW(fitAllReduceCurve(8, points, "short log"), InputError);
}

// A cluster of one 8-GPU node whose device is `params` (datasheet: 100 SMs, 300 TFLOP/s fp16, 20
// fp32).
ClusterConfig syntheticCluster(const DeviceModelParams& params) {
  ClusterConfig c;
  c.name = "synthetic";
  c.gpus_per_node = 8;
  c.device.id = "synthetic-gpu";
  c.device.name = "Synthetic GPU";
  c.device.peak_tflops[DType::kFp16] = 300;
  c.device.peak_tflops[DType::kFp32] = 20;
  c.device.memory_bandwidth_gb_s = 2000;
  c.device.memory_gib = 80;
  c.device.sm_count = 100;
  c.device.model = params;
  c.intra_link = {"link", 300, 3};
  c.network = {"net", 200, 5};
  return c;
}

TEST(ComputeFit, RecoversKnownParametersFromSyntheticRuns) {
  DeviceModelParams truth = startingModel();
  truth.gemm_efficiency.value = 0.65;
  truth.host_op_us.value = 45;
  truth.memory_efficiency.value = 0.85;
  truth.allreduce_curves = {{2, 40, 40, 180, 90, 200, ""}, {4, 50, 30, 140, 60, 220, ""}};
  const ClusterConfig truth_cluster = syntheticCluster(truth);

  // Host-bound and compute-bound runs: small and large hidden sizes, micro-batches 1 and 8.
  std::vector<MeasuredRun> runs;
  int line = 2;
  for (int64_t hidden : {512, 2048}) {
    for (int64_t micro : {1, 8}) {
      for (int tp : {1, 2, 4}) {
        MeasuredRun r;
        r.line = line++;
        r.hidden = hidden, r.heads = 16, r.layers = 4, r.seq = 512;
        r.tp = tp, r.dp = 1, r.pp = 1, r.gpus = tp;
        r.micro_batch = micro, r.global_batch = 2 * micro;
        runs.push_back(r);
      }
    }
  }
  RunSettings settings;
  settings.vocab = 1024;
  RunSet planned(runs, truth_cluster, settings);
  ASSERT_EQ(planned.planned().size(), runs.size());
  std::vector<double> measured = planned.predictMs(truth_cluster, 1);
  for (size_t i = 0; i < runs.size(); ++i) runs[i].iteration_ms = measured[i];
  RunSet synthetic(runs, truth_cluster, settings);

  // Start from the defaults (efficiency 0.8, host 30 us, memory 0.7) and fit every run, without
  // the prior (which would pull towards the start where the data allow).
  DeviceModelParams start = startingModel();
  start.allreduce_curves = truth.allreduce_curves;
  ComputeFit fit = fitComputeModel(synthetic, syntheticCluster(start),
                                   std::vector<bool>(runs.size(), true), "fitted: test", 1, 3000,
                                   /*prior_weight=*/0);
  EXPECT_LT(fit.fit_mape_pct, 0.1);
  EXPECT_NEAR(fit.params.gemm_efficiency.value, 0.65, 0.65 * 0.03);
  EXPECT_NEAR(fit.params.host_op_us.value, 45, 45 * 0.01);
  EXPECT_NEAR(fit.params.memory_efficiency.value, 0.85, 0.85 * 0.02);
  EXPECT_EQ(fit.params.host_op_us.source, "fitted: test");
}

// Kernel times made by known parameters (square GEMMs of 2 to 137 GFLOP, skinny ones, memory-bound
// ops of 1 to 256 MiB): the kernel fit recovers the parameters from a different start, holds out
// every third record, and leaves the host time alone.
TEST(KernelFit, RecoversKnownParametersFromSyntheticKernels) {
  DeviceModelParams truth = startingModel();
  truth.gemm_efficiency.value = 0.72;
  truth.gemm_kernel_us.value = 2.5;
  truth.memory_efficiency.value = 0.6;
  truth.memory_efficiency_by_op["gelu_fwd"] = {0.45, "truth"};  // its own, slower kernel
  truth.memory_kernel_us.value = 1.5;
  const ClusterConfig truth_cluster = syntheticCluster(truth);
  const DeviceModel truth_model(truth_cluster);
  ProfileDb db;
  std::vector<std::string> signatures;
  for (int64_t s : {1024, 2048, 4096}) {
    signatures.push_back(fmt::format("gemm m={} n={} k={} layout=nt dtype=fp16", s, s, s));
    signatures.push_back(fmt::format("gemm m={} n=64 k=2048 layout=nn dtype=fp16", s));
  }
  for (int64_t e : {1 << 19, 1 << 23, 1 << 27}) {
    signatures.push_back(fmt::format("add elems={} dtype=fp16", e));
    signatures.push_back(fmt::format("gelu_fwd elems={} dtype=fp16", e));
  }
  signatures.push_back("allreduce bytes=1048576 group=8 nodes=1 rpn=8 dtype=fp16");  // not a kernel
  for (const std::string& sig : signatures) {
    ProfileRecord r;
    r.event = parseEventSignature(sig, "test");
    r.signature = sig;
    r.time.median_us = truth_model.estimateUs(r.event);
    db.put(r);
  }
  std::vector<KernelPoint> points = kernelPoints(db, 3, "test");
  ASSERT_EQ(points.size(), 12u);  // the all-reduce is not a kernel
  for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].in_fit, i % 3 != 2) << i;
  EXPECT_EQ(points[0].family, "gemm >= 1 GFLOP");  // 2 * 1024^3 = 2.1 GFLOP
  EXPECT_EQ(points[1].family, "gemm < 1 GFLOP");   // 2 * 1024 * 64 * 2048 = 0.27 GFLOP
  EXPECT_EQ(points[6].family, "add");

  DeviceModelParams start = startingModel();
  start.host_op_us.value = 77;
  KernelFit fit = fitKernelModel(points, syntheticCluster(start), "measured: test", 3000,
                                 /*prior_weight=*/0);
  EXPECT_LT(kernelMapePct(points, fit.predicted_us, false), 0.5);  // held out
  EXPECT_NEAR(fit.params.gemm_efficiency.value, 0.72, 0.72 * 0.02);
  // The shared memory efficiency is seen by the skinny GEMMs' memory side and by add (its own
  // efficiency fits to the same 0.6); gelu's own efficiency is recovered.
  EXPECT_NEAR(fit.params.memory_efficiency_by_op.at("add").value, 0.6, 0.6 * 0.02);
  EXPECT_NEAR(fit.params.memory_efficiency_by_op.at("gelu_fwd").value, 0.45, 0.45 * 0.02);
  EXPECT_EQ(fit.params.memory_efficiency_by_op.at("gelu_fwd").source, "measured: test");
  EXPECT_NEAR(fit.params.memory_kernel_us.value, 1.5, 0.15);
  EXPECT_EQ(fit.params.host_op_us.value, 77);  // not a kernel parameter
  EXPECT_EQ(fit.params.gemm_efficiency.source, "measured: test");

  ProfileDb only_comm;
  ProfileRecord r;
  r.event = parseEventSignature(signatures.back(), "test");
  r.signature = signatures.back();
  r.time.median_us = 10;
  only_comm.put(r);
  EXPECT_THROW(kernelPoints(only_comm, 3, "comm.yaml"), InputError);
}

TEST(RunSet, PredictionsDoNotDependOnThreads) {
  ClusterConfig cluster = syntheticCluster(startingModel());
  std::vector<MeasuredRun> runs;
  for (int tp : {1, 2, 4, 8}) {
    MeasuredRun r;
    r.line = tp;
    r.hidden = 1024, r.heads = 16, r.layers = 2, r.seq = 256;
    r.tp = tp, r.dp = 1, r.pp = 1, r.gpus = tp, r.micro_batch = 1, r.global_batch = 4;
    r.iteration_ms = 1;
    runs.push_back(r);
  }
  RunSettings settings;
  settings.vocab = 1024;
  RunSet set(runs, cluster, settings);
  EXPECT_EQ(set.predictMs(cluster, 1), set.predictMs(cluster, 3));
}

TEST(Calibrate, RunFilterNamesItsKeys) {
  EXPECT_EQ(parseRunFilter("hidden=1024", "--fit-where").value, 1024);
  EXPECT_THROW(parseRunFilter("width=1024", "--fit-where"), InputError);
  EXPECT_THROW(parseRunFilter("hidden=big", "--fit-where"), InputError);
}

}  // namespace
}  // namespace evsim

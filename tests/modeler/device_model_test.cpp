// The device model's formulas (modeler/device_model.h) on a device with round numbers, every
// expected time worked out by hand in the comment beside it; the host issue floor of a task; and
// the device file loader's errors.
#include "modeler/device_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/cost_model.h"
#include "modeler/estimated_source.h"
#include "modeler/simulation.h"
#include "support/round_gpu.h"

namespace evsim {
namespace {

// 108 SMs, 324 TFLOP/s fp16 (3e6 flop/us per SM), 2000 GB/s memory; GEMM efficiency 0.75, tile
// overhead 64 (k), 5 us per GEMM kernel; memory efficiency 0.8 (1.6e6 bytes/us), 2 us per
// memory-bound kernel; 20 us host time per op; an 8-rank all-reduce curve.
const std::string kDeviceYaml = test::roundGpuYaml("round-gpu", "Round GPU", R"(  allreduce_curves:
    - {group: 8, floor_us: 90, ll_latency_us: 35, ll_busbw_gb_s: 150, simple_latency_us: 100,
       simple_busbw_gb_s: 230, source: "test"}
)");

TEST(DeviceModel, LargeGemmRunsAtTheAchievablePeakWithWaveQuantization) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // 8192^3: 64 x 64 = 4096 tiles of 128 x 128 -> ceil(4096 / 108) = 38 waves (no split-K).
  // Per tile: (8192 + 64) * 2 * 128 * 128 flop / (3e6 * 0.75 flop/us) = 270532608 / 2.25e6
  //   = 120.236715 us; 38 waves = 4568.995 us; memory 3 * 8192^2 * 2 B / 1.6e6 = 251.7 us (less);
  // + 5 us kernel = 4573.995 us, i.e. 240.4 TFLOP/s of the 243 (0.75 x 324) achievable.
  double us = model.gemmUs(1, 8192, 8192, 8192, DType::kFp16, int64_t{3} * 8192 * 8192 * 2);
  EXPECT_NEAR(us, 38 * 270532608.0 / 2.25e6 + 5, 1e-6);
  Event gemm = makeGemm(8192, 8192, 8192, "nt", DType::kFp16);
  EXPECT_NEAR(model.estimateUs(gemm), us, 1e-9);
}

TEST(DeviceModel, SkinnyGemmIsMemoryBound) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // 1 x 4096 x 4096: 32 tiles (one row of 128-column tiles), split-K min(108 / 32, 4096 / 256)
  // = 3 -> 96 CTAs in one wave, each (4096/3 + 64) * 2 * 16 * 128 / 2.25e6 = 2.60 us.
  // Memory: (4096 + 4096*4096 + 4096) * 2 B = 33570816 B / 1.6e6 B/us = 20.98176 us: bound.
  Event gemv = makeGemm(1, 4096, 4096, "nt", DType::kFp16);
  EXPECT_EQ(gemv.memory_bytes, 33570816);
  EXPECT_NEAR(model.estimateUs(gemv), 33570816 / 1.6e6 + 5, 1e-9);
}

TEST(DeviceModel, OneTileMoreThanTheSmsCostsAWholeWave) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // m = 128 * 108, n = 128: 108 tiles, one wave; m = 128 * 109: 109 tiles, two waves. k = 4096:
  // tile (4096 + 64) * 32768 / 2.25e6 = 60.5838 us; memory stays far below (< 4 us).
  const double tile_us = (4096 + 64) * 32768 / 2.25e6;
  double one_wave = model.gemmUs(1, 128 * 108, 128, 4096, DType::kFp16, 0);
  double two_waves = model.gemmUs(1, 128 * 109, 128, 4096, DType::kFp16, 0);
  EXPECT_NEAR(one_wave, tile_us + 5, 1e-9);
  EXPECT_NEAR(two_waves, 2 * tile_us + 5, 1e-9);
}

TEST(DeviceModel, MemoryBoundOpsStreamAtTheAchievableBandwidth) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // gelu over 2^24 elements fp16: 2 * 2^24 elements * 2 B = 67108864 B / 1.6e6 = 41.943 us + 2.
  Event gelu = makeCompute("gelu_fwd", {{"elems", 1 << 24}}, "", DType::kFp16);
  EXPECT_NEAR(model.estimateUs(gelu), 67108864 / 1.6e6 + 2, 1e-9);
}

// An op with an efficiency of its own uses it; the others keep memory_efficiency.
TEST(DeviceModel, AnOpsOwnMemoryEfficiencyReplacesTheShared) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  cluster.device.model->memory_efficiency_by_op["gelu_fwd"] = {0.4, "test"};
  DeviceModel model(cluster);
  // 67108864 B at 2000 GB/s * 0.4 = 8e5 B/us: 83.886 us + 2.
  Event gelu = makeCompute("gelu_fwd", {{"elems", 1 << 24}}, "", DType::kFp16);
  EXPECT_NEAR(model.estimateUs(gelu), 67108864 / 0.8e6 + 2, 1e-9);
  // add over 2^24 fp16: 3 * 2^24 * 2 B = 100663296 B at 1.6e6 B/us (the shared 0.8) + 2.
  Event add = makeCompute("add", {{"elems", 1 << 24}}, "", DType::kFp16);
  EXPECT_NEAR(model.estimateUs(add), 100663296 / 1.6e6 + 2, 1e-9);
}

TEST(DeviceModel, CollectivesFollowTheFittedCurve) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  const int64_t MiB = 1 << 20;
  // 8-rank all-reduce, factor 1.75. 1 MiB: LL 35 + 1.75 * 1048576 / 150e3 = 47.234 us, Simple
  // 100 + 7.98 = 107.98 -> 47.234 < floor 90 -> 90 us.
  Event small = makeCommunication(EventKind::kAllReduce, MiB, {8, 1, 8}, DType::kFp16);
  EXPECT_NEAR(model.estimateUs(small), 90, 1e-9);
  // 256 MiB: LL 35 + 1.75 * 268435456 / 150e3 = 3166.68; Simple 100 + 469762048 / 230e3
  // = 2142.44 us.
  Event large = makeCommunication(EventKind::kAllReduce, 256 * MiB, {8, 1, 8}, DType::kFp16);
  EXPECT_NEAR(model.estimateUs(large), 100 + 1.75 * 268435456 / 230e3, 1e-6);
  // Reduce-scatter over 8 of 256 MiB: factor 7/8, latency steps 7 of the curve's 14 (half):
  // Simple 50 + 0.875 * 268435456 / 230e3 = 1071.22 us.
  Event scatter = makeCommunication(EventKind::kReduceScatter, 256 * MiB, {8, 1, 8}, DType::kFp16);
  EXPECT_NEAR(model.estimateUs(scatter), 50 + 0.875 * 268435456 / 230e3, 1e-6);
  // A 4-rank group uses the smallest curve (8) with its own factor 1.5 and steps 6/14:
  // Simple 100 * 6/14 + 1.5 * 268435456 / 230e3 = 42.857 + 1750.67.
  Event four = makeCommunication(EventKind::kAllReduce, 256 * MiB, {4, 1, 4}, DType::kFp16);
  EXPECT_NEAR(model.estimateUs(four), 100.0 * 6 / 14 + 1.5 * 268435456 / 230e3, 1e-6);
  // Across 2 nodes (8 ranks, 4 per node) the network model times it (modeler/network/): this
  // cluster has no topology, so one NIC per GPU, the network's 5 us as every step's latency and
  // no LL128. The ring over the group's NIC share min(300, 200 * 4/8) = 100 GB/s, Simple:
  // NCCL's base 8.4 + 14 steps * 5 + 1.75 * 268435456 / 1e5 = 4776.02 us; the tree is slower
  // (tens of us + 268435456 B / (100 * 0.92 / 2) GB/s = 5835.6 us more), LL slower still.
  Event across = makeCommunication(EventKind::kAllReduce, 256 * MiB, {8, 2, 4}, DType::kFp16);
  EXPECT_NEAR(model.estimateUs(across), 8.4 + 70 + 1.75 * 268435456 / 1e5, 1e-6);
}

TEST(DeviceModel, DatasheetDeviceIsTheRoofline) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  cluster.device.model.reset();
  DeviceModel model(cluster);
  // 8192^3: 2 * 8192^3 / 324e6 flop/us = 3393.76 us; no host time.
  Event gemm = makeGemm(8192, 8192, 8192, "nt", DType::kFp16);
  EXPECT_NEAR(model.estimateUs(gemm), 2.0 * 8192 * 8192 * 8192 / 324e6, 1e-6);
  EXPECT_EQ(model.hostUs(gemm), 0);
  EXPECT_FALSE(model.calibrated());
}

TEST(DeviceModel, FusedAttentionRunsItsScoresGemmsCausallyHalved) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  DeviceModel model(cluster);
  // 64 heads, s = 4096, d = 128: the scores GEMM is 64 x (32 x 32 tiles) = 65536 tiles -> 607
  // waves of (128 + 64) * 2 * 128 * 128 / 2.25e6 = 2.796203 us = 1697.295 us. Forward: QK^T and
  // PV, causal: 2 * 0.5 = 1 such GEMM + 5 us; backward: 5 * 0.5 = 2.5 of them + 5 us.
  const double scores_us = 607 * (128.0 + 64) * 2 * 128 * 128 / 2.25e6;
  Event forward = makeCompute(
      "flash_attn_fwd", {{"batch", 64}, {"groups", 8}, {"seq", 4096}, {"dim", 128}, {"causal", 1}},
      "", DType::kFp16);
  Event backward = makeCompute(
      "flash_attn_bwd", {{"batch", 64}, {"groups", 8}, {"seq", 4096}, {"dim", 128}, {"causal", 1}},
      "", DType::kFp16);
  EXPECT_NEAR(model.estimateUs(forward), scores_us + 5, 1e-6);
  EXPECT_NEAR(model.estimateUs(backward), 2.5 * scores_us + 5, 1e-6);
  // The event's FLOPs are the model's: 4 b s^2 d forward, twice that backward, halved by the
  // causal mask (NeMo's count); without the mask the whole square.
  EXPECT_EQ(forward.flops, 0.5 * 4.0 * 64 * 4096 * 4096 * 128);
  EXPECT_EQ(backward.flops, 2 * forward.flops);
  Event full = makeCompute(
      "flash_attn_fwd", {{"batch", 64}, {"groups", 8}, {"seq", 4096}, {"dim", 128}, {"causal", 0}},
      "", DType::kFp16);
  EXPECT_EQ(full.flops, 4.0 * 64 * 4096 * 4096 * 128);
}

TEST(DeviceModel, TaskOpsWaitForTheHostToIssueThem) {
  // Three ops with device times 50, 5, 5 us and 20 us host time each. The host issues them at 20,
  // 40, 60; op 1 runs 20-70, op 2 waits for the device: 70-75, op 3: 75-80. The task takes 80 us.
  // With 10 us kernels the host is the bottleneck: starts 20, 40, 60 -> the task takes 70 us.
  auto taskUs = [](std::vector<double> device_us) {
    OpList ops;
    std::vector<EventCost> costs;
    for (size_t i = 0; i < device_us.size(); ++i) {
      ops.push_back(OpInstance{static_cast<int>(i), Stream::kCompute, 0, "op", false});
      costs.push_back(EventCost{device_us[i], Provenance::kEstimated, 20});
    }
    IterationPlan plan;
    plan.stages.resize(1);
    plan.stages[0].forward = ops;
    plan.pipelines.resize(1);
    std::vector<StageOpOffsets> offsets;
    TimingInput input = timingInput(plan, costs, offsets);
    return std::make_pair(input.stages[0].forward_us, offsets[0].forward_start_us);
  };
  auto [gpu_bound, starts] = taskUs({50, 5, 5});
  EXPECT_DOUBLE_EQ(gpu_bound, 80);
  EXPECT_EQ(starts, (std::vector<double>{20, 70, 75}));
  EXPECT_DOUBLE_EQ(taskUs({10, 10, 10}).first, 70);
}

// A new cost source plugs into the chain as one class: asked first, it answers for GEMMs only;
// everything else falls through to the device model, and every answer gets the host time.
class GemmTable : public CostSource {
 public:
  std::optional<EventCost> cost(const Event& event) const override {
    if (event.op != "gemm") return std::nullopt;
    return EventCost{123.0, Provenance::kMeasured};
  }
};

TEST(CostModelChain, ASourceAskedFirstWinsAndTheRestFallThrough) {
  ClusterConfig cluster = test::roundGpuCluster(kDeviceYaml);
  std::vector<std::unique_ptr<CostSource>> sources;
  sources.push_back(std::make_unique<GemmTable>());
  DeviceModel device(cluster);
  sources.push_back(std::make_unique<EstimatedSource>(device));
  CostModel costs(cluster, std::move(sources));
  auto gemm = costs.cost(makeGemm(8192, 8192, 8192, "nt", DType::kFp16));
  EXPECT_DOUBLE_EQ(gemm->time_us, 123.0);
  EXPECT_EQ(gemm->provenance, Provenance::kMeasured);
  EXPECT_DOUBLE_EQ(gemm->host_us, 20);
  Event gelu = makeCompute("gelu_fwd", {{"elems", 1 << 24}}, "", DType::kFp16);
  auto estimated = costs.cost(gelu);
  EXPECT_DOUBLE_EQ(estimated->time_us, 67108864 / 1.6e6 + 2);
  EXPECT_EQ(estimated->provenance, Provenance::kEstimated);
}

TEST(DeviceConfig, MissingFieldIsOneLineNamingFileAndKey) {
  std::string yaml = kDeviceYaml;
  yaml.erase(yaml.find("  host_op_us:"),
             yaml.find("  uncertainty_pct:") - yaml.find("  host_op_us:"));
  try {
    parseDeviceConfig(yaml, "bad-gpu.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad-gpu.yaml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host_op_us"), std::string::npos) << e.what();
  }
}

TEST(DeviceConfig, EfficiencyAbove1IsRefused) {
  std::string yaml = kDeviceYaml;
  yaml.replace(yaml.find("value: 0.75"), 11, "value: 75.0");
  EXPECT_THROW(parseDeviceConfig(yaml, "pct-gpu.yaml"), InputError);
}

TEST(DeviceConfig, WrittenFileReadsBackTheSameModel) {
  DeviceSpec spec = parseDeviceConfig(kDeviceYaml, "round-gpu.yaml");
  DeviceSpec again = parseDeviceConfig(deviceConfigYaml(spec), "written.yaml");
  EXPECT_EQ(again.id, "round-gpu");
  EXPECT_EQ(again.sm_count, 108);
  EXPECT_DOUBLE_EQ(again.model->gemm_efficiency.value, 0.75);
  EXPECT_EQ(again.model->host_op_us.source, "test");
  ASSERT_EQ(again.model->allreduce_curves.size(), 1u);
  EXPECT_DOUBLE_EQ(again.model->allreduce_curves[0].simple_busbw_gb_s, 230);
}

TEST(DeviceConfig, MemoryEfficiencyByOpReadsBackAndRefusesGemmsAndUnknownOps) {
  std::string yaml = kDeviceYaml;
  const std::string by_op =
      "  memory_efficiency_by_op:\n    dropout_fwd: {value: 0.6, source: \"measured: test\"}\n";
  yaml.insert(yaml.find("  memory_kernel_us:"), by_op);
  DeviceSpec spec = parseDeviceConfig(yaml, "by-op.yaml");
  DeviceSpec again = parseDeviceConfig(deviceConfigYaml(spec), "written.yaml");
  ASSERT_EQ(again.model->memory_efficiency_by_op.count("dropout_fwd"), 1u);
  EXPECT_DOUBLE_EQ(again.model->memory_efficiency_by_op.at("dropout_fwd").value, 0.6);
  EXPECT_EQ(again.model->memory_efficiency_by_op.at("dropout_fwd").source, "measured: test");
  for (const char* op : {"gemm", "dropout"}) {  // a GEMM has its own model; "dropout" is no op
    std::string bad = yaml;
    bad.replace(bad.find("dropout_fwd: {"), 11, op);
    try {
      parseDeviceConfig(bad, "bad.yaml");
      FAIL() << op;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("not a memory-bound compute op"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DeviceConfig, ClusterNamesABundledDevice) {
  ClusterConfig c = parseClusterConfig(R"(
name: named
node:
  gpus: 8
  device: a100-sxm4-80gb
  intra_link: {name: l, bandwidth_gb_s: 300, latency_us: 3}
network: {name: n, bandwidth_gb_s: 200, latency_us: 5}
)",
                                       "named.yaml");
  EXPECT_EQ(c.device.id, "a100-sxm4-80gb");
  EXPECT_EQ(c.device.sm_count, 108);
  EXPECT_TRUE(c.device.model.has_value());
  EXPECT_THROW(parseClusterConfig(R"(
name: named
node:
  gpus: 8
  device: no-such-gpu
  intra_link: {name: l, bandwidth_gb_s: 300, latency_us: 3}
network: {name: n, bandwidth_gb_s: 200, latency_us: 5}
)",
                                  "named.yaml"),
               InputError);
}

}  // namespace
}  // namespace evsim

// Fused attention's own tile model (device file `fused_attention`, modeler/device_model.h): a CTA
// per 128-query tile walking the key tiles it needs, the pass's products plus the softmax work per
// tile, a prologue/epilogue per CTA, spread over the SMs but never shorter than the longest CTA.
// Every time worked by hand beside it.
#include <gtest/gtest.h>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/device_model.h"

namespace evsim {
namespace {

// 108 SMs, fp16 324 TFLOP/s (3.24e8 flop/us); forward at 0.5 of it with 16 softmax channels and 1
// tile of CTA overhead, backward 0.4 / 16 / 3; 5 us per kernel.
const char* kDeviceYaml = R"(
name: round-gpu
gpu: Round GPU
datasheet:
  source: "test datasheet"
  peak_tflops: {fp16: 324}
  memory_bandwidth_gb_s: 2000
  memory_gib: 80
  sm_count: 108
model:
  gemm_efficiency: {value: 0.75, source: "test"}
  gemm_tile_overhead_k: {value: 64, source: "test"}
  gemm_kernel_us: {value: 5, source: "test"}
  memory_efficiency: {value: 0.8, source: "test"}
  memory_kernel_us: {value: 2, source: "test"}
  host_op_us: {value: 20, source: "test"}
  uncertainty_pct: {value: 10, source: "test"}
  fused_attention:
    kernel: "test kernel"
    forward: {efficiency: {value: 0.5, source: "t"}, softmax_dim: {value: 16, source: "t"},
              cta_overhead_tiles: {value: 1, source: "t"}}
    backward: {efficiency: {value: 0.4, source: "t"}, softmax_dim: {value: 16, source: "t"},
               cta_overhead_tiles: {value: 3, source: "t"}}
)";

ClusterConfig roundCluster() {
  ClusterConfig c;
  c.name = "round";
  c.gpus_per_node = 8;
  c.device = parseDeviceConfig(kDeviceYaml, "round-gpu.yaml");
  c.intra_link = {"link", 300, 3};
  c.network = {"net", 200, 5};
  return c;
}

Event attention(bool backward, int64_t batch, int64_t seq, int causal) {
  return makeCompute(
      backward ? "flash_attn_bwd" : "flash_attn_fwd",
      {{"batch", batch}, {"groups", batch}, {"seq", seq}, {"dim", 128}, {"causal", causal}}, "",
      DType::kFp16);
}

TEST(FusedAttention, CausalForwardAndBackwardWalkTheirTilesAtTheirOwnEfficiency) {
  ClusterConfig cluster = roundCluster();
  DeviceModel model(cluster);
  // seq 4096: n = 32 query tiles per head; causal: 32 * 33 / 2 = 528 tiles visited per head, plus
  // 32 CTAs x 1 tile of overhead = 560. Forward tile: 2 * 128^2 * (128 + 128 + 2 * 16) =
  // 9,437,184 flop at 3.24e8 * 0.5 = 1.62e8 flop/us: 64 heads -> 64 * 560 * 9437184 / 1.62e8 =
  // 2087.85 us (+ 5 us); its memory (Q, K, V, O and the LSE, 4.3e7 B / 1.6e6) is less.
  EXPECT_NEAR(model.estimateUs(attention(false, 64, 4096, 1)), 64 * 560 * 9437184.0 / 1.62e8 + 5,
              1e-6);
  // Backward: tile 2 * 128^2 * (3*128 + 2*128 + 5*16) = 23,592,960 flop at 1.296e8 flop/us;
  // 528 + 32 * 3 = 624 tiles per head.
  EXPECT_NEAR(model.estimateUs(attention(true, 64, 4096, 1)), 64 * 624 * 23592960.0 / 1.296e8 + 5,
              1e-6);
  // Without the mask every head visits all 32 x 32 tiles.
  EXPECT_NEAR(model.estimateUs(attention(false, 64, 4096, 0)),
              64 * (1024 + 32) * 9437184.0 / 1.62e8 + 5, 1e-6);
}

TEST(FusedAttention, FewCtasWaitForTheLongestOne) {
  ClusterConfig cluster = roundCluster();
  DeviceModel model(cluster);
  // One head of 512 tokens: 4 CTAs on 108 SMs. All of them together: (10 + 4) tiles = 0.816 us of
  // the whole GPU; but the last query tile walks 4 tiles + 1 of overhead on one SM at
  // 1.62e8 / 108 = 1.5e6 flop/us: 5 * 9437184 / 1.5e6 = 31.457 us (+ 5 us).
  EXPECT_NEAR(model.estimateUs(attention(false, 1, 512, 1)), 5 * 9437184.0 / 1.5e6 + 5, 1e-6);
}

TEST(FusedAttention, TheModelReadsBackAndABadPassIsNamed) {
  DeviceSpec spec = parseDeviceConfig(kDeviceYaml, "round-gpu.yaml");
  DeviceSpec again = parseDeviceConfig(deviceConfigYaml(spec), "again.yaml");
  ASSERT_TRUE(again.model->fused_attention.has_value());
  EXPECT_EQ(again.model->fused_attention->kernel, "test kernel");
  EXPECT_EQ(again.model->fused_attention->backward.cta_overhead_tiles.value, 3);
  std::string yaml = kDeviceYaml;
  yaml.replace(yaml.find("softmax_dim: {value: 16, source: \"t\"},\n              cta"), 11,
               "softmax_dimm");
  try {
    parseDeviceConfig(yaml, "bad.yaml");
    ADD_FAILURE() << "accepted an unknown key";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax_dimm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace evsim

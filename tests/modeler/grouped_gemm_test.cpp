// MoE expert GEMMs are grouped GEMMs (TEGroupedMLP, CUTLASS/DeepGEMM grouped kernels): the
// planner emits them as bgemm batch = local experts, m = one expert's rows (ops/moe_ops.cpp), so
// the device model tiles each expert's problem apart (a partial M tile per expert, the waves over
// all experts' tiles) and reads every expert's weights. Checked here against DeepGEMM's published
// grouped rows (README at deepseek-ai/DeepGEMM, Feb 2025, H800 = H100 SXM's SMs and clocks,
// FP8 with 1x128 / 128x128 scales), which the fp8_block tiles were not fitted to (they were fitted
// to the dense rows only), with the times worked by hand.
#include <gtest/gtest.h>

#include "config/cluster_config.h"
#include "modeler/device_model.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// Bytes of a grouped FP8 GEMM: per group A [m, k] and B [n, k] in fp8 (1 B), C [m, n] in bf16.
int64_t groupedBytes(int64_t groups, int64_t m, int64_t n, int64_t k) {
  return groups * (m * k + n * k + 2 * m * n);
}

TEST(GroupedGemm, SmallGroupsReadTheirOwnWeightsAndTheDeepGemmRowsFollow) {
  const ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const DeviceModel model(cluster);
  // 4 groups of 256 rows, n 4096, k 7168 (masked layout): 133,169,152 B at 3350 GB/s x 0.660925
  // = 60.146 us, + 5.455 us per kernel. The tiles: 4 x 2 x 32 = 256 on 132 SMs = 2 waves of
  // (7168 + 760) x 2 x 128^2 / (1979e6 / 132 x 0.77) = 22.503 us, x 1980/1830 = 48.69 us: less,
  // so the weights' bytes bound it: 65.60 us = 916.6 TFLOP/s, published 932 (-1.7%).
  const int64_t bytes = groupedBytes(4, 256, 4096, 7168);
  ASSERT_EQ(bytes, 133'169'152);
  const double grouped_us = model.gemmUs(4, 256, 4096, 7168, DType::kFp8Block, bytes);
  EXPECT_NEAR(grouped_us, 133169152.0 / (3350e3 * 0.660925) + 5.45469, 1e-3);
  const double flops = 2.0 * 4 * 256 * 4096 * 7168;
  EXPECT_NEAR(flops / grouped_us / 1e6, 932, 932 * 0.03);
  // The same tokens as one big GEMM (m 1024, one weight matrix): 45,088,768 B, 20.4 us, so the
  // tiles bound it: 2 x 22.503 x 1980/1830 + 5.455 = 54.15 us, 1110 TFLOP/s here, 19% above the
  // published kernel: the grouping is what makes it slower.
  const double one_us =
      model.gemmUs(1, 1024, 4096, 7168, DType::kFp8Block, groupedBytes(1, 1024, 4096, 7168));
  EXPECT_NEAR(one_us, 2 * 7928.0 * 32768 / (1979e6 / 132 * 0.77) * (1980.0 / 1830.0) + 5.45469,
              1e-3);
  EXPECT_GT(flops / one_us / 1e6, 932 * 1.15);
  // Contiguous layout, 4 groups of 8192 rows, n 4096, k 7168: 1297 TFLOP/s published (a short
  // benchmark at the boost clock, so the training-step time is divided by 1980/1830). Within 5%.
  const double big_us =
      model.gemmUs(4, 8192, 4096, 7168, DType::kFp8Block, groupedBytes(4, 8192, 4096, 7168));
  EXPECT_NEAR(2.0 * 4 * 8192 * 4096 * 7168 / (big_us / (1980.0 / 1830.0)) / 1e6, 1297, 1297 * 0.05);
}

}  // namespace
}  // namespace evsim

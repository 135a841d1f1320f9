// The card a memory verdict is judged against: what CUDA reports as the device's total
// (cudaMemGetInfo's total = torch's total_memory), not the datasheet's round figure, with the CUDA
// context and NCCL's buffers counted once, in the peak (config/device_config.cpp, above
// DeviceSpec::memoryBytes; docs/VALIDATION.md, Session 28, hbm28). Every expected figure is worked
// by hand beside it.
#include <gtest/gtest.h>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/memory_model.h"
#include "modeler/summary_report.h"
#include "support/test_support.h"
#include "support/tiny_fp16_model.h"

namespace evsim {
namespace {

constexpr int64_t kCapacityMiB = int64_t{1} << 20;
constexpr int64_t kCapacityGiB = int64_t{1} << 30;

// The bundled H100 80GB (configs/devices/h100-sxm5-80gb.yaml): nvidia-smi's 81,559 MiB less the
// driver's 551 MiB reserve = 81,008 MiB = 84,943,044,608 bytes, what PyTorch's OOM message calls
// "a total capacity of 79.11 GiB". At the default 5% headroom the usable share is
// floor(84,943,044,608 x 0.95) = floor(80,695,892,377.6) = 80,695,892,377 bytes = 75.15 GiB (the
// datasheet's 80 GiB offered 76.00).
constexpr int64_t kH100Bytes = 81'008 * kCapacityMiB;
constexpr int64_t kH100Usable = 80'695'892'377;

MemoryEstimate h100CapacityEstimate() {
  const ClusterConfig h100 = loadClusterConfig(test::configPath("clusters", "dgx-h100"));
  const ModelConfig model =
      parseModelConfig(test::tinyFp16ModelYaml("tiny-capacity", 2), "tiny-capacity.yaml");
  // One GPU, no communicator: the overhead is the context alone.
  return estimateMemory(model, Strategy::of(1, 1, 1, 1, 1, Schedule::kDapple), 1,
                        h100.device.memoryBytes(),
                        {ChunkMemoryInput{.parameters = 1000, .activation_bytes = kCapacityMiB}},
                        kDefaultMemoryHeadroom, {}, h100.device.memory);
}

TEST(DeviceCapacity, TheH100IsJudgedAgainstWhatCudaReports) {
  const MemoryEstimate m = h100CapacityEstimate();
  EXPECT_EQ(m.capacity_bytes, kH100Bytes);
  EXPECT_EQ(m.usable_bytes, kH100Usable);
  // The context (600 MiB, the device file's cuda_context_mib) is in the peak, beside what is
  // allocated, and not taken off the card as well: counted once.
  ASSERT_EQ(m.stages.size(), 1u);
  EXPECT_EQ(m.stages[0].communicators, 0);
  EXPECT_EQ(m.stages[0].overhead_bytes, 600 * kCapacityMiB);
  EXPECT_EQ(m.peak_bytes, m.stages[0].allocated_bytes + 600 * kCapacityMiB);
  EXPECT_EQ(m.marginBytes(), kH100Usable - m.peak_bytes);
}

// Verdicts the datasheet's 80 GiB got wrong, on the H100's real capacity (usable 75.15 GiB).
TEST(DeviceCapacity, VerdictsBetweenTheCudaTotalAndTheDatasheetMove) {
  MemoryEstimate m = h100CapacityEstimate();
  m.peak_stage = 1;
  // 79.50 GiB: 79.50 - 79.109375 = 0.390625 GiB = 400 MiB over the card (80 GiB: 0.50 to spare);
  // over the usable share by 79.50 - 75.1539 = 4.346.
  m.peak_bytes = 795 * kCapacityGiB / 10;
  EXPECT_EQ(memoryVerdict(m), "oom");
  EXPECT_EQ(memoryVerdictText(m),
            "79.50 GiB on stage 1 of 79.11 GiB: OOM, 400.00 MiB over the card (75.15 GiB usable "
            "with 5% headroom, 4.35 GiB over)");
  // 78.68 GiB (Meta's 405B plan of session 27): 79.109375 - 78.68 = 0.429375 GiB = 439.68 MiB to
  // spare (80: 1.32 GiB), 78.68 - 75.1539 = 3.526 over the usable share (80: 2.68).
  m.peak_bytes = static_cast<int64_t>(78.68 * kCapacityGiB);
  EXPECT_EQ(memoryVerdictText(m),
            "78.68 GiB on stage 1 of 79.11 GiB: fits the card (439.68 MiB to spare) but not the "
            "headroom (75.15 GiB usable with 5% headroom, 3.53 GiB over) -- the headroom is held "
            "back for the model's error, not a limit of the card");
  // 75.50 GiB fitted 80 GiB's 76.00 usable; on 75.1539 it is 0.346 over.
  m.peak_bytes = 755 * kCapacityGiB / 10;
  EXPECT_EQ(memoryVerdict(m), "over_headroom");
  EXPECT_EQ(memoryVerdict(m.peak_bytes, 76 * kCapacityGiB, 80 * kCapacityGiB), "fits");
  // One byte under the usable share fits, with that byte as its margin.
  m.peak_bytes = kH100Usable - 1;
  EXPECT_EQ(memoryVerdict(m), "fits");
  EXPECT_EQ(m.marginBytes(), 1);
}

// Every bundled card offers less than its datasheet's round figure: what CUDA reports is the
// nominal capacity less the driver's reserve (A100 80GB: nvidia-smi's 81,920 MiB = 80 GiB exactly,
// CUDA 79.15; the B200's 180 GB datasheet, nvidia-smi 183,359 MiB, CUDA 178.35).
TEST(DeviceCapacity, NoBundledCardOffersItsDatasheetFigure) {
  const struct {
    const char* cluster;
    double datasheet_gib;
  } cards[] = {{"dgx-a100", 80},  {"dgx-h100", 80},  {"grand-teton-h100", 96}, {"dgx-h200", 141},
               {"dgx-b200", 180}, {"ndv4-a100", 40}, {"a40-4x4", 48}};
  for (const auto& card : cards) {
    const ClusterConfig c = loadClusterConfig(test::configPath("clusters", card.cluster));
    EXPECT_LT(c.device.memory_gib, card.datasheet_gib) << card.cluster;
  }
}

}  // namespace
}  // namespace evsim

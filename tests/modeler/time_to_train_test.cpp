// Time and money of a training run (modeler/time_to_train.h), worked by hand.
#include "modeler/time_to_train.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace evsim {
namespace {

TEST(TimeToTrain, TokenCounts) {
  EXPECT_DOUBLE_EQ(parseTokenCount("15T", "--t"), 15e12);
  EXPECT_DOUBLE_EQ(parseTokenCount("300b", "--t"), 300e9);
  EXPECT_DOUBLE_EQ(parseTokenCount("2.5M", "--t"), 2.5e6);
  EXPECT_DOUBLE_EQ(parseTokenCount("1.5e12", "--t"), 1.5e12);
  for (const char* bad : {"", "T", "15X", "-1T", "0", "1e30", "nan", "15 T"}) {
    EXPECT_THROW(parseTokenCount(bad, "--t"), InputError) << bad;
  }
}

TEST(TimeToTrain, IterationsDaysGpuHoursCost) {
  // B 1024 x s 4096 = 4,194,304 tokens per iteration; 1e12 / 4,194,304 = 238,418.58 -> 238,419
  // iterations of 2 s = 476,838 s = 5.519 days; x 1024 GPUs / 3600 = 135,634.35 GPU-hours; at
  // 2.5 per GPU-hour 339,085.87.
  const TimeToTrain t = timeToTrain(1e12, 1024 * 4096, 2e6, 1024, 2.5);
  EXPECT_EQ(t.iterations, 238'419);
  EXPECT_DOUBLE_EQ(t.seconds, 476'838);
  EXPECT_NEAR(t.gpu_hours, 476'838.0 * 1024 / 3600, 1e-6);
  ASSERT_TRUE(t.cost.has_value());
  EXPECT_NEAR(*t.cost, 476'838.0 * 1024 / 3600 * 2.5, 1e-6);
  EXPECT_NEAR(timeToTrainJson(t)["days"].get<double>(), 476'838.0 / 86'400, 1e-9);
  EXPECT_EQ(timeToTrainText(t),
            "  time to train      1.00 T tokens: 238419 iterations, 5.5 days, 135.6 K "
            "GPU-hours, cost 339.1 K\n");
  // Under a day in hours: 1e9 tokens = 239 iterations x 2 s = 478 s = 0.13 h; x 8 GPUs = 1.1.
  const TimeToTrain short_run = timeToTrain(1e9, 1024 * 4096, 2e6, 8, std::nullopt);
  EXPECT_FALSE(short_run.cost.has_value());
  EXPECT_EQ(timeToTrainText(short_run),
            "  time to train      1.00 B tokens: 239 iterations, 0.1 hours, 1.1 GPU-hours\n");
}

}  // namespace
}  // namespace evsim

// CPU embedding gather/scatter-add and cross-entropy loss with its gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

TEST(CpuEmbedding, ForwardGathersTheRowsOfTheIds) {
  const int vocab = 5, hidden = 3;
  std::vector<float> table(vocab * hidden);
  for (int v = 0; v < vocab; ++v) {
    for (int h = 0; h < hidden; ++h) table[v * hidden + h] = 10.0f * v + h;
  }
  std::vector<int32_t> ids = {3, 0, 3, 4};
  std::vector<float> out(ids.size() * hidden, -1.0f);
  cpu::embeddingForward(ids.data(), table.data(), out.data(), 4, hidden);
  EXPECT_EQ(out, (std::vector<float>{30, 31, 32, 0, 1, 2, 30, 31, 32, 40, 41, 42}));
}

TEST(CpuEmbedding, BackwardScatterAddsDuplicateIds) {
  const int vocab = 5, hidden = 2;
  std::vector<int32_t> ids = {3, 0, 3, 4};
  std::vector<float> dout = {1, 2, 10, 20, 100, 200, 1000, 2000};
  std::vector<float> dtable(vocab * hidden, 0.0f);
  cpu::embeddingBackward(ids.data(), dout.data(), dtable.data(), 4, hidden);
  // row 0 <- token 1; row 3 <- tokens 0 and 2; row 4 <- token 3; rows 1, 2 untouched.
  EXPECT_EQ(dtable, (std::vector<float>{10, 20, 0, 0, 0, 0, 101, 202, 1000, 2000}));
  // A second call accumulates (gradient accumulation across micro-batches).
  cpu::embeddingBackward(ids.data(), dout.data(), dtable.data(), 4, hidden);
  EXPECT_EQ(dtable[0], 20.0f);
  EXPECT_EQ(dtable[6], 202.0f);
}

TEST(CpuCrossEntropy, UniformLogitsGiveLogOfCols) {
  const int rows = 3, cols = 50;
  std::vector<float> logits(rows * cols, 0.7f);
  std::vector<int32_t> targets = {0, 17, 49};
  std::vector<float> loss(rows), lse(rows);
  cpu::crossEntropyForward(logits.data(), targets.data(), loss.data(), lse.data(), rows, cols);
  for (int r = 0; r < rows; ++r) EXPECT_NEAR(loss[r], std::log(50.0f), 1e-5f);
}

TEST(CpuCrossEntropy, HandComputedRowAndGradient) {
  // logits ln1, ln2, ln3: softmax = [1/6, 2/6, 3/6]; target 2 -> loss = ln 6 - ln 3 = ln 2.
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f)};
  std::vector<int32_t> targets = {2};
  std::vector<float> loss(1), lse(1), dloss = {1.0f}, dlogits(3);
  cpu::crossEntropyForward(logits.data(), targets.data(), loss.data(), lse.data(), 1, 3);
  EXPECT_NEAR(loss[0], std::log(2.0f), 1e-6f);
  EXPECT_NEAR(lse[0], std::log(6.0f), 1e-6f);
  cpu::crossEntropyBackward(logits.data(), targets.data(), lse.data(), dloss.data(), dlogits.data(),
                            1, 3);
  EXPECT_NEAR(dlogits[0], 1 / 6.0f, 1e-6f);
  EXPECT_NEAR(dlogits[1], 2 / 6.0f, 1e-6f);
  EXPECT_NEAR(dlogits[2], 3 / 6.0f - 1, 1e-6f);
}

TEST(CpuCrossEntropy, GradientRowsSumToZeroAndMatchFiniteDifferences) {
  const int rows = 4, cols = 7;
  std::vector<float> logits(rows * cols), dloss(rows);
  for (int i = 0; i < rows * cols; ++i) logits[i] = rng::uniformAt(9, i, -3.0f, 3.0f);
  for (int r = 0; r < rows; ++r) dloss[r] = rng::uniformAt(10, r, 0.5f, 2.0f);
  std::vector<int32_t> targets = {0, 6, 3, 3};
  std::vector<float> loss(rows), lse(rows), dlogits(rows * cols);
  cpu::crossEntropyForward(logits.data(), targets.data(), loss.data(), lse.data(), rows, cols);
  cpu::crossEntropyBackward(logits.data(), targets.data(), lse.data(), dloss.data(), dlogits.data(),
                            rows, cols);
  auto weightedLoss = [&] {
    std::vector<float> l(rows), s(rows);
    cpu::crossEntropyForward(logits.data(), targets.data(), l.data(), s.data(), rows, cols);
    double total = 0;
    for (int r = 0; r < rows; ++r) total += double(l[r]) * dloss[r];
    return total;
  };
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int j = 0; j < cols; ++j) sum += dlogits[r * cols + j];
    EXPECT_NEAR(sum, 0.0, 1e-6);
  }
  const float h = 1e-2f;
  for (int i = 0; i < rows * cols; ++i) {
    float saved = logits[i];
    logits[i] = saved + h;
    double up = weightedLoss();
    logits[i] = saved - h;
    double down = weightedLoss();
    logits[i] = saved;
    EXPECT_NEAR(dlogits[i], (up - down) / (2 * h), 5e-4) << i;
  }
}

}  // namespace
}  // namespace evsim

// Embedding lookup and its gradient; cross-entropy loss over a vocabulary shard and its gradient.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

void embeddingForward(const int32_t* ids, const float* table, float* out, int64_t tokens,
                      int64_t hidden) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = table + int64_t(ids[t]) * hidden;
    std::copy(row, row + hidden, out + t * hidden);
  }
}

void embeddingBackward(const int32_t* ids, const float* dout, float* dtable, int64_t tokens,
                       int64_t hidden) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* row = dtable + int64_t(ids[t]) * hidden;
    const float* src = dout + t * hidden;
    for (int64_t h = 0; h < hidden; ++h) row[h] += src[h];
  }
}

void crossEntropyForward(const float* logits, const int32_t* targets, float* loss, float* lse,
                         int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * cols;
    float max_value = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < cols; ++j) max_value = std::max(max_value, xr[j]);
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(xr[j] - max_value);
    lse[r] = max_value + static_cast<float>(std::log(sum));
    loss[r] = lse[r] - xr[targets[r]];
  }
}

void crossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                          const float* dloss, float* dlogits, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * cols;
    float* dr = dlogits + r * cols;
    for (int64_t j = 0; j < cols; ++j) dr[j] = std::exp(xr[j] - lse[r]) * dloss[r];
    dr[targets[r]] -= dloss[r];
  }
}

}  // namespace evsim::cpu

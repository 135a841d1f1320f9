// Mixture-of-experts routing on the CPU: the router's softmax and top-k, and the token
// permutation into expert order and back.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

void moeRouterForward(const float* logits, float* probs, int32_t* topk_index, float* topk_prob,
                      int64_t tokens, int64_t experts, int64_t topk) {
  std::vector<int32_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* x = logits + t * experts;
    float* p = probs + t * experts;
    const float max_logit = *std::max_element(x, x + experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) {
      p[e] = std::exp(x[e] - max_logit);
      sum += p[e];
    }
    for (int64_t e = 0; e < experts; ++e) p[e] = static_cast<float>(p[e] / sum);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + topk, order.end(),
                      [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    for (int64_t j = 0; j < topk; ++j) {
      topk_index[t * topk + j] = order[static_cast<size_t>(j)];
      topk_prob[t * topk + j] = p[order[static_cast<size_t>(j)]];
    }
  }
}

void moeRouterBackward(const float* probs, const float* dprobs, float* dlogits, int64_t tokens,
                       int64_t experts) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* p = probs + t * experts;
    const float* dp = dprobs + t * experts;
    double dot = 0;
    for (int64_t e = 0; e < experts; ++e) dot += double(dp[e]) * p[e];
    for (int64_t e = 0; e < experts; ++e) {
      dlogits[t * experts + e] = p[e] * static_cast<float>(dp[e] - dot);
    }
  }
}

void moePermute(const float* x, const int32_t* source, float* y, int64_t rows, int64_t hidden) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(x + int64_t{source[r]} * hidden, hidden, y + r * hidden);
  }
}

void moeUnpermute(const float* y, const float* weight, float* x, int64_t rows, int64_t hidden,
                  int64_t topk) {
  for (int64_t token = 0; token < rows / topk; ++token) {
    float* out = x + token * hidden;
    std::fill_n(out, hidden, 0.0f);
    for (int64_t j = 0; j < topk; ++j) {
      const int64_t r = token * topk + j;
      const float w = weight[r];
      const float* in = y + r * hidden;
      for (int64_t c = 0; c < hidden; ++c) out[c] += w * in[c];
    }
  }
}

}  // namespace evsim::cpu

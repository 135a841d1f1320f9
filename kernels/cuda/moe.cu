// Mixture-of-experts routing on CUDA: the router's softmax + top-k (one block per token; experts
// are at most a few hundred, so a block-wide max/sum and k rounds of arg-max suffice), its
// softmax gradient, and the token permutation (a row gather) and its weighted inverse.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

constexpr int kRouterThreads = 128;

template <typename T>
__global__ void routerForwardKernel(const T* logits, float* probs, int32_t* topk_index,
                                    float* topk_prob, int64_t experts, int64_t topk) {
  const int64_t t = blockIdx.x;
  const T* x = logits + t * experts;
  float* p = probs + t * experts;
  float local_max = -INFINITY;
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x)
    local_max = fmaxf(local_max, toFloat(x[e]));
  const float max_logit = blockMax(local_max);
  float local_sum = 0;
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
    const float v = __expf(toFloat(x[e]) - max_logit);
    p[e] = v;
    local_sum += v;
  }
  const float inv = 1.0f / blockSum(local_sum);
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) p[e] *= inv;
  __syncthreads();
  // k rounds of a serial arg-max by thread 0: k and E are small, the op is memory-bound.
  if (threadIdx.x == 0) {
    float last = INFINITY;
    int64_t last_index = -1;
    for (int64_t j = 0; j < topk; ++j) {
      float best = -1.0f;
      int64_t best_index = 0;
      for (int64_t e = 0; e < experts; ++e) {
        const bool after_last = p[e] < last || (p[e] == last && e > last_index);
        if (after_last && p[e] > best) {
          best = p[e];
          best_index = e;
        }
      }
      topk_index[t * topk + j] = static_cast<int32_t>(best_index);
      topk_prob[t * topk + j] = best;
      last = best;
      last_index = best_index;
    }
  }
}

__global__ void routerBackwardKernel(const float* probs, const float* dprobs, float* dlogits,
                                     int64_t experts) {
  const int64_t t = blockIdx.x;
  const float* p = probs + t * experts;
  const float* dp = dprobs + t * experts;
  float local = 0;
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) local += dp[e] * p[e];
  const float dot = blockSum(local);
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
    dlogits[t * experts + e] = p[e] * (dp[e] - dot);
  }
}

template <typename T>
__global__ void permuteKernel(const T* x, const int32_t* source, T* y, int64_t rows,
                              int64_t hidden) {
  const int64_t n = rows * hidden;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / hidden, c = i - r * hidden;
    y[i] = x[int64_t{source[r]} * hidden + c];
  }
}

template <typename T>
__global__ void unpermuteKernel(const T* y, const float* weight, T* x, int64_t tokens,
                                int64_t hidden, int64_t topk) {
  const int64_t n = tokens * hidden;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t token = i / hidden, c = i - token * hidden;
    float sum = 0;
    for (int64_t j = 0; j < topk; ++j) {
      const int64_t r = token * topk + j;
      sum += weight[r] * toFloat(y[r * hidden + c]);
    }
    x[i] = fromFloat<T>(sum);
  }
}

}  // namespace

void moeRouterForward(DType dtype, const void* logits, float* probs, int32_t* topk_index,
                      float* topk_prob, int64_t tokens, int64_t experts, int64_t topk,
                      cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    routerForwardKernel<T><<<rowGrid(tokens), kRouterThreads, 0, stream>>>(
        static_cast<const T*>(logits), probs, topk_index, topk_prob, experts, topk);
  });
  EVSIM_CUDA_CHECK_LAUNCH(routerForwardKernel);
}

void moeRouterBackward(const float* probs, const float* dprobs, float* dlogits, int64_t tokens,
                       int64_t experts, cudaStream_t stream) {
  routerBackwardKernel<<<rowGrid(tokens), kRouterThreads, 0, stream>>>(probs, dprobs, dlogits,
                                                                       experts);
  EVSIM_CUDA_CHECK_LAUNCH(routerBackwardKernel);
}

void moePermute(DType dtype, const void* x, const int32_t* source, void* y, int64_t rows,
                int64_t hidden, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    permuteKernel<T><<<elementBlocks(rows * hidden), kElementThreads, 0, stream>>>(
        static_cast<const T*>(x), source, static_cast<T*>(y), rows, hidden);
  });
  EVSIM_CUDA_CHECK_LAUNCH(permuteKernel);
}

void moeUnpermute(DType dtype, const void* y, const float* weight, void* x, int64_t rows,
                  int64_t hidden, int64_t topk, cudaStream_t stream) {
  const int64_t tokens = rows / topk;
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    unpermuteKernel<T><<<elementBlocks(tokens * hidden), kElementThreads, 0, stream>>>(
        static_cast<const T*>(y), weight, static_cast<T*>(x), tokens, hidden, topk);
  });
  EVSIM_CUDA_CHECK_LAUNCH(unpermuteKernel);
}

}  // namespace evsim::cuda

// Row-wise pieces of the CUDA fused attention (cuda_attention.cpp runs the GEMMs around them):
// the softmax of a tile of scores with its log-sum-exp, FlashAttention's delta = rowsum(dO o O),
// the probabilities and score gradients of the backward pass, and the sum of per-head dK, dV over
// the query heads of each key/value head. Math in float.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

// One block per tile row: blockIdx.x = h * rows + i.
struct TileRow {
  int64_t index;   // h * rows + i: the row of the [batch][rows][keys] tile buffers
  int64_t lse_at;  // h * seq + first + i: the row of [batch][seq] lse and delta
  int64_t valid;   // keys [0, valid) take part
};

__device__ __forceinline__ TileRow tileRow(int64_t rows, int64_t keys, int64_t seq, int64_t first,
                                           bool causal) {
  const int64_t index = blockIdx.x;
  const int64_t h = index / rows;
  const int64_t i = index - h * rows;
  return {index, h * seq + first + i, causal ? first + i + 1 : keys};
}

template <typename T>
__global__ void attentionSoftmaxKernel(const float* scores, T* probs, float* lse, int64_t rows,
                                       int64_t keys, int64_t seq, int64_t first, bool causal) {
  const TileRow r = tileRow(rows, keys, seq, first, causal);
  const float* s = scores + r.index * keys;
  T* p = probs + r.index * keys;
  float max_value = -INFINITY;
  for (int64_t j = threadIdx.x; j < r.valid; j += blockDim.x) max_value = fmaxf(max_value, s[j]);
  max_value = blockMax(max_value);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < r.valid; j += blockDim.x) sum += __expf(s[j] - max_value);
  sum = blockSum(sum);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    p[j] = fromFloat<T>(j < r.valid ? __expf(s[j] - max_value) * inv : 0.0f);
  }
  if (threadIdx.x == 0) lse[r.lse_at] = max_value + logf(sum);
}

// One warp per row of `dim`.
template <typename T>
__global__ void attentionDeltaKernel(const T* dout, const T* out, float* delta, int64_t rows,
                                     int64_t dim) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < rows;
       row += warps) {
    float sum = 0.0f;
    for (int64_t d = lane; d < dim; d += 32) {
      sum += toFloat(dout[row * dim + d]) * toFloat(out[row * dim + d]);
    }
    sum = warpSum(sum);
    if (lane == 0) delta[row] = sum;
  }
}

template <typename T>
__global__ void attentionScoreGradKernel(const float* scores, const float* dprobs, const float* lse,
                                         const float* delta, T* probs, T* dscores, int64_t rows,
                                         int64_t keys, int64_t seq, int64_t first, bool causal) {
  const TileRow r = tileRow(rows, keys, seq, first, causal);
  const float row_lse = lse[r.lse_at];
  const float row_delta = delta[r.lse_at];
  const int64_t offset = r.index * keys;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    const float p = j < r.valid ? __expf(scores[offset + j] - row_lse) : 0.0f;
    probs[offset + j] = fromFloat<T>(p);
    dscores[offset + j] = fromFloat<T>(p * (dprobs[offset + j] - row_delta));
  }
}

template <typename T>
__global__ void attentionGroupSumKernel(const float* per_head, T* out, int64_t groups,
                                        int64_t heads_per_group, int64_t head_elems) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < groups * head_elems;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = e / head_elems;
    const int64_t at = e - g * head_elems;
    float sum = 0.0f;
    for (int64_t r = 0; r < heads_per_group; ++r) {
      sum += per_head[(g * heads_per_group + r) * head_elems + at];
    }
    out[e] = fromFloat<T>(sum);
  }
}

}  // namespace

void attentionSoftmax(DType dtype, const float* scores, void* probs, float* lse, int64_t batch,
                      int64_t rows, int64_t keys, int64_t seq, int64_t first, bool causal,
                      cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionSoftmaxKernel<T><<<rowGrid(batch * rows), rowThreads(keys), 0, stream>>>(
        scores, static_cast<T*>(probs), lse, rows, keys, seq, first, causal);
  });
  EVSIM_CUDA_CHECK_LAUNCH(attentionSoftmaxKernel);
}

void attentionDelta(DType dtype, const void* dout, const void* out, float* delta, int64_t rows,
                    int64_t dim, cudaStream_t stream) {
  // elementBlocks(rows * 32): one 32-thread warp per row.
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionDeltaKernel<T><<<elementBlocks(rows * 32), kElementThreads, 0, stream>>>(
        static_cast<const T*>(dout), static_cast<const T*>(out), delta, rows, dim);
  });
  EVSIM_CUDA_CHECK_LAUNCH(attentionDeltaKernel);
}

void attentionScoreGrad(DType dtype, const float* scores, const float* dprobs, const float* lse,
                        const float* delta, void* probs, void* dscores, int64_t batch, int64_t rows,
                        int64_t keys, int64_t seq, int64_t first, bool causal,
                        cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionScoreGradKernel<T><<<rowGrid(batch * rows), rowThreads(keys), 0, stream>>>(
        scores, dprobs, lse, delta, static_cast<T*>(probs), static_cast<T*>(dscores), rows, keys,
        seq, first, causal);
  });
  EVSIM_CUDA_CHECK_LAUNCH(attentionScoreGradKernel);
}

void attentionGroupSum(DType dtype, const float* per_head, void* out, int64_t groups,
                       int64_t heads_per_group, int64_t head_elems, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionGroupSumKernel<T><<<elementBlocks(groups * head_elems), kElementThreads, 0, stream>>>(
        per_head, static_cast<T*>(out), groups, heads_per_group, head_elems);
  });
  EVSIM_CUDA_CHECK_LAUNCH(attentionGroupSumKernel);
}

}  // namespace evsim::cuda

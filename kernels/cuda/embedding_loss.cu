// CUDA embedding gather / scatter-add (atomicAdd into an fp32 gradient) and the cross-entropy
// loss over a vocabulary shard with its gradient (one block per row).
#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

unsigned gridOf(int64_t count, const char* what) {
  if (count <= 0 || count > INT_MAX) cuda_detail::throwError(what);
  return static_cast<unsigned>(count);
}

int hiddenThreads(int64_t hidden) { return hidden >= 256 ? 256 : 128; }

template <typename T>
__global__ void embeddingForwardKernel(const int32_t* ids, const T* table, T* out, int64_t hidden) {
  const int64_t token = blockIdx.x;
  const T* row = table + int64_t(ids[token]) * hidden;
  T* dst = out + token * hidden;
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x) dst[h] = row[h];
}

template <typename T>
__global__ void embeddingBackwardKernel(const int32_t* ids, const T* dout, float* dtable,
                                        int64_t hidden) {
  const int64_t token = blockIdx.x;
  float* row = dtable + int64_t(ids[token]) * hidden;
  const T* src = dout + token * hidden;
  // Tokens with the same id hit the same row: atomics make the scatter-add race-free.
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x) atomicAdd(row + h, toFloat(src[h]));
}

template <typename T>
__global__ void crossEntropyForwardKernel(const T* logits, const int32_t* targets, float* loss,
                                          float* lse, int64_t cols) {
  const int64_t row = blockIdx.x;
  const T* xr = logits + row * cols;
  float max_value = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    max_value = fmaxf(max_value, toFloat(xr[j]));
  max_value = blockMax(max_value);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += __expf(toFloat(xr[j]) - max_value);
  sum = blockSum(sum);
  if (threadIdx.x == 0) {
    float log_sum_exp = max_value + __logf(sum);
    lse[row] = log_sum_exp;
    loss[row] = log_sum_exp - toFloat(xr[targets[row]]);
  }
}

template <typename T>
__global__ void crossEntropyBackwardKernel(const T* logits, const int32_t* targets,
                                           const float* lse, const float* dloss, T* dlogits,
                                           int64_t cols) {
  const int64_t row = blockIdx.x;
  const int64_t offset = row * cols;
  const float log_sum_exp = lse[row];
  const float scale = dloss[row];
  const int32_t target = targets[row];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float softmax = __expf(toFloat(logits[offset + j]) - log_sum_exp);
    dlogits[offset + j] = fromFloat<T>((softmax - (j == target ? 1.0f : 0.0f)) * scale);
  }
}

}  // namespace

void embeddingForward(DType dtype, const int32_t* ids, const void* table, void* out, int64_t tokens,
                      int64_t hidden, cudaStream_t stream) {
  const unsigned grid = gridOf(tokens, "embedding token count outside the CUDA grid range");
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    embeddingForwardKernel<T><<<grid, hiddenThreads(hidden), 0, stream>>>(
        ids, static_cast<const T*>(table), static_cast<T*>(out), hidden);
  });
  EVSIM_CUDA_CHECK_LAUNCH(embeddingForwardKernel);
}

void embeddingBackward(DType dtype, const int32_t* ids, const void* dout, float* dtable,
                       int64_t tokens, int64_t hidden, cudaStream_t stream) {
  const unsigned grid = gridOf(tokens, "embedding token count outside the CUDA grid range");
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    embeddingBackwardKernel<T><<<grid, hiddenThreads(hidden), 0, stream>>>(
        ids, static_cast<const T*>(dout), dtable, hidden);
  });
  EVSIM_CUDA_CHECK_LAUNCH(embeddingBackwardKernel);
}

void crossEntropyForward(DType dtype, const void* logits, const int32_t* targets, float* loss,
                         float* lse, int64_t rows, int64_t cols, cudaStream_t stream) {
  const unsigned grid = gridOf(rows, "cross-entropy row count outside the CUDA grid range");
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    crossEntropyForwardKernel<T><<<grid, rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(logits), targets, loss, lse, cols);
  });
  EVSIM_CUDA_CHECK_LAUNCH(crossEntropyForwardKernel);
}

void crossEntropyBackward(DType dtype, const void* logits, const int32_t* targets, const float* lse,
                          const float* dloss, void* dlogits, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  const unsigned grid = gridOf(rows, "cross-entropy row count outside the CUDA grid range");
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    crossEntropyBackwardKernel<T><<<grid, rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(logits), targets, lse, dloss, static_cast<T*>(dlogits), cols);
  });
  EVSIM_CUDA_CHECK_LAUNCH(crossEntropyBackwardKernel);
}

}  // namespace evsim::cuda

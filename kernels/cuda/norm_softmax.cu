// Row-wise CUDA kernels: fused scale + mask + softmax, layernorm, and their gradients. One block
// per row; reductions in float through warp shuffles.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

template <typename T>
__global__ void softmaxForwardKernel(const T* x, T* y, int64_t cols, float scale, bool causal) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  // Keys [0, valid) take part; a causal row r is query position r % cols of its score matrix.
  const int64_t valid = causal ? row % cols + 1 : cols;
  float max_value = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    max_value = fmaxf(max_value, scale * toFloat(xr[j]));
  }
  max_value = blockMax(max_value);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    sum += __expf(scale * toFloat(xr[j]) - max_value);
  }
  const float inv = 1.0f / blockSum(sum);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float value = j < valid ? __expf(scale * toFloat(xr[j]) - max_value) * inv : 0.0f;
    yr[j] = fromFloat<T>(value);
  }
}

template <typename T>
__global__ void softmaxBackwardKernel(const T* y, const T* dy, T* dx, int64_t cols, float scale) {
  const int64_t offset = int64_t(blockIdx.x) * cols;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    dot += toFloat(dy[offset + j]) * toFloat(y[offset + j]);
  }
  dot = blockSum(dot);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float yv = toFloat(y[offset + j]);
    dx[offset + j] = fromFloat<T>(scale * yv * (toFloat(dy[offset + j]) - dot));
  }
}

template <typename T>
__global__ void layerNormForwardKernel(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                                       float* rstd, int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += toFloat(xr[j]);
  const float mu = blockSum(sum) / float(cols);
  // Second pass over the (cached) row: squared deviations, no E[x^2] - E[x]^2 cancellation.
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float d = toFloat(xr[j]) - mu;
    sq += d * d;
  }
  const float inv_std = rsqrtf(blockSum(sq) / float(cols) + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = inv_std;
  }
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    yr[j] = fromFloat<T>((toFloat(xr[j]) - mu) * inv_std * toFloat(gamma[j]) + toFloat(beta[j]));
  }
}

template <typename T>
__global__ void layerNormBackwardInputKernel(const T* x, const T* dy, const T* gamma,
                                             const float* mean, const float* rstd, T* dx,
                                             int64_t cols) {
  const int64_t row = blockIdx.x;
  const int64_t offset = row * cols;
  const float mu = mean[row];
  const float rs = rstd[row];
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd
  float sum_g = 0.0f;
  float sum_g_xhat = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float g = toFloat(dy[offset + j]) * toFloat(gamma[j]);
    sum_g += g;
    sum_g_xhat += g * (toFloat(x[offset + j]) - mu) * rs;
  }
  const float mean_g = blockSum(sum_g) / float(cols);
  const float mean_g_xhat = blockSum(sum_g_xhat) / float(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float xhat = (toFloat(x[offset + j]) - mu) * rs;
    float g = toFloat(dy[offset + j]) * toFloat(gamma[j]);
    dx[offset + j] = fromFloat<T>(rs * (g - mean_g - xhat * mean_g_xhat));
  }
}

// dgamma and dbeta are column sums over all rows. Stage 1: a [32 x 8] block sums a strided share
// of the rows for 32 adjacent columns (coalesced reads) into partial[part][col]; stage 2 sums the
// parts. Atomics per element would serialise on the same `cols` addresses.
constexpr int kColTile = 32;
constexpr int kRowTile = 8;
constexpr int kMaxParts = 64;

int layerNormParts(int64_t rows) {
  int64_t parts = (rows + kRowTile - 1) / kRowTile;
  return static_cast<int>(parts < kMaxParts ? parts : kMaxParts);
}

template <typename T>
__global__ void layerNormParamPartialKernel(const T* x, const T* dy, const float* mean,
                                            const float* rstd, float* part_gamma, float* part_beta,
                                            int64_t rows, int64_t cols) {
  __shared__ float tile_gamma[kRowTile][kColTile + 1];
  __shared__ float tile_beta[kRowTile][kColTile + 1];
  const int64_t col = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  float sum_gamma = 0.0f;
  float sum_beta = 0.0f;
  if (col < cols) {
    for (int64_t r = int64_t(blockIdx.y) * kRowTile + threadIdx.y; r < rows;
         r += int64_t(gridDim.y) * kRowTile) {
      float d = toFloat(dy[r * cols + col]);
      sum_gamma += d * (toFloat(x[r * cols + col]) - mean[r]) * rstd[r];
      sum_beta += d;
    }
  }
  tile_gamma[threadIdx.y][threadIdx.x] = sum_gamma;
  tile_beta[threadIdx.y][threadIdx.x] = sum_beta;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int i = 1; i < kRowTile; ++i) {
      sum_gamma += tile_gamma[i][threadIdx.x];
      sum_beta += tile_beta[i][threadIdx.x];
    }
    part_gamma[int64_t(blockIdx.y) * cols + col] = sum_gamma;
    part_beta[int64_t(blockIdx.y) * cols + col] = sum_beta;
  }
}

template <typename T>
__global__ void layerNormParamFinalKernel(const float* part_gamma, const float* part_beta,
                                          int parts, T* dgamma, T* dbeta, int64_t cols) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float sum_gamma = 0.0f;
  float sum_beta = 0.0f;
  for (int p = 0; p < parts; ++p) {
    sum_gamma += part_gamma[int64_t(p) * cols + col];
    sum_beta += part_beta[int64_t(p) * cols + col];
  }
  dgamma[col] = fromFloat<T>(sum_gamma);
  dbeta[col] = fromFloat<T>(sum_beta);
}

}  // namespace

void softmaxForward(DType dtype, const void* x, void* y, int64_t rows, int64_t cols, float scale,
                    kernel_params::SoftmaxMask mask, cudaStream_t stream) {
  const bool causal = mask == kernel_params::SoftmaxMask::kCausal;
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmaxForwardKernel<T><<<rowGrid(rows), rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), cols, scale, causal);
  });
  EVSIM_CUDA_CHECK_LAUNCH(softmaxForwardKernel);
}

void softmaxBackward(DType dtype, const void* y, const void* dy, void* dx, int64_t rows,
                     int64_t cols, float scale, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmaxBackwardKernel<T><<<rowGrid(rows), rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), cols, scale);
  });
  EVSIM_CUDA_CHECK_LAUNCH(softmaxBackwardKernel);
}

void layerNormForward(DType dtype, const void* x, const void* gamma, const void* beta, void* y,
                      float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                      cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    layerNormForwardKernel<T><<<rowGrid(rows), rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
        static_cast<T*>(y), mean, rstd, cols, eps);
  });
  EVSIM_CUDA_CHECK_LAUNCH(layerNormForwardKernel);
}

int64_t layerNormBackwardWorkspaceFloats(int64_t rows, int64_t cols) {
  return 2 * int64_t(layerNormParts(rows)) * cols;
}

void layerNormBackward(DType dtype, const void* x, const void* dy, const void* gamma,
                       const float* mean, const float* rstd, void* dx, void* dgamma, void* dbeta,
                       float* workspace, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int parts = layerNormParts(rows);
  float* part_gamma = workspace;
  float* part_beta = workspace + int64_t(parts) * cols;
  const dim3 partial_grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile), parts);
  const unsigned final_blocks = static_cast<unsigned>((cols + 255) / 256);
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    layerNormBackwardInputKernel<T><<<rowGrid(rows), rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(gamma), mean,
        rstd, static_cast<T*>(dx), cols);
    EVSIM_CUDA_CHECK_LAUNCH(layerNormBackwardInputKernel);
    layerNormParamPartialKernel<T><<<partial_grid, dim3(kColTile, kRowTile), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), mean, rstd, part_gamma, part_beta,
        rows, cols);
    EVSIM_CUDA_CHECK_LAUNCH(layerNormParamPartialKernel);
    layerNormParamFinalKernel<T><<<final_blocks, 256, 0, stream>>>(
        part_gamma, part_beta, parts, static_cast<T*>(dgamma), static_cast<T*>(dbeta), cols);
  });
  EVSIM_CUDA_CHECK_LAUNCH(layerNormParamFinalKernel);
}

}  // namespace evsim::cuda

// RMSNorm on CUDA: one block per row for y and dx; dgamma as a two-stage column reduction (the
// structure of layernorm's in norm_softmax.cu, with one parameter instead of two).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

template <typename T>
__global__ void rmsNormForwardKernel(const T* x, const T* gamma, T* y, float* rstd, int64_t cols,
                                     float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = toFloat(xr[j]);
    sq += v * v;
  }
  const float inv_rms = rsqrtf(blockSum(sq) / float(cols) + eps);
  if (threadIdx.x == 0) rstd[row] = inv_rms;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    yr[j] = fromFloat<T>(toFloat(xr[j]) * inv_rms * toFloat(gamma[j]));
  }
}

template <typename T>
__global__ void rmsNormBackwardInputKernel(const T* x, const T* dy, const T* gamma,
                                           const float* rstd, T* dx, int64_t cols) {
  const int64_t row = blockIdx.x;
  const int64_t offset = row * cols;
  const float rs = rstd[row];
  // dx = rstd * (g - xhat * mean(g * xhat)), g = dy * gamma, xhat = x * rstd
  float sum_g_xhat = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    sum_g_xhat += toFloat(dy[offset + j]) * toFloat(gamma[j]) * toFloat(x[offset + j]) * rs;
  }
  const float mean_g_xhat = blockSum(sum_g_xhat) / float(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float xhat = toFloat(x[offset + j]) * rs;
    const float g = toFloat(dy[offset + j]) * toFloat(gamma[j]);
    dx[offset + j] = fromFloat<T>(rs * (g - xhat * mean_g_xhat));
  }
}

// dgamma[col] = sum over rows of dy * xhat. Stage 1: a [32 x 8] block sums a strided share of the
// rows for 32 adjacent columns (coalesced reads) into partial[part][col]; stage 2 sums the parts.
constexpr int kColTile = 32;
constexpr int kRowTile = 8;
constexpr int kMaxParts = 64;

int rmsNormParts(int64_t rows) {
  const int64_t parts = (rows + kRowTile - 1) / kRowTile;
  return static_cast<int>(parts < kMaxParts ? parts : kMaxParts);
}

template <typename T>
__global__ void rmsNormGammaPartialKernel(const T* x, const T* dy, const float* rstd,
                                          float* partial, int64_t rows, int64_t cols) {
  __shared__ float tile[kRowTile][kColTile + 1];
  const int64_t col = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int64_t r = int64_t(blockIdx.y) * kRowTile + threadIdx.y; r < rows;
         r += int64_t(gridDim.y) * kRowTile) {
      sum += toFloat(dy[r * cols + col]) * toFloat(x[r * cols + col]) * rstd[r];
    }
  }
  tile[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int i = 1; i < kRowTile; ++i) sum += tile[i][threadIdx.x];
    partial[int64_t(blockIdx.y) * cols + col] = sum;
  }
}

template <typename T>
__global__ void rmsNormGammaFinalKernel(const float* partial, int parts, T* dgamma, int64_t cols) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float sum = 0.0f;
  for (int p = 0; p < parts; ++p) sum += partial[int64_t(p) * cols + col];
  dgamma[col] = fromFloat<T>(sum);
}

}  // namespace

void rmsNormForward(DType dtype, const void* x, const void* gamma, void* y, float* rstd,
                    int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsNormForwardKernel<T><<<rowGrid(rows), rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<T*>(y), rstd, cols,
        eps);
  });
  EVSIM_CUDA_CHECK_LAUNCH(rmsNormForwardKernel);
}

int64_t rmsNormBackwardWorkspaceFloats(int64_t rows, int64_t cols) {
  return int64_t(rmsNormParts(rows)) * cols;
}

void rmsNormBackward(DType dtype, const void* x, const void* dy, const void* gamma,
                     const float* rstd, void* dx, void* dgamma, float* workspace, int64_t rows,
                     int64_t cols, cudaStream_t stream) {
  const int parts = rmsNormParts(rows);
  const dim3 partial_grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile), parts);
  const unsigned final_blocks = static_cast<unsigned>((cols + 255) / 256);
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsNormBackwardInputKernel<T><<<rowGrid(rows), rowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(gamma), rstd,
        static_cast<T*>(dx), cols);
    EVSIM_CUDA_CHECK_LAUNCH(rmsNormBackwardInputKernel);
    rmsNormGammaPartialKernel<T><<<partial_grid, dim3(kColTile, kRowTile), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), rstd, workspace, rows, cols);
    EVSIM_CUDA_CHECK_LAUNCH(rmsNormGammaPartialKernel);
    rmsNormGammaFinalKernel<T>
        <<<final_blocks, 256, 0, stream>>>(workspace, parts, static_cast<T*>(dgamma), cols);
  });
  EVSIM_CUDA_CHECK_LAUNCH(rmsNormGammaFinalKernel);
}

}  // namespace evsim::cuda

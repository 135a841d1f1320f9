// SwiGLU on CUDA: element-wise over rows of [gate | up]. A 2D grid (rows on y, columns grid-strided
// on x) finds each element's row without a 64-bit division per element, which would cost more
// than the memory traffic of this bandwidth-bound op.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

constexpr int64_t kMaxGridY = 65535;

dim3 swigluGrid(int64_t rows, int64_t cols) {
  return dim3(elementBlocks(cols), static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + __expf(-v)); }

#define EVSIM_SWIGLU_LOOP(r, j, rows, cols)                                      \
  for (int64_t r = blockIdx.y; r < (rows); r += gridDim.y)                       \
    for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < (cols); \
         j += int64_t(gridDim.x) * blockDim.x)

template <typename T>
__global__ void swigluForwardKernel(const T* x, T* y, int64_t rows, int64_t cols) {
  EVSIM_SWIGLU_LOOP(r, j, rows, cols) {
    const float gate = toFloat(x[r * 2 * cols + j]);
    const float up = toFloat(x[r * 2 * cols + cols + j]);
    y[r * cols + j] = fromFloat<T>(gate * sigmoid(gate) * up);
  }
}

template <typename T>
__global__ void swigluBackwardKernel(const T* x, const T* dy, T* dx, int64_t rows, int64_t cols) {
  EVSIM_SWIGLU_LOOP(r, j, rows, cols) {
    const float gate = toFloat(x[r * 2 * cols + j]);
    const float up = toFloat(x[r * 2 * cols + cols + j]);
    const float d = toFloat(dy[r * cols + j]);
    const float s = sigmoid(gate);
    dx[r * 2 * cols + j] = fromFloat<T>(d * up * s * (1.0f + gate * (1.0f - s)));
    dx[r * 2 * cols + cols + j] = fromFloat<T>(d * gate * s);
  }
}

#undef EVSIM_SWIGLU_LOOP

}  // namespace

void swigluForward(DType dtype, const void* x, void* y, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    swigluForwardKernel<T><<<swigluGrid(rows, cols), kElementThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), rows, cols);
  });
  EVSIM_CUDA_CHECK_LAUNCH(swigluForwardKernel);
}

void swigluBackward(DType dtype, const void* x, const void* dy, void* dx, int64_t rows,
                    int64_t cols, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    swigluBackwardKernel<T><<<swigluGrid(rows, cols), kElementThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), rows, cols);
  });
  EVSIM_CUDA_CHECK_LAUNCH(swigluBackwardKernel);
}

}  // namespace evsim::cuda

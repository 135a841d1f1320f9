// Random fills with the counter-based hash of kernels/hash_rng.h: no curand state, and the same
// values as the CPU backend for the same seed.
#include <cuda_fp8.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/hash_rng.h"

namespace evsim::cuda {

namespace {

template <typename T>
__global__ void fillUniformKernel(T* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    p[i] = fromFloat<T>(rng::uniformAt(seed, uint64_t(i), lo, hi));
  }
}

// fp8 GEMM operands: E4M3, rounded to nearest and saturated to its finite range (+-448).
__global__ void fillFp8Kernel(__nv_fp8_e4m3* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    p[i] = __nv_fp8_e4m3(rng::uniformAt(seed, uint64_t(i), lo, hi));
  }
}

__global__ void fillIndicesKernel(int32_t* p, int64_t n, int64_t bound, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    p[i] = rng::indexAt(seed, uint64_t(i), bound);
  }
}

}  // namespace

void fillUniform(DType dtype, void* p, int64_t n, uint64_t seed, float lo, float hi,
                 cudaStream_t stream) {
  if (dtype == DType::kFp8) {  // the one own kernel that writes fp8: dispatchDType refuses it
    fillFp8Kernel<<<elementBlocks(n), kElementThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(p),
                                                                    n, seed, lo, hi);
    EVSIM_CUDA_CHECK_LAUNCH(fillFp8Kernel);
    return;
  }
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    fillUniformKernel<T>
        <<<elementBlocks(n), kElementThreads, 0, stream>>>(static_cast<T*>(p), n, seed, lo, hi);
  });
  EVSIM_CUDA_CHECK_LAUNCH(fillUniformKernel);
}

void fillIndices(int32_t* p, int64_t n, int64_t bound, uint64_t seed, cudaStream_t stream) {
  if (bound <= 0) cuda_detail::throwError("fillIndices: bound must be > 0");
  fillIndicesKernel<<<elementBlocks(n), kElementThreads, 0, stream>>>(p, n, bound, seed);
  EVSIM_CUDA_CHECK_LAUNCH(fillIndicesKernel);
}

}  // namespace evsim::cuda

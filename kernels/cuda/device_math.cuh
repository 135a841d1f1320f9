#pragma once
// Device helpers shared by the .cu files: dtype dispatch, float conversion, block reductions and
// launch shapes. Include only from .cu files.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "events/dtype.h"
#include "kernels/cuda/cuda_check.h"

namespace evsim::cuda {

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float x) {
  return __float2half(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

// Calls f(T{}) with T the element type of dtype; f launches the templated kernel. fp8, in every
// scaling recipe, is for GEMM operands only (cuBLASLt, cuda_gemm_fp8.cpp; fill.cu fills them): no
// own kernel is built for it, and the factory refuses fp8 non-GEMM events by signature before any
// launch gets here.
template <typename F>
void dispatchDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFp16:
      f(__half{});
      return;
    case DType::kBf16:
      f(__nv_bfloat16{});
      return;
    case DType::kFp32:
      f(float{});
      return;
    case DType::kFp8:
    case DType::kFp8Row:
    case DType::kFp8Block:
    case DType::kMxfp8:
      cuda_detail::throwInputError("fp8 is for GEMM operands only: no CUDA kernel computes in fp8");
  }
  // Not reached for a valid DType; without it an out-of-range value would launch nothing silently.
  cuda_detail::throwInputError("unknown dtype: no CUDA kernel for it");
}

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum (or max) over the block; every thread gets the result. blockDim.x must be a multiple of 32.
// The leading barrier lets consecutive calls reuse the shared scratch safely.
template <bool kMax>
__device__ __forceinline__ float blockReduce(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = kMax ? warpMax(v) : warpSum(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float identity = kMax ? -INFINITY : 0.0f;
    float w = lane < warps ? partial[lane] : identity;
    w = kMax ? warpMax(w) : warpSum(w);
    if (lane == 0) partial[0] = w;
  }
  __syncthreads();
  return partial[0];
}

__device__ __forceinline__ float blockSum(float v) { return blockReduce<false>(v); }
__device__ __forceinline__ float blockMax(float v) { return blockReduce<true>(v); }

// Grid of a one-block-per-row kernel.
inline unsigned rowGrid(int64_t rows) {
  if (rows <= 0 || rows > INT_MAX) cuda_detail::throwError("row count outside the CUDA grid range");
  return static_cast<unsigned>(rows);
}

// Threads per block for a one-block-per-row kernel over `cols` columns (a multiple of 32).
inline int rowThreads(int64_t cols) {
  if (cols >= 2048) return 512;
  if (cols >= 512) return 256;
  return 128;
}

// Grid of a grid-stride element-wise kernel with 256-thread blocks.
inline constexpr int kElementThreads = 256;
inline unsigned elementBlocks(int64_t n) {
  int64_t blocks = (n + kElementThreads - 1) / kElementThreads;
  const int64_t kMaxBlocks = int64_t(1) << 20;  // enough to fill any GPU; the loop does the rest
  return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks);
}

}  // namespace evsim::cuda

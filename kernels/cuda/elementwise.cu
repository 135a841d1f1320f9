// Element-wise CUDA kernels: GELU (tanh approximation), dropout with a hash RNG and a stored uint8
// mask, add, a memory pass (a memory-bound op known by its bytes), and the fp32 AdamW step. Grid-stride loops; math in float.
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/hash_rng.h"

namespace evsim::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

#define EVSIM_GRID_STRIDE(i, n)                                             \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

template <typename T>
__global__ void geluForwardKernel(const T* x, T* y, int64_t n) {
  EVSIM_GRID_STRIDE(i, n) {
    float v = toFloat(x[i]);
    y[i] = fromFloat<T>(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v))));
  }
}

template <typename T>
__global__ void geluBackwardKernel(const T* x, const T* dy, T* dx, int64_t n) {
  EVSIM_GRID_STRIDE(i, n) {
    float v = toFloat(x[i]);
    float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    float derivative = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner;
    dx[i] = fromFloat<T>(toFloat(dy[i]) * derivative);
  }
}

template <typename T>
__global__ void dropoutForwardKernel(const T* x, T* y, uint8_t* mask, int64_t n, float p,
                                     float scale, uint64_t seed) {
  EVSIM_GRID_STRIDE(i, n) {
    bool keep = rng::keepAt(seed, uint64_t(i), p);
    mask[i] = keep ? 1 : 0;
    y[i] = fromFloat<T>(keep ? toFloat(x[i]) * scale : 0.0f);
  }
}

template <typename T>
__global__ void dropoutBackwardKernel(const T* dy, const uint8_t* mask, T* dx, int64_t n,
                                      float scale) {
  EVSIM_GRID_STRIDE(i, n) { dx[i] = fromFloat<T>(mask[i] ? toFloat(dy[i]) * scale : 0.0f); }
}

template <typename T>
__global__ void addKernel(const T* a, const T* b, T* c, int64_t n) {
  EVSIM_GRID_STRIDE(i, n) { c[i] = fromFloat<T>(toFloat(a[i]) + toFloat(b[i])); }
}

// Output word j sums input words j, j + n_out, j + 2 n_out, ...: every input word read once
// (coalesced: neighbouring threads read neighbouring words), every output word written once.
__global__ void memoryPassKernel(const float* in, int64_t n_in, float* out, int64_t n_out) {
  EVSIM_GRID_STRIDE(j, n_out) {
    float sum = 0.0f;
    for (int64_t i = j; i < n_in; i += n_out) sum += in[i];
    out[j] = sum;
  }
}

__global__ void adamKernel(float* w, const float* g, float* m, float* v, int64_t n,
                           kernel_params::AdamHyper hyper, float correction1, float correction2) {
  EVSIM_GRID_STRIDE(i, n) {
    float grad = g[i];
    float mi = hyper.beta1 * m[i] + (1.0f - hyper.beta1) * grad;
    float vi = hyper.beta2 * v[i] + (1.0f - hyper.beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    float update = (mi / correction1) / (sqrtf(vi / correction2) + hyper.eps);
    w[i] -= hyper.lr * (update + hyper.weight_decay * w[i]);
  }
}

#undef EVSIM_GRID_STRIDE

void checkProbability(float p) {
  if (!(p >= 0.0f && p < 1.0f)) cuda_detail::throwError("dropout probability outside [0, 1)");
}

}  // namespace

void geluForward(DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    geluForwardKernel<T><<<elementBlocks(n), kElementThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                           static_cast<T*>(y), n);
  });
  EVSIM_CUDA_CHECK_LAUNCH(geluForwardKernel);
}

void geluBackward(DType dtype, const void* x, const void* dy, void* dx, int64_t n,
                  cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    geluBackwardKernel<T><<<elementBlocks(n), kElementThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
  EVSIM_CUDA_CHECK_LAUNCH(geluBackwardKernel);
}

void dropoutForward(DType dtype, const void* x, void* y, uint8_t* mask, int64_t n, float p,
                    uint64_t seed, cudaStream_t stream) {
  checkProbability(p);
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    dropoutForwardKernel<T><<<elementBlocks(n), kElementThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), mask, n, p, 1.0f / (1.0f - p), seed);
  });
  EVSIM_CUDA_CHECK_LAUNCH(dropoutForwardKernel);
}

void dropoutBackward(DType dtype, const void* dy, const uint8_t* mask, void* dx, int64_t n, float p,
                     cudaStream_t stream) {
  checkProbability(p);
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    dropoutBackwardKernel<T><<<elementBlocks(n), kElementThreads, 0, stream>>>(
        static_cast<const T*>(dy), mask, static_cast<T*>(dx), n, 1.0f / (1.0f - p));
  });
  EVSIM_CUDA_CHECK_LAUNCH(dropoutBackwardKernel);
}

void add(DType dtype, const void* a, const void* b, void* c, int64_t n, cudaStream_t stream) {
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    addKernel<T><<<elementBlocks(n), kElementThreads, 0, stream>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c), n);
  });
  EVSIM_CUDA_CHECK_LAUNCH(addKernel);
}

void memoryPass(const float* in, int64_t n_in, float* out, int64_t n_out, cudaStream_t stream) {
  if (n_in < 0 || n_out < 1) cuda_detail::throwError("memory pass needs n_in >= 0, n_out >= 1");
  memoryPassKernel<<<elementBlocks(n_out), kElementThreads, 0, stream>>>(in, n_in, out, n_out);
  EVSIM_CUDA_CHECK_LAUNCH(memoryPassKernel);
}

void adamStep(float* weights, const float* grads, float* m, float* v, int64_t n, int64_t step,
              const kernel_params::AdamHyper& hyper, cudaStream_t stream) {
  if (step < 1) cuda_detail::throwError("Adam step must be >= 1");
  // Bias corrections are per step, not per element: computed once here in double.
  float correction1 = 1.0f - static_cast<float>(std::pow(double(hyper.beta1), double(step)));
  float correction2 = 1.0f - static_cast<float>(std::pow(double(hyper.beta2), double(step)));
  adamKernel<<<elementBlocks(n), kElementThreads, 0, stream>>>(weights, grads, m, v, n, hyper,
                                                               correction1, correction2);
  EVSIM_CUDA_CHECK_LAUNCH(adamKernel);
}

}  // namespace evsim::cuda

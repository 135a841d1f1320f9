// Rotary position embedding on CUDA from the host-computed cos/sin tables (cpu::ropeTables), so
// both backends turn by identical angles. Blocks stride over tokens; a block's threads share the
// token's table row and cover its heads x dim/2 channel pairs.
#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace evsim::cuda {

namespace {

// sign -1 turns backwards: the inverse (transposed) rotation of the gradient. Each thread reads a
// pair before writing it, so y may be x.
template <typename T>
__global__ void ropeKernel(const T* x, T* y, const float* cos, const float* sin, int64_t tokens,
                           int heads, int half, int64_t positions, float sign) {
  const int pairs = heads * half;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float* c = cos + (t % positions) * half;
    const float* s = sin + (t % positions) * half;
    const int64_t base = t * pairs * 2;
    for (int q = threadIdx.x; q < pairs; q += blockDim.x) {
      const int h = q / half;
      const int i = q - h * half;
      const int64_t lo_at = base + int64_t(h) * 2 * half + i;
      const float lo = toFloat(x[lo_at]);
      const float hi = toFloat(x[lo_at + half]);
      const float sn = sign * s[i];
      y[lo_at] = fromFloat<T>(lo * c[i] - hi * sn);
      y[lo_at + half] = fromFloat<T>(hi * c[i] + lo * sn);
    }
  }
}

void launchRope(DType dtype, const void* x, void* y, const float* cos, const float* sin,
                int64_t tokens, int64_t heads, int64_t dim, int64_t positions, float sign,
                cudaStream_t stream) {
  if (dim % 2 != 0 || positions <= 0 || heads * dim > INT_MAX) {
    cuda_detail::throwError("rope: dim must be even, positions > 0 and heads * dim an int");
  }
  const int half = static_cast<int>(dim / 2);
  const int pairs = static_cast<int>(heads) * half;
  const int threads = pairs >= 256 ? 256 : 128;
  const int64_t kMaxBlocks = int64_t(1) << 20;
  const unsigned blocks = static_cast<unsigned>(tokens < kMaxBlocks ? tokens : kMaxBlocks);
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    ropeKernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), cos,
                                                  sin, tokens, static_cast<int>(heads), half,
                                                  positions, sign);
  });
  EVSIM_CUDA_CHECK_LAUNCH(ropeKernel);
}

}  // namespace

void ropeForward(DType dtype, const void* x, void* y, const float* cos, const float* sin,
                 int64_t tokens, int64_t heads, int64_t dim, int64_t positions,
                 cudaStream_t stream) {
  launchRope(dtype, x, y, cos, sin, tokens, heads, dim, positions, 1.0f, stream);
}

void ropeBackward(DType dtype, const void* dy, void* dx, const float* cos, const float* sin,
                  int64_t tokens, int64_t heads, int64_t dim, int64_t positions,
                  cudaStream_t stream) {
  launchRope(dtype, dy, dx, cos, sin, tokens, heads, dim, positions, -1.0f, stream);
}

}  // namespace evsim::cuda

#pragma once
// Internal pieces shared by the CUDA ComputeKernel wrappers: an owning device allocation and a
// base class holding the stream and the seed.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "events/dtype.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/hash_rng.h"
#include "kernels/kernel.h"

namespace evsim::cuda {

// Bytes of `n` fp32 values (the kernels' statistics and workspaces are fp32 whatever the dtype).
inline int64_t floatBytes(int64_t n) { return n * int64_t{sizeof(float)}; }

// Owning cudaMalloc allocation; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t bytes) {
    if (bytes > 0) EVSIM_CUDA_CHECK(cudaMalloc(&ptr_, static_cast<size_t>(bytes)));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);  // teardown: nothing useful to do with an error
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

class CudaKernelBase : public ComputeKernel {
 public:
  CudaKernelBase(cudaStream_t stream, uint64_t seed) : stream_(stream), seed_(seed) {}
  void synchronize() override { EVSIM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 protected:
  // Buffer number `index` of this kernel: n elements of dtype, uniform in [lo, hi). Same values
  // as the CPU backend's buffer `index` for fp32.
  DeviceBuffer randomBuffer(DType dtype, int64_t n, uint64_t index, float lo = -1.0f,
                            float hi = 1.0f) {
    DeviceBuffer buffer(n * dtypeBytes(dtype));
    fillUniform(dtype, buffer.get(), n, rng::hashAt(seed_, index), lo, hi, stream_);
    return buffer;
  }
  DeviceBuffer randomIndices(int64_t n, int64_t bound, uint64_t index) {
    DeviceBuffer buffer(n * int64_t(sizeof(int32_t)));
    fillIndices(buffer.as<int32_t>(), n, bound, rng::hashAt(seed_, index), stream_);
    return buffer;
  }

  cudaStream_t stream_;
  uint64_t seed_;
};

}  // namespace evsim::cuda

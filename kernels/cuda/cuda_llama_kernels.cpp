#include "kernels/cuda/cuda_llama_kernels.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/event_shapes.h"

namespace evsim::cuda {

namespace {

namespace kp = kernel_params;

class RmsNormKernel final : public CudaKernelBase {
 public:
  RmsNormKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")) {
    x_ = randomBuffer(dtype_, rows_ * cols_, 0);
    gamma_ = randomBuffer(dtype_, cols_, 1, 0.5f, 1.5f);
    y_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
    rstd_ = DeviceBuffer(floatBytes(rows_));
    forward();  // backward reads the saved rstd
    if (backward_) {
      dy_ = randomBuffer(dtype_, rows_ * cols_, 3);
      dx_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
      dgamma_ = DeviceBuffer(cols_ * dtypeBytes(dtype_));
      workspace_ = DeviceBuffer(floatBytes(rmsNormBackwardWorkspaceFloats(rows_, cols_)));
    }
    synchronize();
  }
  void run() override {
    if (backward_) {
      rmsNormBackward(dtype_, x_.get(), dy_.get(), gamma_.get(), rstd_.as<float>(), dx_.get(),
                      dgamma_.get(), workspace_.as<float>(), rows_, cols_, stream_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    rmsNormForward(dtype_, x_.get(), gamma_.get(), y_.get(), rstd_.as<float>(), rows_, cols_,
                   kp::kRmsNormEpsilon, stream_);
  }
  bool backward_;
  DType dtype_;
  int64_t rows_, cols_;
  DeviceBuffer x_, gamma_, y_, rstd_, dy_, dx_, dgamma_, workspace_;
};

// One row [gate | up] of 2 * elems, as the CPU kernel (the event carries no row length).
class SwiGluKernel final : public CudaKernelBase {
 public:
  SwiGluKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed), backward_(backward), dtype_(e.dtype), n_(e.dim("elems")) {
    x_ = randomBuffer(dtype_, 2 * n_, 0, -4.0f, 4.0f);
    out_ = DeviceBuffer((backward_ ? 2 * n_ : n_) * dtypeBytes(dtype_));
    if (backward_) dy_ = randomBuffer(dtype_, n_, 1);
    synchronize();
  }
  void run() override {
    if (backward_) {
      swigluBackward(dtype_, x_.get(), dy_.get(), out_.get(), 1, n_, stream_);
    } else {
      swigluForward(dtype_, x_.get(), out_.get(), 1, n_, stream_);
    }
  }

 private:
  bool backward_;
  DType dtype_;
  int64_t n_;
  DeviceBuffer x_, out_, dy_;
};

// In place on one [tokens, heads, dim] buffer, as the CPU kernel; the cos/sin tables are the
// CPU's (cpu::ropeTables), uploaded once.
class RopeKernel final : public CudaKernelBase {
 public:
  RopeKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        tokens_(e.dim("tokens")),
        heads_(e.dim("heads")),
        dim_(e.dim("dim")),
        positions_(std::min<int64_t>(tokens_, kp::kRopePositions)) {
    x_ = randomBuffer(dtype_, tokens_ * heads_ * dim_, 0);
    const int64_t entries = positions_ * dim_ / 2;
    std::vector<float> cos(static_cast<size_t>(entries)), sin(cos.size());
    cpu::ropeTables(positions_, dim_, kp::kRopeTheta, cos.data(), sin.data());
    cos_ = DeviceBuffer(floatBytes(entries));
    sin_ = DeviceBuffer(floatBytes(entries));
    EVSIM_CUDA_CHECK(cudaMemcpyAsync(cos_.get(), cos.data(), floatBytes(entries),
                                     cudaMemcpyHostToDevice, stream_));
    EVSIM_CUDA_CHECK(cudaMemcpyAsync(sin_.get(), sin.data(), floatBytes(entries),
                                     cudaMemcpyHostToDevice, stream_));
    synchronize();  // before the host tables go
  }
  void run() override {
    if (backward_) {
      ropeBackward(dtype_, x_.get(), x_.get(), cos_.as<float>(), sin_.as<float>(), tokens_, heads_,
                   dim_, positions_, stream_);
    } else {
      ropeForward(dtype_, x_.get(), x_.get(), cos_.as<float>(), sin_.as<float>(), tokens_, heads_,
                  dim_, positions_, stream_);
    }
  }

 private:
  bool backward_;
  DType dtype_;
  int64_t tokens_, heads_, dim_, positions_;
  DeviceBuffer x_, cos_, sin_;
};

}  // namespace

std::unique_ptr<ComputeKernel> makeCudaRmsNormKernel(const Event& event, cudaStream_t stream,
                                                     uint64_t seed, bool backward) {
  return std::make_unique<RmsNormKernel>(event, stream, seed, backward);
}

std::unique_ptr<ComputeKernel> makeCudaSwiGluKernel(const Event& event, cudaStream_t stream,
                                                    uint64_t seed, bool backward) {
  return std::make_unique<SwiGluKernel>(event, stream, seed, backward);
}

std::unique_ptr<ComputeKernel> makeCudaRopeKernel(const Event& event, cudaStream_t stream,
                                                  uint64_t seed, bool backward) {
  checkRopeDim(event);
  return std::make_unique<RopeKernel>(event, stream, seed, backward);
}

}  // namespace evsim::cuda

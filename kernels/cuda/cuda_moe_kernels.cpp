#include "kernels/cuda/cuda_moe_kernels.h"

#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/event_shapes.h"

namespace evsim::cuda {

namespace {

class RouterKernel final : public CudaKernelBase {
 public:
  RouterKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        tokens_(e.dim("tokens")),
        experts_(e.dim("experts")),
        topk_(e.dim("topk")) {
    logits_ = randomBuffer(dtype_, tokens_ * experts_, 0, -4.0f, 4.0f);
    probs_ = DeviceBuffer(floatBytes(tokens_ * experts_));
    index_ = DeviceBuffer(tokens_ * topk_ * int64_t(sizeof(int32_t)));
    top_ = DeviceBuffer(floatBytes(tokens_ * topk_));
    forward();  // the backward reads the probabilities
    if (backward_) {
      dprobs_ = randomBuffer(DType::kFp32, tokens_ * experts_, 1);
      dlogits_ = DeviceBuffer(floatBytes(tokens_ * experts_));
    }
    synchronize();
  }
  void run() override {
    if (backward_) {
      moeRouterBackward(probs_.as<float>(), dprobs_.as<float>(), dlogits_.as<float>(), tokens_,
                        experts_, stream_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    moeRouterForward(dtype_, logits_.get(), probs_.as<float>(), index_.as<int32_t>(),
                     top_.as<float>(), tokens_, experts_, topk_, stream_);
  }
  bool backward_;
  DType dtype_;
  int64_t tokens_, experts_, topk_;
  DeviceBuffer logits_, probs_, index_, top_, dprobs_, dlogits_;
};

class PermuteKernel final : public CudaKernelBase {
 public:
  PermuteKernel(const Event& e, cudaStream_t s, uint64_t seed)
      : CudaKernelBase(s, seed), dtype_(e.dtype), rows_(e.dim("rows")), hidden_(e.dim("hidden")) {
    x_ = randomBuffer(dtype_, rows_ * hidden_, 0);
    source_ = randomIndices(rows_, rows_, 1);
    y_ = DeviceBuffer(rows_ * hidden_ * dtypeBytes(dtype_));
    synchronize();
  }
  void run() override {
    moePermute(dtype_, x_.get(), source_.as<int32_t>(), y_.get(), rows_, hidden_, stream_);
  }

 private:
  DType dtype_;
  int64_t rows_, hidden_;
  DeviceBuffer x_, source_, y_;
};

class UnpermuteKernel final : public CudaKernelBase {
 public:
  UnpermuteKernel(const Event& e, cudaStream_t s, uint64_t seed)
      : CudaKernelBase(s, seed),
        dtype_(e.dtype),
        rows_(e.dim("rows")),
        hidden_(e.dim("hidden")),
        topk_(e.dim("topk")) {
    y_ = randomBuffer(dtype_, rows_ * hidden_, 0);
    weight_ = randomBuffer(DType::kFp32, rows_, 1, 0.0f, 1.0f);
    x_ = DeviceBuffer(rows_ / topk_ * hidden_ * dtypeBytes(dtype_));
    synchronize();
  }
  void run() override {
    moeUnpermute(dtype_, y_.get(), weight_.as<float>(), x_.get(), rows_, hidden_, topk_, stream_);
  }

 private:
  DType dtype_;
  int64_t rows_, hidden_, topk_;
  DeviceBuffer y_, weight_, x_;
};

}  // namespace

std::unique_ptr<ComputeKernel> makeCudaMoeKernel(const Event& event, cudaStream_t stream,
                                                 uint64_t seed) {
  checkMoeShape(event);
  if (event.op == "moe_permute") return std::make_unique<PermuteKernel>(event, stream, seed);
  if (event.op == "moe_unpermute") return std::make_unique<UnpermuteKernel>(event, stream, seed);
  return std::make_unique<RouterKernel>(event, stream, seed, event.op == "moe_router_bwd");
}

}  // namespace evsim::cuda

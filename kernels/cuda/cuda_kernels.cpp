// CUDA ComputeKernel wrappers over the launchers of cuda_ops.h, and makeCudaKernel. Each wrapper
// owns device buffers in the event's dtype, fills them with random values, runs any forward pass
// its backward needs (saved statistics, masks), and synchronises before returning, so run() times
// exactly one event.
#include "kernels/cuda/cuda_kernels.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cuda/cuda_attention.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/cuda/cuda_llama_kernels.h"
#include "kernels/cuda/cuda_moe_kernels.h"
#include "kernels/event_shapes.h"
#include "kernels/memory_pass_bounds.h"

namespace evsim {

namespace {

using cuda::CudaKernelBase;
using cuda::DeviceBuffer;
using cuda::floatBytes;
namespace kp = kernel_params;

class SoftmaxKernel final : public CudaKernelBase {
 public:
  SoftmaxKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")) {
    x_ = randomBuffer(dtype_, rows_ * cols_, 0);
    y_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
    forward();  // the backward pass needs real probabilities as its input y
    if (backward_) {
      dy_ = randomBuffer(dtype_, rows_ * cols_, 1);
      dx_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
    }
    synchronize();
  }
  void run() override {
    if (backward_) {
      cuda::softmaxBackward(dtype_, y_.get(), dy_.get(), dx_.get(), rows_, cols_, kp::kSoftmaxScale,
                            stream_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    cuda::softmaxForward(dtype_, x_.get(), y_.get(), rows_, cols_, kp::kSoftmaxScale,
                         kp::SoftmaxMask::kCausal, stream_);
  }
  bool backward_;
  DType dtype_;
  int64_t rows_, cols_;
  DeviceBuffer x_, y_, dy_, dx_;
};

class LayerNormKernel final : public CudaKernelBase {
 public:
  LayerNormKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")) {
    x_ = randomBuffer(dtype_, rows_ * cols_, 0);
    gamma_ = randomBuffer(dtype_, cols_, 1, 0.5f, 1.5f);
    beta_ = randomBuffer(dtype_, cols_, 2);
    y_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
    mean_ = DeviceBuffer(floatBytes(rows_));
    rstd_ = DeviceBuffer(floatBytes(rows_));
    forward();  // backward reads the saved statistics
    if (backward_) {
      dy_ = randomBuffer(dtype_, rows_ * cols_, 3);
      dx_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
      dgamma_ = DeviceBuffer(cols_ * dtypeBytes(dtype_));
      dbeta_ = DeviceBuffer(cols_ * dtypeBytes(dtype_));
      workspace_ = DeviceBuffer(floatBytes(cuda::layerNormBackwardWorkspaceFloats(rows_, cols_)));
    }
    synchronize();
  }
  void run() override {
    if (backward_) {
      cuda::layerNormBackward(dtype_, x_.get(), dy_.get(), gamma_.get(), mean_.as<float>(),
                              rstd_.as<float>(), dx_.get(), dgamma_.get(), dbeta_.get(),
                              workspace_.as<float>(), rows_, cols_, stream_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    cuda::layerNormForward(dtype_, x_.get(), gamma_.get(), beta_.get(), y_.get(), mean_.as<float>(),
                           rstd_.as<float>(), rows_, cols_, kp::kLayerNormEpsilon, stream_);
  }
  bool backward_;
  DType dtype_;
  int64_t rows_, cols_;
  DeviceBuffer x_, gamma_, beta_, y_, mean_, rstd_, dy_, dx_, dgamma_, dbeta_, workspace_;
};

// gelu_fwd/bwd, dropout_fwd/bwd and add.
class ElementwiseKernel final : public CudaKernelBase {
 public:
  ElementwiseKernel(const Event& e, cudaStream_t s, uint64_t seed)
      : CudaKernelBase(s, seed), op_(e.op), dtype_(e.dtype), n_(e.dim("elems")) {
    a_ = randomBuffer(dtype_, n_, 0);
    b_ = randomBuffer(dtype_, n_, 1);
    out_ = DeviceBuffer(n_ * dtypeBytes(dtype_));
    if (op_.starts_with("dropout")) {
      mask_ = DeviceBuffer(n_);
      dropoutForward();  // dropout_bwd reuses the mask of a forward pass
    }
    synchronize();
  }
  void run() override {
    if (op_ == "gelu_fwd") {
      cuda::geluForward(dtype_, a_.get(), out_.get(), n_, stream_);
    } else if (op_ == "gelu_bwd") {
      cuda::geluBackward(dtype_, a_.get(), b_.get(), out_.get(), n_, stream_);
    } else if (op_ == "dropout_fwd") {
      dropoutForward();
    } else if (op_ == "dropout_bwd") {
      cuda::dropoutBackward(dtype_, b_.get(), mask_.as<uint8_t>(), out_.get(), n_,
                            kp::kDropoutProbability, stream_);
    } else {
      cuda::add(dtype_, a_.get(), b_.get(), out_.get(), n_, stream_);
    }
  }

 private:
  void dropoutForward() {
    cuda::dropoutForward(dtype_, a_.get(), out_.get(), mask_.as<uint8_t>(), n_,
                         kp::kDropoutProbability, seed_, stream_);
  }
  std::string op_;
  DType dtype_;
  int64_t n_;
  DeviceBuffer a_, b_, out_, mask_;
};

class EmbeddingKernel final : public CudaKernelBase {
 public:
  EmbeddingKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        tokens_(e.dim("tokens")),
        hidden_(e.dim("hidden")),
        vocab_(e.dim("vocab")) {
    ids_ = randomIndices(tokens_, vocab_, 0);
    activations_ = randomBuffer(dtype_, tokens_ * hidden_, 2);
    // Forward reads the table in dtype; backward accumulates into an fp32 gradient.
    table_ = randomBuffer(backward_ ? DType::kFp32 : dtype_, vocab_ * hidden_, 1);
    synchronize();
  }
  void run() override {
    if (backward_) {
      cuda::embeddingBackward(dtype_, ids_.as<int32_t>(), activations_.get(), table_.as<float>(),
                              tokens_, hidden_, stream_);
    } else {
      cuda::embeddingForward(dtype_, ids_.as<int32_t>(), table_.get(), activations_.get(), tokens_,
                             hidden_, stream_);
    }
  }

 private:
  bool backward_;
  DType dtype_;
  int64_t tokens_, hidden_, vocab_;
  DeviceBuffer ids_, activations_, table_;
};

class CrossEntropyKernel final : public CudaKernelBase {
 public:
  CrossEntropyKernel(const Event& e, cudaStream_t s, uint64_t seed, bool backward)
      : CudaKernelBase(s, seed),
        backward_(backward),
        dtype_(e.dtype),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")) {
    logits_ = randomBuffer(dtype_, rows_ * cols_, 0, -4.0f, 4.0f);
    targets_ = randomIndices(rows_, cols_, 1);
    loss_ = DeviceBuffer(floatBytes(rows_));
    lse_ = DeviceBuffer(floatBytes(rows_));
    forward();  // backward reads the saved log-sum-exp
    if (backward_) {
      dloss_ = randomBuffer(DType::kFp32, rows_, 2, 0.5f, 1.5f);
      dlogits_ = DeviceBuffer(rows_ * cols_ * dtypeBytes(dtype_));
    }
    synchronize();
  }
  void run() override {
    if (backward_) {
      cuda::crossEntropyBackward(dtype_, logits_.get(), targets_.as<int32_t>(), lse_.as<float>(),
                                 dloss_.as<float>(), dlogits_.get(), rows_, cols_, stream_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    cuda::crossEntropyForward(dtype_, logits_.get(), targets_.as<int32_t>(), loss_.as<float>(),
                              lse_.as<float>(), rows_, cols_, stream_);
  }
  bool backward_;
  DType dtype_;
  int64_t rows_, cols_;
  DeviceBuffer logits_, targets_, loss_, lse_, dloss_, dlogits_;
};

class AdamKernel final : public CudaKernelBase {
 public:
  AdamKernel(const Event& e, cudaStream_t s, uint64_t seed)
      : CudaKernelBase(s, seed), n_(e.dim("params")) {
    weights_ = randomBuffer(DType::kFp32, n_, 0);
    grads_ = randomBuffer(DType::kFp32, n_, 1);
    m_ = randomBuffer(DType::kFp32, n_, 2, -0.01f, 0.01f);
    v_ = randomBuffer(DType::kFp32, n_, 3, 1e-6f, 1e-4f);  // second moments are positive
    synchronize();
  }
  void run() override {
    cuda::adamStep(weights_.as<float>(), grads_.as<float>(), m_.as<float>(), v_.as<float>(), n_,
                   ++step_, kp::AdamHyper{}, stream_);
  }

 private:
  int64_t n_;
  int64_t step_ = 0;
  DeviceBuffer weights_, grads_, m_, v_;
};

// Pinned host memory, so that copies to and from it run on a copy engine at the link's rate.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(int64_t bytes) {
    EVSIM_CUDA_CHECK(cudaMallocHost(&ptr_, static_cast<size_t>(std::max<int64_t>(bytes, 1))));
  }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }  // teardown: nothing useful to do with an error
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// An offload copy over the host link: device to pinned host memory (offload_d2h) or back
// (offload_h2d). No kernel runs it (a DMA engine does): CudaDevice times it with CUDA events.
class HostCopyKernel final : public CudaKernelBase {
 public:
  HostCopyKernel(const Event& e, cudaStream_t s, uint64_t seed)
      : CudaKernelBase(s, seed),
        to_host_(e.op == "offload_d2h"),
        bytes_(e.memory_bytes),
        device_(randomBuffer(DType::kFp32, bytes_ / 4 + 1, 0)),
        host_(bytes_) {
    synchronize();
  }
  void run() override {
    const auto kind = to_host_ ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    void* to = to_host_ ? host_.get() : device_.get();
    const void* from = to_host_ ? device_.get() : host_.get();
    EVSIM_CUDA_CHECK(cudaMemcpyAsync(to, from, static_cast<size_t>(bytes_), kind, stream_));
  }

 private:
  bool to_host_;
  int64_t bytes_;
  DeviceBuffer device_;
  PinnedBuffer host_;
};

// A memory_pass: the bytes it reads and writes moved once each by a stand-in kernel
// (cuda::memoryPass), as the CPU backend does, so that the plans that hold them (FSDP's eager
// kernels and copies, Megatron CP's ring copies) can be profiled on a GPU. Its buffers are bounded
// (kernels/memory_pass_bounds.h): a larger event runs as several launches over them, which
// together read read_bytes and write write_bytes.
class MemoryPassKernel final : public CudaKernelBase {
 public:
  MemoryPassKernel(const Event& e, cudaStream_t s, uint64_t seed)
      : CudaKernelBase(s, seed),
        read_words_(e.dim("read_bytes") / 4),
        write_words_(std::max<int64_t>(1, e.dim("write_bytes") / 4)),
        launches_(memoryPassLaunches(read_words_, write_words_)),
        in_(randomBuffer(DType::kFp32, std::max<int64_t>(1, memoryPassBufferWords(read_words_)),
                         0)),
        out_(memoryPassBufferWords(write_words_) * 4) {
    synchronize();
  }
  void run() override {
    for (const MemoryPassLaunch& l : launches_) {
      cuda::memoryPass(in_.as<float>(), l.read_words, out_.as<float>(), l.write_words, stream_);
    }
  }

 private:
  int64_t read_words_, write_words_;
  std::vector<MemoryPassLaunch> launches_;
  DeviceBuffer in_, out_;
};

}  // namespace

// One case per op family of events/compute_op_rules.cpp's op table (computeOpKind).
std::unique_ptr<ComputeKernel> makeCudaKernel(const Event& event, void* cuda_stream,
                                              uint64_t seed) {
  const ComputeOpKind kind = computeOpKind(event, "CUDA");
  checkKernelDType(event, kind, "CUDA");
  auto stream = static_cast<cudaStream_t>(cuda_stream);
  switch (kind.family) {
    case OpFamily::kGemm:
      return cuda::makeCudaGemmKernel(event, stream, seed);
    case OpFamily::kSoftmax:
      return std::make_unique<SoftmaxKernel>(event, stream, seed, kind.backward);
    case OpFamily::kLayerNorm:
      return std::make_unique<LayerNormKernel>(event, stream, seed, kind.backward);
    case OpFamily::kElementwise:
      return std::make_unique<ElementwiseKernel>(event, stream, seed);
    case OpFamily::kEmbedding:
      return std::make_unique<EmbeddingKernel>(event, stream, seed, kind.backward);
    case OpFamily::kCrossEntropy:
      return std::make_unique<CrossEntropyKernel>(event, stream, seed, kind.backward);
    case OpFamily::kAdam:
      return std::make_unique<AdamKernel>(event, stream, seed);
    case OpFamily::kRmsNorm:
      return cuda::makeCudaRmsNormKernel(event, stream, seed, kind.backward);
    case OpFamily::kSwiGlu:
      return cuda::makeCudaSwiGluKernel(event, stream, seed, kind.backward);
    case OpFamily::kRope:
      return cuda::makeCudaRopeKernel(event, stream, seed, kind.backward);
    case OpFamily::kAttention:
      return cuda::makeCudaAttentionKernel(event, stream, seed, kind.backward);
    case OpFamily::kFp8Cast:
      // The casts of FP8 training have no kernel here yet: the device model times them.
      EVSIM_THROW(InputError, "'{}': no CUDA kernel for FP8 casts (fp8_quantize, amax) yet",
                  event.signature());
    case OpFamily::kMemoryPass:
      return std::make_unique<MemoryPassKernel>(event, stream, seed);
    case OpFamily::kMoeRouting:
      return cuda::makeCudaMoeKernel(event, stream, seed);
    case OpFamily::kHostCopy:
      return std::make_unique<HostCopyKernel>(event, stream, seed);
    case OpFamily::kHostAdam:  // runs on the host CPU, as in training: the CPU kernel
      return makeCpuKernel(event, seed);
  }
  EVSIM_THROW(Error, "op family {} has no CUDA kernel", static_cast<int>(kind.family));
}

int cudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // reset the (non-sticky) last-error state for later calls
    return 0;
  }
  return count;
}

}  // namespace evsim

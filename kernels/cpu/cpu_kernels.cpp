// ComputeKernel wrappers over the pure functions of cpu_ops.h, and makeCpuKernel. Each wrapper
// owns float32 buffers sized from the event's dims, filled with random values at construction,
// and calls one function per run().
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/cpu_llama_kernels.h"
#include "kernels/cpu/cpu_moe_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_random.h"
#include "kernels/event_shapes.h"
#include "kernels/kernel.h"
#include "kernels/memory_pass_bounds.h"

namespace evsim {

namespace {

using cpu::Floats;
using cpu::Ints;
using cpu::randomFloats;
using cpu::randomIndices;
namespace kp = kernel_params;

// A GEMM event's `sm_margin` (the SMs a TE userbuffers reduce-scatter keeps,
// ops/layer_tp_overlap_ops.cpp) has no CPU counterpart: the CPU backend runs the chunk on every
// core it has, a stand-in only.
class GemmKernel final : public ComputeKernel {
 public:
  GemmKernel(const Event& e, uint64_t seed)
      : layout_(e.layout),
        batch_(e.hasDim("batch") ? e.dim("batch") : 1),
        m_(e.dim("m")),
        n_(e.dim("n")),
        k_(e.dim("k")),
        a_(randomFloats(batch_ * m_ * k_, seed, 0)),
        b_(randomFloats(batch_ * k_ * n_, seed, 1)),
        c_(randomFloats(batch_ * m_ * n_, seed, 2)) {
    kp::parseGemmLayout(layout_);  // fail at construction, not at the first timed run
  }
  void run() override {
    cpu::batchedGemm(layout_, batch_, m_, n_, k_, a_.data(), b_.data(), c_.data());
  }

 private:
  std::string layout_;
  int64_t batch_, m_, n_, k_;
  Floats a_, b_, c_;
};

class SoftmaxKernel final : public ComputeKernel {
 public:
  SoftmaxKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")),
        x_(randomFloats(rows_ * cols_, seed, 0)),
        y_(x_.size()),
        dy_(randomFloats(rows_ * cols_, seed, 1)),
        dx_(x_.size()) {
    // The backward pass needs real probabilities (with the mask's zeros) as its input y.
    cpu::softmaxForward(x_.data(), y_.data(), rows_, cols_, kp::kSoftmaxScale,
                        kp::SoftmaxMask::kCausal);
  }
  void run() override {
    if (backward_) {
      cpu::softmaxBackward(y_.data(), dy_.data(), dx_.data(), rows_, cols_, kp::kSoftmaxScale);
    } else {
      cpu::softmaxForward(x_.data(), y_.data(), rows_, cols_, kp::kSoftmaxScale,
                          kp::SoftmaxMask::kCausal);
    }
  }

 private:
  bool backward_;
  int64_t rows_, cols_;
  Floats x_, y_, dy_, dx_;
};

class LayerNormKernel final : public ComputeKernel {
 public:
  LayerNormKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")),
        x_(randomFloats(rows_ * cols_, seed, 0)),
        gamma_(randomFloats(cols_, seed, 1, 0.5f, 1.5f)),
        beta_(randomFloats(cols_, seed, 2)),
        y_(x_.size()),
        mean_(rows_),
        rstd_(rows_),
        dy_(randomFloats(rows_ * cols_, seed, 3)),
        dx_(x_.size()),
        dgamma_(cols_),
        dbeta_(cols_) {
    forward();  // backward reads the saved statistics
  }
  void run() override {
    if (backward_) {
      cpu::layerNormBackward(x_.data(), dy_.data(), gamma_.data(), mean_.data(), rstd_.data(),
                             dx_.data(), dgamma_.data(), dbeta_.data(), rows_, cols_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    cpu::layerNormForward(x_.data(), gamma_.data(), beta_.data(), y_.data(), mean_.data(),
                          rstd_.data(), rows_, cols_, kp::kLayerNormEpsilon);
  }
  bool backward_;
  int64_t rows_, cols_;
  Floats x_, gamma_, beta_, y_, mean_, rstd_, dy_, dx_, dgamma_, dbeta_;
};

// gelu_fwd/bwd, dropout_fwd/bwd and add: n elements, two inputs, one output.
class ElementwiseKernel final : public ComputeKernel {
 public:
  ElementwiseKernel(const Event& e, uint64_t seed)
      : op_(e.op),
        n_(e.dim("elems")),
        seed_(seed),
        a_(randomFloats(n_, seed, 0)),
        b_(randomFloats(n_, seed, 1)),
        out_(n_) {
    if (op_.starts_with("dropout")) {
      // dropout_bwd reuses the mask of a forward pass.
      mask_.resize(static_cast<size_t>(n_));
      cpu::dropoutForward(a_.data(), out_.data(), mask_.data(), n_, kp::kDropoutProbability, seed_);
    }
  }
  void run() override {
    if (op_ == "gelu_fwd") {
      cpu::geluForward(a_.data(), out_.data(), n_);
    } else if (op_ == "gelu_bwd") {
      cpu::geluBackward(a_.data(), b_.data(), out_.data(), n_);
    } else if (op_ == "dropout_fwd") {
      // A fresh mask per call, as training draws one per step.
      cpu::dropoutForward(a_.data(), out_.data(), mask_.data(), n_, kp::kDropoutProbability,
                          seed_ + ++calls_);
    } else if (op_ == "dropout_bwd") {
      cpu::dropoutBackward(b_.data(), mask_.data(), out_.data(), n_, kp::kDropoutProbability);
    } else {
      cpu::add(a_.data(), b_.data(), out_.data(), n_);
    }
  }

 private:
  std::string op_;
  int64_t n_;
  uint64_t seed_;
  uint64_t calls_ = 0;
  Floats a_, b_, out_;
  std::vector<uint8_t> mask_;
};

class EmbeddingKernel final : public ComputeKernel {
 public:
  EmbeddingKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        tokens_(e.dim("tokens")),
        hidden_(e.dim("hidden")),
        ids_(randomIndices(tokens_, e.dim("vocab"), seed, 0)),
        table_(randomFloats(e.dim("vocab") * hidden_, seed, 1)),
        activations_(randomFloats(tokens_ * hidden_, seed, 2)) {}
  void run() override {
    // Forward: table -> activations. Backward: activation gradients scatter-add into the table's
    // gradient, which plays the role of table_ (accumulating like Megatron's main_grad).
    if (backward_) {
      cpu::embeddingBackward(ids_.data(), activations_.data(), table_.data(), tokens_, hidden_);
    } else {
      cpu::embeddingForward(ids_.data(), table_.data(), activations_.data(), tokens_, hidden_);
    }
  }

 private:
  bool backward_;
  int64_t tokens_, hidden_;
  Ints ids_;
  Floats table_, activations_;
};

class CrossEntropyKernel final : public ComputeKernel {
 public:
  CrossEntropyKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")),
        logits_(randomFloats(rows_ * cols_, seed, 0, -4.0f, 4.0f)),
        targets_(randomIndices(rows_, cols_, seed, 1)),
        loss_(rows_),
        lse_(rows_),
        dloss_(randomFloats(rows_, seed, 2, 0.5f, 1.5f)),
        dlogits_(backward ? logits_.size() : 0) {
    forward();  // backward reads the saved log-sum-exp
  }
  void run() override {
    if (backward_) {
      cpu::crossEntropyBackward(logits_.data(), targets_.data(), lse_.data(), dloss_.data(),
                                dlogits_.data(), rows_, cols_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    cpu::crossEntropyForward(logits_.data(), targets_.data(), loss_.data(), lse_.data(), rows_,
                             cols_);
  }
  bool backward_;
  int64_t rows_, cols_;
  Floats logits_;
  Ints targets_;
  Floats loss_, lse_, dloss_, dlogits_;
};

class AdamKernel final : public ComputeKernel {
 public:
  AdamKernel(const Event& e, uint64_t seed)
      : n_(e.dim("params")),
        weights_(randomFloats(n_, seed, 0)),
        grads_(randomFloats(n_, seed, 1)),
        m_(randomFloats(n_, seed, 2, -0.01f, 0.01f)),
        v_(randomFloats(n_, seed, 3, 1e-6f, 1e-4f)) {}  // second moments are positive
  void run() override {
    cpu::adamStep(weights_.data(), grads_.data(), m_.data(), v_.data(), n_, ++step_, {});
  }

 private:
  int64_t n_;
  int64_t step_ = 0;
  Floats weights_, grads_, m_, v_;
};

// An offload copy. A CPU has no host link: this copies between two buffers of host memory, the
// closest stand-in (its time is a memory copy's, not a PCIe transfer's).
class HostCopyKernel final : public ComputeKernel {
 public:
  HostCopyKernel(const Event& e, uint64_t seed)
      : bytes_(static_cast<size_t>(e.memory_bytes)),
        from_(randomFloats(static_cast<int64_t>(bytes_ / sizeof(float)) + 1, seed, 0)),
        to_(from_.size()) {}
  void run() override { std::memcpy(to_.data(), from_.data(), bytes_); }

 private:
  size_t bytes_;
  Floats from_, to_;
};

// A memory_pass (an eager pointwise kernel, a copy, TE's ring-attention merges): known by its
// bytes alone, so a stand-in that reads read_bytes and writes write_bytes once each (fp32 words):
// the input folded onto the output, a fill when nothing is read. Its buffers are bounded
// (kernels/memory_pass_bounds.h) and gone round again, so a large event moves its bytes without
// holding them all.
class MemoryPassKernel final : public ComputeKernel {
 public:
  MemoryPassKernel(const Event& e, uint64_t seed)
      : read_words_(e.dim("read_bytes") / 4),
        write_words_(std::max<int64_t>(1, e.dim("write_bytes") / 4)),
        in_(randomFloats(memoryPassBufferWords(read_words_), seed, 0)),
        out_(static_cast<size_t>(memoryPassBufferWords(write_words_))) {}
  void run() override {
    cpu::memoryPass(in_.data(), static_cast<int64_t>(in_.size()), read_words_, out_.data(),
                    static_cast<int64_t>(out_.size()), write_words_);
  }

 private:
  int64_t read_words_, write_words_;
  Floats in_, out_;
};

}  // namespace

// One case per op family of events/compute_op_rules.cpp's op table (computeOpKind).
std::unique_ptr<ComputeKernel> makeCpuKernel(const Event& event, uint64_t seed) {
  const ComputeOpKind kind = computeOpKind(event, "CPU");
  checkKernelDType(event, kind, "CPU");
  switch (kind.family) {
    case OpFamily::kGemm:
      return std::make_unique<GemmKernel>(event, seed);
    case OpFamily::kSoftmax:
      return std::make_unique<SoftmaxKernel>(event, seed, kind.backward);
    case OpFamily::kLayerNorm:
      return std::make_unique<LayerNormKernel>(event, seed, kind.backward);
    case OpFamily::kElementwise:
      return std::make_unique<ElementwiseKernel>(event, seed);
    case OpFamily::kEmbedding:
      return std::make_unique<EmbeddingKernel>(event, seed, kind.backward);
    case OpFamily::kCrossEntropy:
      return std::make_unique<CrossEntropyKernel>(event, seed, kind.backward);
    case OpFamily::kAdam:
    case OpFamily::kHostAdam:  // the CPU's own Adam either way
      return std::make_unique<AdamKernel>(event, seed);
    case OpFamily::kHostCopy:
      return std::make_unique<HostCopyKernel>(event, seed);
    case OpFamily::kRmsNorm:
      return cpu::makeRmsNormKernel(event, seed, kind.backward);
    case OpFamily::kSwiGlu:
      return cpu::makeSwiGluKernel(event, seed, kind.backward);
    case OpFamily::kRope:
      return cpu::makeRopeKernel(event, seed, kind.backward);
    case OpFamily::kAttention:
      return cpu::makeAttentionKernel(event, seed, kind.backward);
    case OpFamily::kFp8Cast:
      // The casts of FP8 training have no kernel here yet: the device model times them.
      EVSIM_THROW(InputError, "'{}': no CPU kernel for FP8 casts (fp8_quantize, amax) yet",
                  event.signature());
    case OpFamily::kMemoryPass:
      return std::make_unique<MemoryPassKernel>(event, seed);
    case OpFamily::kMoeRouting:
      return cpu::makeMoeKernel(event, seed);
  }
  EVSIM_THROW(Error, "op family {} has no CPU kernel", static_cast<int>(kind.family));
}

}  // namespace evsim

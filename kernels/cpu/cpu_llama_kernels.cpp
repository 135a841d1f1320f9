#include "kernels/cpu/cpu_llama_kernels.h"

#include <algorithm>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_random.h"
#include "kernels/event_shapes.h"

namespace evsim::cpu {

namespace {

namespace kp = kernel_params;

class RmsNormKernel final : public ComputeKernel {
 public:
  RmsNormKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        rows_(e.dim("rows")),
        cols_(e.dim("cols")),
        x_(randomFloats(rows_ * cols_, seed, 0)),
        gamma_(randomFloats(cols_, seed, 1, 0.5f, 1.5f)),
        y_(x_.size()),
        rstd_(rows_),
        dy_(backward ? randomFloats(rows_ * cols_, seed, 3) : Floats()),
        dx_(backward ? x_.size() : 0),
        dgamma_(backward ? cols_ : 0) {
    forward();  // backward reads the saved rstd
  }
  void run() override {
    if (backward_) {
      rmsNormBackward(x_.data(), dy_.data(), gamma_.data(), rstd_.data(), dx_.data(),
                      dgamma_.data(), rows_, cols_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    rmsNormForward(x_.data(), gamma_.data(), y_.data(), rstd_.data(), rows_, cols_,
                   kp::kRmsNormEpsilon);
  }
  bool backward_;
  int64_t rows_, cols_;
  Floats x_, gamma_, y_, rstd_, dy_, dx_, dgamma_;
};

// The event counts outputs only, so the fc1 output is one row [gate | up] of 2 * elems: the same
// bytes as Megatron's [tokens, 2 * ffn] rows, without a row length the event does not carry.
class SwiGluKernel final : public ComputeKernel {
 public:
  SwiGluKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        n_(e.dim("elems")),
        x_(randomFloats(2 * n_, seed, 0, -4.0f, 4.0f)),
        out_(backward ? 2 * n_ : n_),
        dy_(backward ? randomFloats(n_, seed, 1) : Floats()) {}
  void run() override {
    if (backward_) {
      swigluBackward(x_.data(), dy_.data(), out_.data(), 1, n_);
    } else {
      swigluForward(x_.data(), out_.data(), 1, n_);
    }
  }

 private:
  bool backward_;
  int64_t n_;
  Floats x_, out_, dy_;
};

// In place on one [tokens, heads, dim] buffer, as the op table says (a rotation keeps the values
// bounded however often it runs).
class RopeKernel final : public ComputeKernel {
 public:
  RopeKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        tokens_(e.dim("tokens")),
        heads_(e.dim("heads")),
        dim_(e.dim("dim")),
        positions_(std::min<int64_t>(tokens_, kp::kRopePositions)) {
    checkRopeDim(e);
    x_ = randomFloats(tokens_ * heads_ * dim_, seed, 0);
    cos_.resize(static_cast<size_t>(positions_ * dim_ / 2));
    sin_.resize(cos_.size());
    ropeTables(positions_, dim_, kp::kRopeTheta, cos_.data(), sin_.data());
  }
  void run() override {
    if (backward_) {
      ropeBackward(x_.data(), x_.data(), cos_.data(), sin_.data(), tokens_, heads_, dim_,
                   positions_);
    } else {
      ropeForward(x_.data(), x_.data(), cos_.data(), sin_.data(), tokens_, heads_, dim_,
                  positions_);
    }
  }

 private:
  bool backward_;
  int64_t tokens_, heads_, dim_, positions_;
  Floats x_, cos_, sin_;
};

class AttentionKernel final : public ComputeKernel {
 public:
  AttentionKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward), shape_(attentionShape(e)) {
    const int64_t q_size = shape_.batch * shape_.seq * shape_.dim;
    const int64_t kv_size = shape_.groups * shape_.seq * shape_.dim;
    q_ = randomFloats(q_size, seed, 0);
    k_ = randomFloats(kv_size, seed, 1);
    v_ = randomFloats(kv_size, seed, 2);
    o_.resize(q_size);
    lse_.resize(shape_.batch * shape_.seq);
    workspace_.resize(attentionWorkspaceFloats(shape_, kp::kAttentionBlockRows));
    forward();  // backward reads O and the log-sum-exp of a real forward pass
    if (backward_) {
      dout_ = randomFloats(q_size, seed, 3);
      dq_.resize(q_size);
      dk_.resize(kv_size);
      dv_.resize(kv_size);
    }
  }
  void run() override {
    if (backward_) {
      attentionBackward(shape_, kp::kAttentionBlockRows, q_.data(), k_.data(), v_.data(), o_.data(),
                        dout_.data(), lse_.data(), dq_.data(), dk_.data(), dv_.data(),
                        workspace_.data());
    } else {
      forward();
    }
  }

 private:
  void forward() {
    attentionForward(shape_, kp::kAttentionBlockRows, q_.data(), k_.data(), v_.data(), o_.data(),
                     lse_.data(), workspace_.data());
  }
  bool backward_;
  kp::AttentionShape shape_;
  Floats q_, k_, v_, o_, lse_, workspace_, dout_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<ComputeKernel> makeRmsNormKernel(const Event& event, uint64_t seed, bool backward) {
  return std::make_unique<RmsNormKernel>(event, seed, backward);
}

std::unique_ptr<ComputeKernel> makeSwiGluKernel(const Event& event, uint64_t seed, bool backward) {
  return std::make_unique<SwiGluKernel>(event, seed, backward);
}

std::unique_ptr<ComputeKernel> makeRopeKernel(const Event& event, uint64_t seed, bool backward) {
  return std::make_unique<RopeKernel>(event, seed, backward);
}

std::unique_ptr<ComputeKernel> makeAttentionKernel(const Event& event, uint64_t seed,
                                                   bool backward) {
  return std::make_unique<AttentionKernel>(event, seed, backward);
}

}  // namespace evsim::cpu

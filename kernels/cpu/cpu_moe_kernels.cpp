#include "kernels/cpu/cpu_moe_kernels.h"

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_random.h"
#include "kernels/event_shapes.h"

namespace evsim::cpu {

namespace {

class RouterKernel final : public ComputeKernel {
 public:
  RouterKernel(const Event& e, uint64_t seed, bool backward)
      : backward_(backward),
        tokens_(e.dim("tokens")),
        experts_(e.dim("experts")),
        topk_(e.dim("topk")),
        logits_(randomFloats(tokens_ * experts_, seed, 0, -4.0f, 4.0f)),
        probs_(logits_.size()),
        index_(static_cast<size_t>(tokens_ * topk_)),
        top_(index_.size()),
        dprobs_(backward ? randomFloats(tokens_ * experts_, seed, 1) : Floats()),
        dlogits_(backward ? logits_.size() : 0) {
    forward();  // the backward reads the probabilities
  }
  void run() override {
    if (backward_) {
      moeRouterBackward(probs_.data(), dprobs_.data(), dlogits_.data(), tokens_, experts_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    moeRouterForward(logits_.data(), probs_.data(), index_.data(), top_.data(), tokens_, experts_,
                     topk_);
  }
  bool backward_;
  int64_t tokens_, experts_, topk_;
  Floats logits_, probs_;
  Ints index_;
  Floats top_, dprobs_, dlogits_;
};

class PermuteKernel final : public ComputeKernel {
 public:
  PermuteKernel(const Event& e, uint64_t seed)
      : rows_(e.dim("rows")),
        hidden_(e.dim("hidden")),
        x_(randomFloats(rows_ * hidden_, seed, 0)),
        source_(randomIndices(rows_, rows_, seed, 1)),
        y_(x_.size()) {}
  void run() override { moePermute(x_.data(), source_.data(), y_.data(), rows_, hidden_); }

 private:
  int64_t rows_, hidden_;
  Floats x_;
  Ints source_;
  Floats y_;
};

class UnpermuteKernel final : public ComputeKernel {
 public:
  UnpermuteKernel(const Event& e, uint64_t seed)
      : rows_(e.dim("rows")),
        hidden_(e.dim("hidden")),
        topk_(e.dim("topk")),
        y_(randomFloats(rows_ * hidden_, seed, 0)),
        weight_(randomFloats(rows_, seed, 1, 0.0f, 1.0f)),
        x_(static_cast<size_t>(rows_ / topk_ * hidden_)) {}
  void run() override { moeUnpermute(y_.data(), weight_.data(), x_.data(), rows_, hidden_, topk_); }

 private:
  int64_t rows_, hidden_, topk_;
  Floats y_, weight_, x_;
};

}  // namespace

std::unique_ptr<ComputeKernel> makeMoeKernel(const Event& event, uint64_t seed) {
  checkMoeShape(event);
  if (event.op == "moe_permute") return std::make_unique<PermuteKernel>(event, seed);
  if (event.op == "moe_unpermute") return std::make_unique<UnpermuteKernel>(event, seed);
  return std::make_unique<RouterKernel>(event, seed, event.op == "moe_router_bwd");
}

}  // namespace evsim::cpu

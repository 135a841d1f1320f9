#pragma once
// Fixed hyper-parameters of the compute events, shared by the CPU and CUDA backends so both run
// the same work. Their values barely change timings; they are the usual Megatron-LM defaults.
// No CUDA and no fmt include: nvcc compiles this header too (fmt 9 does not build under nvcc).

#include <string_view>

namespace evsim::kernel_params {

// Dropout probability of the hidden and attention dropouts (GPT/BERT default).
inline constexpr float kDropoutProbability = 0.1f;
// LayerNorm epsilon (Megatron's default layernorm_epsilon).
inline constexpr float kLayerNormEpsilon = 1e-5f;
// softmax_fwd scales the attention scores by 1/sqrt(head_dim); head_dim 64 is typical.
inline constexpr float kSoftmaxScale = 0.125f;

// AdamW as Megatron configures it (lr only sets the step size; timings do not depend on it).
struct AdamHyper {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // decoupled (AdamW)
};

// Which attention mask softmax_fwd applies. Events do not say; GPT-style causal masking is what
// the profiled models use, so the event kernels run kCausal.
enum class SoftmaxMask { kNone, kCausal };

// Row-major GEMM operand storage. Layout letters name A then B: "n" = stored as used
// (A[m,k], B[k,n]), "t" = stored transposed (A[k,m], B[n,k]). "nt": C[m,n] = A[m,k] * B[n,k]^T.
struct GemmLayout {
  bool trans_a = false;
  bool trans_b = false;
};

// Throws InputError for anything but nn, nt, tn, tt (defined in kernel_params.cpp).
GemmLayout parseGemmLayout(std::string_view layout);

}  // namespace evsim::kernel_params

#pragma once
// Fixed hyper-parameters of the compute events, shared by the CPU and CUDA backends so both run
// the same work. Their values barely change timings; they are the usual Megatron-LM defaults.
// No CUDA and no fmt include: nvcc compiles this header too (fmt 9 does not build under nvcc).

#include <cstdint>
#include <string_view>

namespace evsim::kernel_params {

// Dropout probability of the hidden and attention dropouts (GPT/BERT default).
inline constexpr float kDropoutProbability = 0.1f;
// LayerNorm epsilon (Megatron's default layernorm_epsilon).
inline constexpr float kLayerNormEpsilon = 1e-5f;
// softmax_fwd scales the attention scores by 1/sqrt(head_dim); head_dim 64 is typical.
inline constexpr float kSoftmaxScale = 0.125f;
// RMSNorm epsilon: Megatron uses its one norm_epsilon (1e-5) for both LayerNorm and RMSNorm.
inline constexpr float kRmsNormEpsilon = 1e-5f;

// RoPE: channel pair i of a head rotates by pos * kRopeTheta^(-2i/dim) (Llama, Megatron's
// rotary_base). A rope event does not say how its tokens split into sequences, so token t sits at
// position t % kRopePositions (Llama 2's context length); the positions only pick angles, which do
// not change the work.
inline constexpr float kRopeTheta = 10000.0f;
inline constexpr int kRopePositions = 4096;

// Fused attention: query rows per tile. Scores live one tile of rows at a time, [rows x seq] per
// head, never [seq x seq]; 128 is FlashAttention-2's forward block height.
inline constexpr int kAttentionBlockRows = 128;

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

// Shape of a flash_attn event, and the layout both backends use for it: row-major, head-major
// ([batch, heads, seq, dim] with batch and heads folded into one index, as Megatron's unfused
// attention's [b * np, sq, hn]; FlashAttention's API strides the same bytes as [batch, seq, heads,
// dim], which changes the access pattern, not the traffic):
//   Q, O, dQ, dO [batch][seq][dim]   K, V, dK, dV [groups][seq][dim]   lse [batch][seq] (fp32)
// Query head h reads key/value head h / (batch / groups) (grouped-query attention). Scores are
// scaled by 1/sqrt(dim); causal masks key j > query i.
struct AttentionShape {
  int64_t batch = 1;   // query heads (micro-batch x heads on this rank)
  int64_t groups = 1;  // key/value heads; divides batch
  int64_t seq = 1;
  int64_t dim = 1;
  bool causal = false;
  int64_t headsPerGroup() const { return batch / groups; }
};

}  // namespace evsim::kernel_params

#pragma once
// Launchers of the own CUDA kernels (the .cu files), type-erased: pointers are void* holding the
// element type `dtype` (fp16 = __half, bf16 = __nv_bfloat16, fp32 = float) unless a parameter says
// float or int32_t. fp8 is for GEMM operands only: fillUniform writes it; every other launcher
// throws InputError for it. Every launcher only enqueues work on `stream` and checks the launch;
// all math accumulates in float. Semantics match the CPU functions of kernels/cpu/cpu_ops.h, which
// are the reference the GPU tests compare against.
//
// Host-only header without fmt, so both the C++ wrappers and the .cu files include it.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "events/dtype.h"
#include "kernels/kernel_params.h"

namespace evsim::cuda {

// ---- fills (fill.cu) ----
// p[i] = uniform in [lo, hi) from rng::uniformAt(seed, i), converted to dtype (fp8: E4M3).
void fillUniform(DType dtype, void* p, int64_t n, uint64_t seed, float lo, float hi,
                 cudaStream_t stream);
// p[i] = rng::indexAt(seed, i, bound), in [0, bound).
void fillIndices(int32_t* p, int64_t n, int64_t bound, uint64_t seed, cudaStream_t stream);

// ---- timing (hold.cu) ----
// One thread that spins until *release (host-mapped memory) becomes non-zero, or until timeout_s
// passes, when it sets *timed_out (host-mapped) to 1. Work enqueued behind it starts together.
void holdStream(const volatile int* release, double timeout_s, int* timed_out, cudaStream_t stream);

// ---- row-wise (norm_softmax.cu) ----
void softmaxForward(DType dtype, const void* x, void* y, int64_t rows, int64_t cols, float scale,
                    kernel_params::SoftmaxMask mask, cudaStream_t stream);
void softmaxBackward(DType dtype, const void* y, const void* dy, void* dx, int64_t rows,
                     int64_t cols, float scale, cudaStream_t stream);
// gamma, beta, y in dtype; mean and rstd float[rows].
void layerNormForward(DType dtype, const void* x, const void* gamma, const void* beta, void* y,
                      float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                      cudaStream_t stream);
// Floats of scratch layerNormBackward needs for its column reductions of dgamma and dbeta.
int64_t layerNormBackwardWorkspaceFloats(int64_t rows, int64_t cols);
void layerNormBackward(DType dtype, const void* x, const void* dy, const void* gamma,
                       const float* mean, const float* rstd, void* dx, void* dgamma, void* dbeta,
                       float* workspace, int64_t rows, int64_t cols, cudaStream_t stream);

// ---- RMSNorm (rmsnorm.cu) ----
// gamma, y in dtype; rstd float[rows].
void rmsNormForward(DType dtype, const void* x, const void* gamma, void* y, float* rstd,
                    int64_t rows, int64_t cols, float eps, cudaStream_t stream);
// Floats of scratch rmsNormBackward needs for the column reduction of dgamma.
int64_t rmsNormBackwardWorkspaceFloats(int64_t rows, int64_t cols);
void rmsNormBackward(DType dtype, const void* x, const void* dy, const void* gamma,
                     const float* rstd, void* dx, void* dgamma, float* workspace, int64_t rows,
                     int64_t cols, cudaStream_t stream);

// ---- SwiGLU and RoPE (swiglu.cu, rope.cu) ----
// x rows of [gate | up] (2 * cols), y rows of cols; dx in x's layout.
void swigluForward(DType dtype, const void* x, void* y, int64_t rows, int64_t cols,
                   cudaStream_t stream);
void swigluBackward(DType dtype, const void* x, const void* dy, void* dx, int64_t rows,
                    int64_t cols, cudaStream_t stream);
// x, y [tokens][heads][dim] (y may be x); cos, sin float [positions][dim/2] (cpu::ropeTables).
void ropeForward(DType dtype, const void* x, void* y, const float* cos, const float* sin,
                 int64_t tokens, int64_t heads, int64_t dim, int64_t positions,
                 cudaStream_t stream);
void ropeBackward(DType dtype, const void* dy, void* dx, const float* cos, const float* sin,
                  int64_t tokens, int64_t heads, int64_t dim, int64_t positions,
                  cudaStream_t stream);

// ---- mixture-of-experts routing (moe.cu), as kernels/cpu/cpu_ops.h's moe* functions ----
// logits [tokens][experts] in dtype; probs fp32; top-k indices and probabilities per token.
void moeRouterForward(DType dtype, const void* logits, float* probs, int32_t* topk_index,
                      float* topk_prob, int64_t tokens, int64_t experts, int64_t topk,
                      cudaStream_t stream);
void moeRouterBackward(const float* probs, const float* dprobs, float* dlogits, int64_t tokens,
                       int64_t experts, cudaStream_t stream);
void moePermute(DType dtype, const void* x, const int32_t* source, void* y, int64_t rows,
                int64_t hidden, cudaStream_t stream);
void moeUnpermute(DType dtype, const void* y, const float* weight, void* x, int64_t rows,
                  int64_t hidden, int64_t topk, cudaStream_t stream);

// ---- fused attention, row-wise pieces (attention.cu; cuda_attention.cpp adds the GEMMs) ----
// A tile holds query rows [first, first + rows) of each of `batch` heads against their first
// `keys` keys: fp32 scores [batch][rows][keys] (already scaled). Row i sees all keys, or with
// `causal` keys j <= first + i.
// probs (dtype, same layout) = the rows' softmax, masked entries 0; lse[h * seq + first + i].
void attentionSoftmax(DType dtype, const float* scores, void* probs, float* lse, int64_t batch,
                      int64_t rows, int64_t keys, int64_t seq, int64_t first, bool causal,
                      cudaStream_t stream);
// delta[r] = dout[r,:] . out[r,:] over `rows` rows of `dim` (FlashAttention's D = rowsum(dO o O)).
void attentionDelta(DType dtype, const void* dout, const void* out, float* delta, int64_t rows,
                    int64_t dim, cudaStream_t stream);
// From the scores, dP = dO V^T (fp32, same layout), lse and delta: probs = exp(scores - lse) and
// dscores = probs * (dP - delta), both in dtype, masked entries 0.
void attentionScoreGrad(DType dtype, const float* scores, const float* dprobs, const float* lse,
                        const float* delta, void* probs, void* dscores, int64_t batch, int64_t rows,
                        int64_t keys, int64_t seq, int64_t first, bool causal, cudaStream_t stream);
// out[g] (dtype) = sum of per_head[g * heads_per_group + r] (fp32) over r; each entry
// `head_elems` long: the dK, dV of a key/value head from its query heads' sums.
void attentionGroupSum(DType dtype, const float* per_head, void* out, int64_t groups,
                       int64_t heads_per_group, int64_t head_elems, cudaStream_t stream);

// ---- element-wise (elementwise.cu) ----
void geluForward(DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream);
void geluBackward(DType dtype, const void* x, const void* dy, void* dx, int64_t n,
                  cudaStream_t stream);
// Same keep decisions as the CPU for the same seed (rng::keepAt); mask is uint8 (1 = kept).
void dropoutForward(DType dtype, const void* x, void* y, uint8_t* mask, int64_t n, float p,
                    uint64_t seed, cudaStream_t stream);
void dropoutBackward(DType dtype, const void* dy, const uint8_t* mask, void* dx, int64_t n, float p,
                     cudaStream_t stream);
void add(DType dtype, const void* a, const void* b, void* c, int64_t n, cudaStream_t stream);
// A memory_pass event's stand-in (events/compute_op_rules.cpp: an eager PyTorch op, an FSDP2 copy,
// Transformer Engine's ring-attention copies, known by their bytes alone): reads the n_in fp32
// words of `in` once and writes the n_out >= 1 words of `out` once, out[j] = sum of in[i] over
// i = j mod n_out: one launch (cuda_kernels.cpp's MemoryPassKernel runs the memoryPassLaunches()
// of an event, kernels/memory_pass_bounds.h, over bounded buffers).
void memoryPass(const float* in, int64_t n_in, float* out, int64_t n_out, cudaStream_t stream);
// AdamW step `step` (1-based) on fp32 master weights, grads and moments.
void adamStep(float* weights, const float* grads, float* m, float* v, int64_t n, int64_t step,
              const kernel_params::AdamHyper& hyper, cudaStream_t stream);

// ---- embedding and loss (embedding_loss.cu) ----
void embeddingForward(DType dtype, const int32_t* ids, const void* table, void* out, int64_t tokens,
                      int64_t hidden, cudaStream_t stream);
// dtable is float: the gradient accumulates in fp32 (Megatron's main_grad) with atomicAdd, which
// also keeps duplicate tokens exact enough and works on every architecture.
void embeddingBackward(DType dtype, const int32_t* ids, const void* dout, float* dtable,
                       int64_t tokens, int64_t hidden, cudaStream_t stream);
// loss and lse are float[rows]; logits and dlogits in dtype; dloss float[rows].
void crossEntropyForward(DType dtype, const void* logits, const int32_t* targets, float* loss,
                         float* lse, int64_t rows, int64_t cols, cudaStream_t stream);
void crossEntropyBackward(DType dtype, const void* logits, const int32_t* targets, const float* lse,
                          const float* dloss, void* dlogits, int64_t rows, int64_t cols,
                          cudaStream_t stream);

}  // namespace evsim::cuda

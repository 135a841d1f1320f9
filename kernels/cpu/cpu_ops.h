#pragma once
// The CPU compute kernels as pure functions over float32 arrays. The ComputeKernel wrappers
// (cpu_kernels.cpp) own buffers and call these; tests call them directly on known inputs.
//
// Everything is float32 whatever the event's dtype (fp8 GEMMs too): CPUs have no fast fp8/fp16/bf16
// arithmetic, and converting per element would time the conversion rather than the op. All arrays
// are row-major and must not alias unless a function says so. Functions are single-threaded except
// the GEMMs, whose threading is OpenBLAS's (the profiler sets it; nothing here changes global
// state).

#include <cstdint>
#include <string_view>

#include "kernels/kernel_params.h"

namespace evsim::cpu {

// ---- GEMM (gemm.cpp), through CBLAS ----
// C[m,n] = op(A) * op(B) with the operand storage of `layout` (see kernel_params::GemmLayout):
// A is [m,k] ("n") or [k,m] ("t"); B is [k,n] ("n") or [n,k] ("t"). C is overwritten.
// Throws InputError for an unknown layout, Error for sizes beyond the BLAS integer range.
void gemm(std::string_view layout, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
          float* c);
// `batch` independent GEMMs; operand i starts at a + i*m*k, b + i*k*n, c + i*m*n.
void batchedGemm(std::string_view layout, int64_t batch, int64_t m, int64_t n, int64_t k,
                 const float* a, const float* b, float* c);
// C = alpha * op(A) op(B) + beta * C, same operand storage as gemm: the fused attention scales its
// scores inside the GEMM and sums dK and dV over query tiles with beta = 1.
void gemmScaled(std::string_view layout, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, const float* b, float beta, float* c);

// ---- softmax and layernorm over rows of `cols` (norm_softmax.cpp) ----
// y = softmax(scale * x) per row, with masked entries excluded (their y is 0). kCausal treats
// the rows as consecutive [cols x cols] score matrices: row r is query position q = r % cols and
// keys j > q are masked.
void softmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                    kernel_params::SoftmaxMask mask);
// Gradient of the above with respect to x: dx = scale * y * (dy - sum_j dy_j * y_j).
// Masked entries have y = 0 and so get dx = 0.
void softmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                     float scale);

// y = (x - mean) * rstd * gamma + beta per row; saves mean[rows] and rstd[rows] for backward.
void layerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                      float* rstd, int64_t rows, int64_t cols, float eps);
// Input gradient dx[rows,cols], and dgamma[cols], dbeta[cols] (overwritten, summed over rows).
void layerNormBackward(const float* x, const float* dy, const float* gamma, const float* mean,
                       const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t cols);

// ---- RMSNorm over rows of `cols` (rmsnorm.cpp) ----
// y = x * rstd * gamma per row with rstd = 1 / sqrt(mean(x^2) + eps): no mean subtraction and no
// bias (Llama). Saves rstd[rows] for backward.
void rmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                    int64_t cols, float eps);
// Input gradient dx[rows,cols] and dgamma[cols] (overwritten, summed over rows).
void rmsNormBackward(const float* x, const float* dy, const float* gamma, const float* rstd,
                     float* dx, float* dgamma, int64_t rows, int64_t cols);

// ---- SwiGLU (swiglu.cpp) ----
// Row r of the fused fc1 output x holds 2 * cols values [gate | up] (Megatron's --swiglu chunks
// the last dimension in two); y[r, j] = silu(gate[r, j]) * up[r, j], silu(g) = g * sigmoid(g).
void swigluForward(const float* x, float* y, int64_t rows, int64_t cols);
// dx in x's layout: [dy * up * silu'(gate) | dy * silu(gate)].
void swigluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t cols);

// ---- rotary position embedding (rope.cpp) ----
// cos and sin tables [positions][dim/2]: pair i at position p turns by p * theta^(-2i/dim).
void ropeTables(int64_t positions, int64_t dim, float theta, float* cos, float* sin);
// x and y are [tokens][heads][dim]; token t sits at position t % positions. Rotate-half form
// (Llama, Megatron): the pair (x[i], x[i + dim/2]) of every head turns by its angle. dim is even.
// y may equal x (in place).
void ropeForward(const float* x, float* y, const float* cos, const float* sin, int64_t tokens,
                 int64_t heads, int64_t dim, int64_t positions);
// The gradient: the inverse (transposed) rotation of dy. dx may equal dy.
void ropeBackward(const float* dy, float* dx, const float* cos, const float* sin, int64_t tokens,
                  int64_t heads, int64_t dim, int64_t positions);

// ---- fused attention (attention.cpp) ----
// Layout and masking as kernel_params::AttentionShape says. Both passes go one tile of
// `block_rows` query rows at a time (scores [block_rows x keys] through BLAS, never [seq x seq]);
// a causal tile stops at its last row's keys.
// Floats of scratch `workspace` must hold for either pass.
int64_t attentionWorkspaceFloats(const kernel_params::AttentionShape& shape, int64_t block_rows);
// O = softmax(Q K^T / sqrt(dim)) V per query head, and lse[h][i] = the natural log of row i's sum
// of exp(scaled score) (FlashAttention's softmax_lse), which the backward pass needs.
void attentionForward(const kernel_params::AttentionShape& shape, int64_t block_rows,
                      const float* q, const float* k, const float* v, float* o, float* lse,
                      float* workspace);
// dQ, dK, dV (overwritten; dK and dV sum over the query heads of their group) from Q, K, V, O,
// dO and lse, recomputing the probabilities tile by tile as FlashAttention does.
void attentionBackward(const kernel_params::AttentionShape& shape, int64_t block_rows,
                       const float* q, const float* k, const float* v, const float* o,
                       const float* dout, const float* lse, float* dq, float* dk, float* dv,
                       float* workspace);

// ---- element-wise (elementwise.cpp) ----
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float geluValue(float x);
float geluDerivative(float x);
void geluForward(const float* x, float* y, int64_t n);
void geluBackward(const float* x, const float* dy, float* dx, int64_t n);  // dx = dy * gelu'(x)

// Keeps element i with probability 1-p (rng::keepAt(seed, i, p)), scaled by 1/(1-p); records the
// decision in mask (1 kept, 0 dropped). p in [0, 1).
void dropoutForward(const float* x, float* y, uint8_t* mask, int64_t n, float p, uint64_t seed);
void dropoutBackward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float p);

void add(const float* a, const float* b, float* c, int64_t n);  // c = a + b

// ---- embedding and loss (embedding_loss.cpp) ----
// out[t, :] = table[ids[t], :]; ids in [0, vocab).
void embeddingForward(const int32_t* ids, const float* table, float* out, int64_t tokens,
                      int64_t hidden);
// dtable[ids[t], :] += dout[t, :] (accumulates: repeated ids add up; dtable is not cleared).
void embeddingBackward(const int32_t* ids, const float* dout, float* dtable, int64_t tokens,
                       int64_t hidden);

// loss[r] = logsumexp(logits[r,:]) - logits[r, targets[r]]; saves lse[r] = logsumexp for the
// backward pass (which then reads the logits once, as Megatron's fused loss does).
void crossEntropyForward(const float* logits, const int32_t* targets, float* loss, float* lse,
                         int64_t rows, int64_t cols);
// dlogits[r,:] = (softmax(logits[r,:]) - onehot(targets[r])) * dloss[r].
void crossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                          const float* dloss, float* dlogits, int64_t rows, int64_t cols);

// ---- mixture-of-experts routing (moe.cpp) ----
// Per token: probs[t,:] = softmax(logits[t,:]) over `experts`, and its `topk` largest entries
// (index and probability, in descending order; ties to the lower index).
void moeRouterForward(const float* logits, float* probs, int32_t* topk_index, float* topk_prob,
                      int64_t tokens, int64_t experts, int64_t topk);
// Softmax gradient per token: dlogits = probs * (dprobs - sum_j dprobs_j probs_j).
void moeRouterBackward(const float* probs, const float* dprobs, float* dlogits, int64_t tokens,
                       int64_t experts);
// Gather: y[r,:] = x[source[r],:] for `rows` rows of `hidden`.
void moePermute(const float* x, const int32_t* source, float* y, int64_t rows, int64_t hidden);
// Weighted scatter back: x[r / topk,:] = sum over the token's topk rows r of weight[r] * y[r,:]
// (rows grouped by token, topk consecutive rows each; x has rows / topk rows, overwritten).
void moeUnpermute(const float* y, const float* weight, float* x, int64_t rows, int64_t hidden,
                  int64_t topk);

// ---- memory pass (memory_pass.cpp): a kernel known by its bytes alone ----
// Its buffers hold at most memoryPassBufferWords() words (kernels/memory_pass_bounds.h); larger
// reads and writes go round them again.
// Writes `write_words` zeros round out[0, out_words), then folds `read_words` words onto it: word
// i of the read, in[i mod in_words], is added to out[i mod out_words]. Needs out_words >= 1 (and
// in_words >= 1 when anything is read).
void memoryPass(const float* in, int64_t in_words, int64_t read_words, float* out,
                int64_t out_words, int64_t write_words);

// ---- optimizer (adam.cpp) ----
// One AdamW step number `step` (1-based) with bias correction, in place on weights, m and v:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^step);  vhat = v / (1-b2^step)
//   w -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * w)
void adamStep(float* weights, const float* grads, float* m, float* v, int64_t n, int64_t step,
              const kernel_params::AdamHyper& hyper);

}  // namespace evsim::cpu

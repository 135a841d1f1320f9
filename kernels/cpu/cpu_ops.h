#pragma once
// The CPU compute kernels as pure functions over float32 arrays. The ComputeKernel wrappers
// (cpu_kernels.cpp) own buffers and call these; tests call them directly on known inputs.
//
// Everything is float32 whatever the event's dtype: CPUs have no fast fp16/bf16 arithmetic, and
// converting per element would time the conversion rather than the op. All arrays are row-major
// and must not alias unless a function says so. Functions are single-threaded except the GEMMs,
// whose threading is OpenBLAS's (the profiler sets it; nothing here changes global state).

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

// ---- optimizer (adam.cpp) ----
// One AdamW step number `step` (1-based) with bias correction, in place on weights, m and v:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^step);  vhat = v / (1-b2^step)
//   w -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * w)
void adamStep(float* weights, const float* grads, float* m, float* v, int64_t n, int64_t step,
              const kernel_params::AdamHyper& hyper);

}  // namespace evsim::cpu

#pragma once
// Fused attention on CUDA, built from cuBLAS and the row-wise kernels of attention.cu. Layout,
// grouped-query heads and masking as kernel_params::AttentionShape says (the CPU's too).
//
// Per tile of query rows, for all heads at once: strided-batched GEMMs write the fp32 scores
// [batch][rows][keys] to a scratch buffer, a row kernel turns them into probabilities (and the
// log-sum-exp), and a second GEMM applies them to V. The backward pass recomputes the
// probabilities tile by tile from lse (as FlashAttention does) and sums dK, dV over tiles in fp32.
// Memory stays O(batch x rows x seq), never O(seq^2) per head; but the scores do go through
// memory, so this is not FlashAttention-2: see docs/KERNELS.md for what that means for timings.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "events/event.h"
#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/kernel.h"
#include "kernels/kernel_params.h"

namespace evsim::cuda {

// Query rows per tile: kernel_params::kAttentionBlockRows, halved (down to 16) while one fp32
// scores tile [batch x rows x seq] would pass 256 MiB; at most seq.
int64_t attentionBlockRows(const kernel_params::AttentionShape& shape);

// Device scratch of attentionForward (and, with `backward`, attentionBackward) for tiles of
// `block_rows` query rows.
struct AttentionScratch {
  AttentionScratch(DType dtype, const kernel_params::AttentionShape& shape, int64_t block_rows,
                   bool backward);
  int64_t block_rows;
  DeviceBuffer scores;          // fp32 [batch][block_rows][seq]: scaled Q K^T of a tile
  DeviceBuffer probs;           // dtype, same shape: P
  DeviceBuffer dprobs;          // backward: fp32 dP = dO V^T, same shape
  DeviceBuffer dscores;         // backward: dtype dS, same shape
  DeviceBuffer dk_acc, dv_acc;  // backward: fp32 per-query-head dK, dV [batch][seq][dim]
  DeviceBuffer delta;           // backward: fp32 [batch][seq]
};

// O (dtype) and lse (fp32 [batch][seq]) from Q, K, V (dtype); enqueued on `stream`, which must be
// the handle's stream.
void attentionForward(cublasHandle_t handle, DType dtype, const kernel_params::AttentionShape& s,
                      const void* q, const void* k, const void* v, void* o, float* lse,
                      AttentionScratch& scratch, cudaStream_t stream);
// dQ, dK, dV (dtype, overwritten) from Q, K, V, O, dO and the forward's lse.
void attentionBackward(cublasHandle_t handle, DType dtype, const kernel_params::AttentionShape& s,
                       const void* q, const void* k, const void* v, const void* o, const void* dout,
                       const float* lse, void* dq, void* dk, void* dv, AttentionScratch& scratch,
                       cudaStream_t stream);

// flash_attn_fwd and flash_attn_bwd events.
std::unique_ptr<ComputeKernel> makeCudaAttentionKernel(const Event& event, cudaStream_t stream,
                                                       uint64_t seed, bool backward);

}  // namespace evsim::cuda

#pragma once
// cuBLAS GEMMs on row-major operands (layouts as in kernels/kernel_params.h).

#include <cublas_v2.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim::cuda {

// Owns a cuBLAS handle bound to a stream; destroyed even when a later constructor step throws.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// The SM count a GEMM event's launch is limited to: 0 (no limit) unless it carries `sm_margin`
// (a GEMM chunk beside Transformer Engine's userbuffers reduce-scatter,
// ops/layer_tp_overlap_ops.cpp), then the current GPU's SMs less the margin, as cuBLAS's SM count
// target (cublasSetSmCountTarget, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET) takes it. InputError when
// the margin leaves no SM.
int gemmSmCountTarget(const Event& event);

// The cuBLAS element type of dtype (fp8: CUDA_R_8F_E4M3, which only cuBLASLt takes).
cudaDataType_t cudaType(DType dtype);

// C[m,n] = op(A) op(B) for each of `batch` strided operand sets (A_i at a + i*m*k elements, ...),
// enqueued on the handle's stream. All of a, b, c hold `dtype`. fp16/bf16 use CUBLAS_COMPUTE_32F
// (float accumulation; cuBLAS picks tensor-core algorithms by default). fp32 also uses plain
// CUBLAS_COMPUTE_32F, not TF32: PyTorch's default (allow_tf32 = False for matmul), so the timing
// is that of a true fp32 GEMM. fp8 throws InputError: cublasGemmEx takes no fp8 (see
// cuda_gemm_fp8.h).
void gemm(cublasHandle_t handle, DType dtype, std::string_view layout, int64_t batch, int64_t m,
          int64_t n, int64_t k, const void* a, const void* b, void* c);

// gemm and bgemm events: owns a cuBLAS handle bound to `stream` and random operands; fp8 events
// go to makeCudaFp8GemmKernel (cuda_gemm_fp8.h).
std::unique_ptr<ComputeKernel> makeCudaGemmKernel(const Event& event, cudaStream_t stream,
                                                  uint64_t seed);

}  // namespace evsim::cuda

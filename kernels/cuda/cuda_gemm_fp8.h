#pragma once
// FP8 (E4M3) GEMMs through cuBLASLt: cublasGemmEx takes no fp8 operands.
//
// On Hopper and Ada, cuBLASLt runs FP8 only in its "TN" form: in our row-major terms
// D[m,n] = A[m,k] * B[n,k]^T, both operands k-contiguous (the "nt" layout). Transformer Engine
// keeps every FP8 GEMM in that form too: its cast kernels write the transposed FP8 copies the
// backward GEMMs need, so no GEMM transposes. An fp8 gemm/bgemm event of any layout therefore runs
// the TN GEMM of its m, n, k, with operands made in TN storage at construction (untimed; random
// data transposed is random data). The layout still picks the accumulation mode, as TE does:
// "nt" (Linear forward) uses fast accumulation, the others (dgrad "nn", wgrad "tn") the split
// accumulator (TE's _2X_ACC_DGRAD / _2X_ACC_WGRAD).

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "events/event.h"
#include "kernels/kernel.h"

namespace evsim::cuda {

// One FP8 GEMM shape planned once (descriptors, algorithm, workspace): per batch entry i,
// D_i[m,n] (bf16) = scale_a * scale_b * A_i[m,k] B_i[n,k]^T with A_i at a + i*m*k, B_i at b +
// i*n*k, D_i at d + i*m*n; fp32 accumulation; scale_a and scale_b are device floats (per-tensor
// scaling as Transformer Engine's delayed-scaling recipe). Needs an FP8 GPU (compute
// capability 8.9+) and m, n, k multiples of 16: throws InputError otherwise, EnvironmentError for a
// failing cuBLASLt.
class Fp8Gemm {
 public:
  // sm_count_target > 0 limits the launch to that many SMs (gemmSmCountTarget, cuda_gemm.h).
  Fp8Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, bool fast_accumulate,
          const float* scale_a, const float* scale_b, cudaStream_t stream,
          int sm_count_target = 0);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;
  // Enqueues the GEMM on the stream given at construction.
  void run(const void* a, const void* b, void* d);

 private:
  struct Plan;
  std::unique_ptr<Plan> plan_;
};

// InputError unless the current GPU runs FP8 GEMMs (compute capability 8.9 or later) and m, n, k
// are multiples of 16 (cuBLASLt's FP8 alignment rule, which Transformer Engine enforces as well).
// `what` names the request in the message (an event signature).
void checkFp8Gemm(int64_t m, int64_t n, int64_t k, std::string_view what);

// fp8 gemm and bgemm events (see above for the layouts).
std::unique_ptr<ComputeKernel> makeCudaFp8GemmKernel(const Event& event, cudaStream_t stream,
                                                     uint64_t seed);

}  // namespace evsim::cuda

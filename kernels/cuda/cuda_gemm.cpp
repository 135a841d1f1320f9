#include "kernels/cuda/cuda_gemm.h"

#include <climits>

#include "common/error.h"
#include "kernels/cuda/cuda_gemm_fp8.h"
#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/kernel_params.h"

namespace evsim::cuda {

namespace {

int cublasInt(int64_t value, const char* what) {
  if (value <= 0 || value > INT_MAX) {
    EVSIM_THROW(Error, "GEMM {}={} outside the cuBLAS integer range (1..{})", what, value, INT_MAX);
  }
  return static_cast<int>(value);
}

class CudaGemmKernel final : public CudaKernelBase {
 public:
  CudaGemmKernel(const Event& e, cudaStream_t stream, uint64_t seed)
      : CudaKernelBase(stream, seed),
        dtype_(e.dtype),
        layout_(e.layout),
        batch_(e.hasDim("batch") ? e.dim("batch") : 1),
        m_(e.dim("m")),
        n_(e.dim("n")),
        k_(e.dim("k")),
        handle_(stream) {
    kernel_params::parseGemmLayout(layout_);  // fail here, not at the first timed run
    if (const int sms = gemmSmCountTarget(e); sms > 0) {
      EVSIM_CUBLAS_CHECK(cublasSetSmCountTarget(handle_.get(), sms));
    }
    a_ = randomBuffer(dtype_, batch_ * m_ * k_, 0);
    b_ = randomBuffer(dtype_, batch_ * k_ * n_, 1);
    c_ = randomBuffer(dtype_, batch_ * m_ * n_, 2);
    synchronize();
  }
  void run() override {
    gemm(handle_.get(), dtype_, layout_, batch_, m_, n_, k_, a_.get(), b_.get(), c_.get());
  }

 private:
  DType dtype_;
  std::string layout_;
  int64_t batch_, m_, n_, k_;
  CublasHandle handle_;
  DeviceBuffer a_, b_, c_;
};

}  // namespace

CublasHandle::CublasHandle(cudaStream_t stream) {
  EVSIM_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    EVSIM_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  } catch (...) {
    cublasDestroy(handle_);
    throw;
  }
}

CublasHandle::~CublasHandle() { cublasDestroy(handle_); }  // teardown: status ignored

int gemmSmCountTarget(const Event& event) {
  if (!event.hasDim("sm_margin")) return 0;
  int device = 0;
  int sms = 0;
  EVSIM_CUDA_CHECK(cudaGetDevice(&device));
  EVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t margin = event.dim("sm_margin");
  if (margin < 0 || margin >= sms) {
    EVSIM_THROW(InputError, "'{}': sm_margin={} leaves none of this GPU's {} SMs",
                event.signature(), margin, sms);
  }
  return sms - static_cast<int>(margin);
}

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
    case DType::kFp16:
      return CUDA_R_16F;
    case DType::kBf16:
      return CUDA_R_16BF;
    case DType::kFp32:
      return CUDA_R_32F;
    case DType::kFp8:
      return CUDA_R_8F_E4M3;
    case DType::kFp8Row:
    case DType::kFp8Block:
    case DType::kMxfp8:
      break;  // refused by makeCudaGemmKernel before any buffer is made
  }
  EVSIM_THROW(Error, "unknown dtype {}", static_cast<int>(dtype));
}

void gemm(cublasHandle_t handle, DType dtype, std::string_view layout, int64_t batch, int64_t m,
          int64_t n, int64_t k, const void* a, const void* b, void* c) {
  if (dtype == DType::kFp8) {
    EVSIM_THROW(InputError, "cublasGemmEx takes no fp8 operands: fp8 GEMMs run through cuBLASLt");
  }
  kernel_params::GemmLayout l = kernel_params::parseGemmLayout(layout);
  const int mi = cublasInt(m, "m"), ni = cublasInt(n, "n"), ki = cublasInt(k, "k");
  const int batches = cublasInt(batch, "batch");
  const cudaDataType_t type = cudaType(dtype);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // cuBLAS is column-major. A row-major X[r,c] is the column-major X^T[c,r] with the same leading
  // dimension, so we compute C^T[n,m] = op(B)^T op(A)^T: B is the first operand, m and n swap.
  // Row-major B stored [k,n] is column-major B^T (n x k): no transpose; stored [n,k] it is B
  // (k x n) and needs CUBLAS_OP_T. Likewise for A.
  const cublasOperation_t op_b = l.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = l.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = l.trans_b ? ki : ni;
  const int lda = l.trans_a ? mi : ki;
  const int ldc = ni;
  if (batches == 1) {
    EVSIM_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, ni, mi, ki, &alpha, b, type, ldb, a, type,
                                    lda, &beta, c, type, ldc, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
  } else {
    EVSIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, op_b, op_a, ni, mi, ki, &alpha, b, type, ldb, k * n, a, type, lda, m * k, &beta, c,
        type, ldc, m * n, batches, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

std::unique_ptr<ComputeKernel> makeCudaGemmKernel(const Event& event, cudaStream_t stream,
                                                  uint64_t seed) {
  if (event.dtype == DType::kFp8) return makeCudaFp8GemmKernel(event, stream, seed);
  if (isFp8(event.dtype)) {
    // Row-, block- and MX-scaled GEMMs need the scale tensors' own cuBLASLt modes (CUDA 12.9+,
    // Blackwell for MX) or DeepGEMM/CUTLASS kernels, which eventprof does not carry: the device
    // model times them (modeler/device_model.h).
    EVSIM_THROW(InputError, "'{}': no CUDA kernel for {} GEMMs (per-tensor fp8 only)",
                event.signature(), dtypeName(event.dtype));
  }
  return std::make_unique<CudaGemmKernel>(event, stream, seed);
}

}  // namespace evsim::cuda

#include "kernels/cuda/cuda_gemm_fp8.h"

#include <climits>
#include <string>

#include "common/error.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/kernel_params.h"

namespace evsim::cuda {

namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper; some FP8 algorithms need it.
constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;

int ltInt(int64_t value, const char* what) {
  if (value <= 0 || value > INT_MAX) {
    EVSIM_THROW(Error, "FP8 GEMM {}={} outside the cuBLASLt integer range (1..{})", what, value,
                INT_MAX);
  }
  return static_cast<int>(value);
}

template <typename T>
void setDescAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                      const T& value) {
  EVSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

}  // namespace

// cuBLASLt objects of one GEMM shape, destroyed in reverse order of creation (null ones skipped).
struct Fp8Gemm::Plan {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  // cuBLAS is column-major: the row-major D[m,n] = A B^T is D^T[n,m] = B A^T there, so cuBLAS's
  // first operand ("A", transposed: the T of TN) is our B and its second ("B") is our A.
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulAlgo_t algo{};
  DeviceBuffer workspace;

  ~Plan() {  // teardown: statuses ignored
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    if (out != nullptr) cublasLtMatrixLayoutDestroy(out);
    if (second != nullptr) cublasLtMatrixLayoutDestroy(second);
    if (first != nullptr) cublasLtMatrixLayoutDestroy(first);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

namespace {

// Column-major rows x cols with leading dimension ld; `batch` entries `stride` elements apart.
cublasLtMatrixLayout_t makeLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                  int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  EVSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = ltInt(batch, "batch");
    const int64_t offset = stride;
    cublasStatus_t status = cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &offset, sizeof(offset));
    }
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatrixLayoutDestroy(layout);
      EVSIM_CUBLAS_CHECK(status);
    }
  }
  return layout;
}

}  // namespace

Fp8Gemm::Fp8Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, bool fast_accumulate,
                 const float* scale_a, const float* scale_b, cudaStream_t stream,
                 int sm_count_target)
    : plan_(std::make_unique<Plan>()) {
  checkFp8Gemm(m, n, k, fmt::format("FP8 GEMM m={} n={} k={}", m, n, k));
  ltInt(m, "m");
  ltInt(n, "n");
  ltInt(k, "k");
  Plan& p = *plan_;
  p.stream = stream;
  EVSIM_CUBLAS_CHECK(cublasLtCreate(&p.handle));
  EVSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  setDescAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  setDescAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  setDescAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                   static_cast<int8_t>(fast_accumulate ? 1 : 0));
  // cuBLAS's A is our B and the other way round (see Plan).
  setDescAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(scale_b));
  setDescAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(scale_a));
  if (sm_count_target > 0) {
    setDescAttribute(p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                     static_cast<int32_t>(sm_count_target));
  }
  // Our B [n,k] row-major is column-major k x n (ld k), transposed to n x k; our A [m,k] is
  // column-major k x m (ld k); D [m,n] row-major is column-major n x m (ld n). C = D (beta 0).
  p.first = makeLayout(CUDA_R_8F_E4M3, k, n, k, batch, n * k);
  p.second = makeLayout(CUDA_R_8F_E4M3, k, m, k, batch, m * k);
  p.out = makeLayout(CUDA_R_16BF, n, m, n, batch, m * n);
  EVSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p.preference));
  EVSIM_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(p.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &kWorkspaceBytes, sizeof(kWorkspaceBytes)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  EVSIM_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(p.handle, p.desc, p.first, p.second, p.out,
                                                    p.out, p.preference, 1, &result, &found));
  if (found == 0) {
    EVSIM_THROW(EnvironmentError, "cuBLASLt has no FP8 algorithm for batch={} m={} n={} k={}",
                batch, m, n, k);
  }
  p.algo = result.algo;
  p.workspace = DeviceBuffer(static_cast<int64_t>(kWorkspaceBytes));
}

Fp8Gemm::~Fp8Gemm() = default;

void Fp8Gemm::run(const void* a, const void* b, void* d) {
  const Plan& p = *plan_;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  EVSIM_CUBLAS_CHECK(cublasLtMatmul(p.handle, p.desc, &alpha, b, p.first, a, p.second, &beta, d,
                                    p.out, d, p.out, &p.algo, p.workspace.get(), kWorkspaceBytes,
                                    p.stream));
}

void checkFp8Gemm(int64_t m, int64_t n, int64_t k, std::string_view what) {
  int device = 0, major = 0, minor = 0;
  EVSIM_CUDA_CHECK(cudaGetDevice(&device));
  EVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  EVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major * 10 + minor < 89) {
    EVSIM_THROW(InputError,
                "'{}': fp8 GEMMs need FP8 tensor cores (compute capability 8.9+, e.g. H100); "
                "this GPU is sm_{}{}",
                what, major, minor);
  }
  if (m % 16 != 0 || n % 16 != 0 || k % 16 != 0) {
    EVSIM_THROW(InputError, "'{}': fp8 GEMMs need m, n and k multiples of 16 (cuBLASLt's FP8 rule)",
                what);
  }
}

namespace {

class CudaFp8GemmKernel final : public CudaKernelBase {
 public:
  CudaFp8GemmKernel(const Event& e, cudaStream_t stream, uint64_t seed)
      : CudaKernelBase(stream, seed),
        batch_(e.hasDim("batch") ? e.dim("batch") : 1),
        m_(e.dim("m")),
        n_(e.dim("n")),
        k_(e.dim("k")) {
    kernel_params::parseGemmLayout(e.layout);  // fail here, not at the first timed run
    checkFp8Gemm(m_, n_, k_, e.signature());
    // Operands in TN storage whatever the layout (see cuda_gemm_fp8.h).
    a_ = randomBuffer(DType::kFp8, batch_ * m_ * k_, 0);
    b_ = randomBuffer(DType::kFp8, batch_ * n_ * k_, 1);
    d_ = randomBuffer(DType::kBf16, batch_ * m_ * n_, 2);
    scales_ = DeviceBuffer(2 * int64_t(sizeof(float)));
    const float ones[2] = {1.0f, 1.0f};
    EVSIM_CUDA_CHECK(
        cudaMemcpyAsync(scales_.get(), ones, sizeof(ones), cudaMemcpyHostToDevice, stream_));
    gemm_ = std::make_unique<Fp8Gemm>(batch_, m_, n_, k_, e.layout == "nt", scales_.as<float>(),
                                      scales_.as<float>() + 1, stream_, gemmSmCountTarget(e));
    synchronize();
  }
  void run() override { gemm_->run(a_.get(), b_.get(), d_.get()); }

 private:
  int64_t batch_, m_, n_, k_;
  DeviceBuffer a_, b_, d_, scales_;
  std::unique_ptr<Fp8Gemm> gemm_;
};

}  // namespace

std::unique_ptr<ComputeKernel> makeCudaFp8GemmKernel(const Event& event, cudaStream_t stream,
                                                     uint64_t seed) {
  return std::make_unique<CudaFp8GemmKernel>(event, stream, seed);
}

}  // namespace evsim::cuda

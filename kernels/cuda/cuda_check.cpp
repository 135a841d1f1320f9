#include "kernels/cuda/cuda_check.h"

#include "common/error.h"

namespace evsim::cuda_detail {

void throwCudaError(const char* call, cudaError_t status, const char* file, int line) {
  EVSIM_THROW(EnvironmentError, "CUDA call {} failed: {} ({}) at {}:{}", call,
              cudaGetErrorName(status), cudaGetErrorString(status), file, line);
}

void throwCublasError(const char* call, cublasStatus_t status, const char* file, int line) {
  EVSIM_THROW(EnvironmentError, "cuBLAS call {} failed: {} ({}) at {}:{}", call,
              cublasGetStatusName(status), cublasGetStatusString(status), file, line);
}

void throwError(const char* message) { EVSIM_THROW(Error, "{}", message); }

void throwInputError(const char* message) { EVSIM_THROW(InputError, "{}", message); }

}  // namespace evsim::cuda_detail

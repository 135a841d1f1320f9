#pragma once
// Check macros for every CUDA runtime and cuBLAS call: a failure throws evsim::Error naming the
// call, the status name and text, and file:line. The throwing functions live in cuda_check.cpp so
// this header stays free of fmt, which nvcc cannot compile (fmt 9); .cu files include it too.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace evsim::cuda_detail {

[[noreturn]] void throwCudaError(const char* call, cudaError_t status, const char* file, int line);
[[noreturn]] void throwCublasError(const char* call, cublasStatus_t status, const char* file,
                                   int line);
// Throws evsim::Error(message): for .cu code, which cannot use EVSIM_THROW (fmt).
[[noreturn]] void throwError(const char* message);
// Throws evsim::InputError(message): a request no kernel can run (e.g. an fp8 non-GEMM operand).
[[noreturn]] void throwInputError(const char* message);

}  // namespace evsim::cuda_detail

#define EVSIM_CUDA_CHECK(call)                                                             \
  do {                                                                                     \
    cudaError_t evsim_cuda_status_ = (call);                                               \
    if (evsim_cuda_status_ != cudaSuccess) {                                               \
      ::evsim::cuda_detail::throwCudaError(#call, evsim_cuda_status_, __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)

#define EVSIM_CUBLAS_CHECK(call)                                                               \
  do {                                                                                         \
    cublasStatus_t evsim_cublas_status_ = (call);                                              \
    if (evsim_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                       \
      ::evsim::cuda_detail::throwCublasError(#call, evsim_cublas_status_, __FILE__, __LINE__); \
    }                                                                                          \
  } while (0)

// After a <<<...>>> launch: launch-configuration errors surface here, execution errors at the
// next synchronising call.
#define EVSIM_CUDA_CHECK_LAUNCH(kernel_name)                                              \
  do {                                                                                    \
    cudaError_t evsim_cuda_status_ = cudaGetLastError();                                  \
    if (evsim_cuda_status_ != cudaSuccess) {                                              \
      ::evsim::cuda_detail::throwCudaError("launch of " #kernel_name, evsim_cuda_status_, \
                                           __FILE__, __LINE__);                           \
    }                                                                                     \
  } while (0)

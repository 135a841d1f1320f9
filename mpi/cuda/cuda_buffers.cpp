#include "mpi/cuda/cuda_buffers.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace evsim {

DeviceBuffer::DeviceBuffer(size_t bytes) {
  EVSIM_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)));
  EVSIM_CUDA_CHECK(cudaMemset(ptr_, 0, std::max<size_t>(bytes, 1)));
}

DeviceBuffer::~DeviceBuffer() { static_cast<void>(cudaFree(ptr_)); }

std::pair<ncclDataType_t, size_t> ncclElements(const Event& event, int64_t bytes) {
  int64_t element = dtypeBytes(event.dtype);
  if (bytes % element != 0) return {ncclUint8, static_cast<size_t>(bytes)};
  ncclDataType_t type = event.dtype == DType::kFp32   ? ncclFloat32
                        : event.dtype == DType::kBf16 ? ncclBfloat16
                                                      : ncclFloat16;
  return {type, static_cast<size_t>(bytes / element)};
}

}  // namespace evsim

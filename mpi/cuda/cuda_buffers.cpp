#include "mpi/cuda/cuda_buffers.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace evsim {

DeviceBuffer::DeviceBuffer(size_t bytes) {
  EVSIM_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)));
  EVSIM_CUDA_CHECK(cudaMemset(ptr_, 0, std::max<size_t>(bytes, 1)));
}

DeviceBuffer::~DeviceBuffer() { static_cast<void>(cudaFree(ptr_)); }

namespace {

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return ncclFloat32;
    case DType::kBf16:
      return ncclBfloat16;
    case DType::kFp16:
      return ncclFloat16;
    case DType::kFp8:
    case DType::kFp8Row:
    case DType::kFp8Block:
    case DType::kMxfp8:
      // E4M3 (events/dtype.h). NCCL names it from 2.24 on (and reduces it on sm_90+ only, where
      // FP8 training runs); older headers move the same bytes as uint8, which reductions then
      // treat as integers: the traffic, which is what a profile measures, is the same.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
      return ncclFloat8e4m3;
#else
      return ncclUint8;
#endif
  }
  return ncclUint8;
}

}  // namespace

std::pair<ncclDataType_t, size_t> ncclElements(const Event& event, int64_t bytes) {
  int64_t element = dtypeBytes(event.dtype);
  if (bytes % element != 0) return {ncclUint8, static_cast<size_t>(bytes)};
  return {ncclType(event.dtype), static_cast<size_t>(bytes / element)};
}

}  // namespace evsim

#pragma once
// Device memory and NCCL element types shared by eventprof's CUDA backend and eventrun's CUDA
// executor, so eventrun moves exactly what eventprof measured.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "events/event.h"

namespace evsim {

// Zeroed device memory (at least one byte), freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// NCCL element type and count for `bytes` of the event's dtype; odd byte counts travel as bytes.
std::pair<ncclDataType_t, size_t> ncclElements(const Event& event, int64_t bytes);

}  // namespace evsim

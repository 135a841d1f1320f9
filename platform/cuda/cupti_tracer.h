#pragma once
// Thin CUPTI Activity API wrapper behind the ActivityTracer seam (platform/cupti_records.h): it
// only enables activity kinds, hands CUPTI buffers, and converts CUpti_Activity records into
// ActivityRecord. All timing logic is in cupti_records.cpp, tested without a GPU.
//
// CUPTI's buffer callbacks are process-wide, so there is at most one CuptiTracer per process.
// Call order: create() (before or after the CUDA context exists) -> enable() -> push/pop around
// launches -> synchronize the stream -> drain() -> disable() -> ... -> destroy.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform/cupti_records.h"

namespace evsim {

class CuptiTracer : public ActivityTracer {
 public:
  // Throws Error naming the CUPTI call and status when CUPTI cannot trace (no permission, another
  // profiler attached, a second tracer in this process): it enables and disables once to find out.
  static std::unique_ptr<CuptiTracer> create();
  ~CuptiTracer() override;
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  void enable() override;
  void disable() override;
  void pushExternalId(uint64_t external_id) override;
  void popExternalId() override;
  // Throws Error when CUPTI dropped records since the last drain (spans would be too short).
  std::vector<ActivityRecord> drain() override;

  // CUPTI's id of a cudaStream_t (passed as void*), as kernel records report it.
  static uint32_t streamId(void* cuda_stream);
  // CUPTI API version, e.g. "130001".
  static std::string version();

 private:
  CuptiTracer() = default;
};

}  // namespace evsim

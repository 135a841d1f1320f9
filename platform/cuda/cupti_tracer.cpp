#include "platform/cuda/cupti_tracer.h"

#include <cuda.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "platform/cuda/cupti_check.h"

namespace evsim {

namespace {

constexpr size_t kBufferBytes = 8 * 1024 * 1024;
constexpr size_t kBufferAlign = 8;  // CUPTI requires 8-byte aligned buffers
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

// The kinds enabled, in enable order. Runtime and driver API records are needed because CUPTI
// emits an external-correlation record only for API calls it records.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
};

// Shared with CUPTI's callbacks, which may run on CUPTI's worker thread.
std::mutex g_mutex;
std::vector<ActivityRecord> g_records;
size_t g_dropped = 0;
std::atomic<bool> g_active{false};

ActivityRecord toRecord(const CUpti_Activity* activity) {
  ActivityRecord r;
  switch (activity->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
      r.kind = ActivityKind::kKernel;
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.correlation_id = k->correlationId;
      r.stream_id = k->streamId;
      if (k->name != nullptr) r.name = k->name;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
      r.kind = ActivityKind::kMemcpy;
      r.start_ns = m->start;
      r.end_ns = m->end;
      r.correlation_id = m->correlationId;
      r.stream_id = m->streamId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
      r.kind = ActivityKind::kMemset;
      r.start_ns = m->start;
      r.end_ns = m->end;
      r.correlation_id = m->correlationId;
      r.stream_id = m->streamId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(activity);
      r.kind = activity->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? ActivityKind::kRuntimeApi
                                                             : ActivityKind::kDriverApi;
      r.start_ns = a->start;
      r.end_ns = a->end;
      r.correlation_id = a->correlationId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(activity);
      r.kind = ActivityKind::kExternalCorrelation;
      r.correlation_id = e->correlationId;
      r.external_id = e->externalKind == kExternalKind ? e->externalId : 0;
      break;
    }
    default:
      r.kind = ActivityKind::kOther;
  }
  return r;
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                              size_t valid_bytes) {
  std::vector<ActivityRecord> parsed;
  CUpti_Activity* activity = nullptr;
  // Errors cannot propagate out of a CUPTI callback; a malformed buffer ends the walk.
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &activity) == CUPTI_SUCCESS) {
    parsed.push_back(toRecord(activity));
  }
  size_t dropped = 0;
  EVSIM_CUPTI_IGNORE(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped));
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_dropped += dropped;
  g_records.insert(g_records.end(), std::make_move_iterator(parsed.begin()),
                   std::make_move_iterator(parsed.end()));
}

}  // namespace

std::unique_ptr<CuptiTracer> CuptiTracer::create() {
  bool expected = false;
  if (!g_active.compare_exchange_strong(expected, true)) {
    EVSIM_THROW(Error, "CUPTI: a tracer is already active in this process");
  }
  std::unique_ptr<CuptiTracer> tracer(new CuptiTracer());
  try {
    EVSIM_CUPTI_CHECK(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted));
    tracer->enable();  // fails here, at start-up, when CUPTI is unavailable
    tracer->disable();
    tracer->drain();
  } catch (...) {
    tracer.reset();
    throw;
  }
  return tracer;
}

CuptiTracer::~CuptiTracer() {
  disable();
  EVSIM_CUPTI_IGNORE(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.clear();
  g_dropped = 0;
  g_active = false;
}

void CuptiTracer::enable() {
  for (CUpti_ActivityKind kind : kKinds) EVSIM_CUPTI_CHECK(cuptiActivityEnable(kind));
}

void CuptiTracer::disable() {
  // Teardown path as well (destructor, scope guards): never throws.
  for (CUpti_ActivityKind kind : kKinds) EVSIM_CUPTI_IGNORE(cuptiActivityDisable(kind));
}

void CuptiTracer::pushExternalId(uint64_t external_id) {
  EVSIM_CUPTI_CHECK(cuptiActivityPushExternalCorrelationId(kExternalKind, external_id));
}

void CuptiTracer::popExternalId() {
  uint64_t last = 0;
  EVSIM_CUPTI_CHECK(cuptiActivityPopExternalCorrelationId(kExternalKind, &last));
}

std::vector<ActivityRecord> CuptiTracer::drain() {
  EVSIM_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::vector<ActivityRecord> out;
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    out.swap(g_records);
    std::swap(dropped, g_dropped);
  }
  if (dropped > 0) {
    EVSIM_THROW(Error, "CUPTI dropped {} activity records: kernel spans would be incomplete",
                dropped);
  }
  return out;
}

uint32_t CuptiTracer::streamId(void* cuda_stream) {
  uint32_t id = 0;
  EVSIM_CUPTI_CHECK(cuptiGetStreamIdEx(nullptr, static_cast<CUstream>(cuda_stream), 0, &id));
  return id;
}

std::string CuptiTracer::version() {
  uint32_t version = 0;
  EVSIM_CUPTI_CHECK(cuptiGetVersion(&version));
  return std::to_string(version);
}

}  // namespace evsim

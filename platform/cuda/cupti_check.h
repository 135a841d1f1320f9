#pragma once
// Check macros for CUPTI calls: a failure throws evsim::Error naming the call, the status
// string and file:line (nccl's checks.h is the model; NCCL's own: mpi/cuda/nccl_check.h).
// EVSIM_*_IGNORE is for teardown paths, where a second exception would hide the first.

#include <cupti.h>

#include "common/error.h"

namespace evsim {
inline const char* cuptiStatusString(CUptiResult status) {
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr) return "unknown";
  return text;
}
}  // namespace evsim

#define EVSIM_CUPTI_CHECK(call)                                                                 \
  do {                                                                                          \
    CUptiResult evsim_cupti_status_ = (call);                                                   \
    if (evsim_cupti_status_ != CUPTI_SUCCESS) {                                                 \
      throw ::evsim::EnvironmentError(::fmt::format(                                            \
          "{} failed: {} ({}) ({}:{})", #call, ::evsim::cuptiStatusString(evsim_cupti_status_), \
          static_cast<int>(evsim_cupti_status_), __FILE__, __LINE__));                          \
    }                                                                                           \
  } while (0)

#define EVSIM_CUPTI_IGNORE(call) static_cast<void>(call)

#pragma once
// Check macros for NCCL calls: a failure throws evsim::Error naming the call, the status string and
// file:line (nccl's checks.h is the model). EVSIM_NCCL_IGNORE is for teardown paths, where a second
// exception would hide the first.

#include <fmt/format.h>
#include <nccl.h>

#include "common/error.h"

// ncclInProgress is not an error on a non-blocking communicator: the caller polls for completion.
#define EVSIM_NCCL_CHECK(call)                                                         \
  do {                                                                                 \
    ncclResult_t evsim_nccl_status_ = (call);                                          \
    if (evsim_nccl_status_ != ncclSuccess && evsim_nccl_status_ != ncclInProgress) {   \
      throw ::evsim::EnvironmentError(::fmt::format(                                              \
          "{} failed: {} ({}) ({}:{})", #call, ncclGetErrorString(evsim_nccl_status_), \
          static_cast<int>(evsim_nccl_status_), __FILE__, __LINE__));                  \
    }                                                                                  \
  } while (0)

#define EVSIM_NCCL_IGNORE(call) static_cast<void>(call)

#pragma once
// Every MPI call goes through EVSIM_MPI_CHECK, which names the call, MPI's error string and
// file:line. MPI_COMM_WORLD's error handler is set to MPI_ERRORS_RETURN at start-up (mpi_env.cpp)
// so errors come back here instead of aborting inside MPI without a message.

#include <mpi.h>

#include <string>

#include "common/error.h"

namespace evsim {

inline std::string mpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace evsim

#define EVSIM_MPI_CHECK(call)                                                                  \
  do {                                                                                         \
    int evsim_mpi_status_ = (call);                                                            \
    if (evsim_mpi_status_ != MPI_SUCCESS) {                                                    \
      throw ::evsim::EnvironmentError(::fmt::format("{} failed: {} ({}:{})", #call,                       \
                                         ::evsim::mpiErrorString(evsim_mpi_status_), __FILE__, \
                                         __LINE__));                                           \
    }                                                                                          \
  } while (0)

#pragma once
// Errors for all of eventsim. Library code throws; only main() decides how to report and exit.
//
// InputError: the user's input is wrong (config file, flag, profile database). main() prints the
//   one-line message and exits with code 2.
// EnvironmentError: the machine failed the run (disk full, an unwritable path, a failing CUDA,
//   NCCL, CUPTI or MPI call, a lost or silent peer). One line, exit code 1.
// Error: anything else — a broken invariant, i.e. a bug in eventsim. "internal error", exit 3.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace evsim {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

class EnvironmentError : public Error {
 public:
  using Error::Error;
};

// Exit codes every tool of the project documents (README): bad input, a failing environment, a bug.
inline constexpr int kInputErrorExitCode = 2;
inline constexpr int kEnvironmentErrorExitCode = 1;
inline constexpr int kBugExitCode = 3;

}  // namespace evsim

// Throws `Type` with a fmt-formatted message: EVSIM_THROW(InputError, "{}: key '{}'", file, key).
#define EVSIM_THROW(Type, ...) throw ::evsim::Type(::fmt::format(__VA_ARGS__))

// Invariant check that stays on in release builds; names the condition and file:line.
#define EVSIM_CHECK(cond, ...)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      throw ::evsim::Error(::fmt::format("internal check failed: {} ({}:{}): {}", #cond, __FILE__, \
                                         __LINE__, ::fmt::format(__VA_ARGS__)));                   \
    }                                                                                              \
  } while (0)

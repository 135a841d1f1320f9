#pragma once
// Errors for all of eventsim. Library code throws; only main() decides how to report and exit.
//
// InputError: the user's input is wrong (config file, flag, profile database). main() prints the
//   one-line message and exits with code 2.
// Error: anything else that went wrong (an invariant, a vendor call). Exit code 1.

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

// Exit code main() uses for bad input, as every tool of the project documents.
inline constexpr int kInputErrorExitCode = 2;

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

#pragma once
// Command-line checks CLI11 lacks: its PositiveNumber and Range let NaN through (a comparison with
// NaN is false), so `--comm-timeout nan` was accepted (issue 17).

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace evsim {

// GPUs in one job: far beyond any cluster, small enough that the strategy enumeration (divisors of
// N) and every product with it stay cheap and inside int64.
inline constexpr int64_t kMaxGpus = int64_t{1} << 30;
inline const CLI::Validator kGpuCount = CLI::Range(int64_t{1}, kMaxGpus);

// A finite number > 0.
inline const CLI::Validator kFinitePositive(
    [](const std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v <= 0) {
        return "must be a finite number > 0, not " + text;
      }
      return "";
    },
    "FINITE > 0", "finite positive");

// A finite number in (0, max], said in readable numbers ("1e+06", not "1000000.000000").
inline CLI::Validator finitePositiveUpTo(double max) {
  return CLI::Validator(
      [max](const std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v <= 0 || v > max) {
          return "must be a finite number > 0 and <= " + CLI::detail::to_string(max) + ", not " +
                 text;
        }
        return "";
      },
      "FINITE in (0, max]", "finite positive bounded");
}

// A finite number >= 0 (CLI11's NonNegativeNumber printed its bound, DBL_MAX, in 309 digits).
inline const CLI::Validator kFiniteNonNegative(
    [](const std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < 0) {
        return "must be a finite number >= 0, not " + text;
      }
      return "";
    },
    "FINITE >= 0", "finite non-negative");

// A finite number in [lo, hi] (CLI11's Range lets NaN through).
inline CLI::Validator finiteInRange(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](const std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < lo || v > hi) {
          return fmt::format("must be a finite number from {:g} to {:g}, not {}", lo, hi, text);
        }
        return "";
      },
      "FINITE in [lo, hi]", "finite bounded");
}

// An integer >= 1, said without DBL_MAX (for int options that were checked with PositiveNumber).
inline const CLI::Validator kPositiveInteger(
    [](const std::string& text) -> std::string {
      int64_t v = 0;
      if (!CLI::detail::lexical_cast(text, v) || v < 1)
        return "must be an integer >= 1, not " + text;
      return "";
    },
    "INT >= 1", "positive integer");

// An integer >= 0.
inline const CLI::Validator kNonNegativeInteger(
    [](const std::string& text) -> std::string {
      int64_t v = 0;
      if (!CLI::detail::lexical_cast(text, v) || v < 0)
        return "must be an integer >= 0, not " + text;
      return "";
    },
    "INT >= 0", "non-negative integer");

// Digits only: an unsigned option (a seed) read "-1" as 18446744073709551615.
inline const CLI::Validator kUnsignedText(
    [](const std::string& text) -> std::string {
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        return "must be an integer >= 0, not " + text;
      }
      return "";
    },
    "UINT", "unsigned integer");

// An output file name: "" was taken as "no file" and nothing was written, silently.
inline const CLI::Validator kFileName(
    [](const std::string& text) -> std::string {
      return text.empty() ? "must be a file name, not empty" : "";
    },
    "FILE", "file name");

}  // namespace evsim

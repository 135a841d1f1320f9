#pragma once
// Command-line checks CLI11 lacks: its PositiveNumber and Range let NaN through (a comparison with
// NaN is false), so `--comm-timeout nan` was accepted (issue 17).

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

}  // namespace evsim

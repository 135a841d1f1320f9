#pragma once
// Command-line checks CLI11 lacks: its PositiveNumber and Range let NaN through (a comparison with
// NaN is false), so `--comm-timeout nan` was accepted (issue 17).

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace evsim {

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

}  // namespace evsim

#pragma once
// How the strategy checks (strategy_validation.cpp, strategy_technique_checks.cpp,
// optimizer_step.cpp) report the rule they find broken. Each check is written once, as a template
// over its report: `return report(StrategyRule::kX, "format", values...);`. ViolationReport
// returns the rule and a key of the values without formatting them (what a search asks of every
// candidate); MessageReport formats the message a user reads. Shared by those files only.

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "plan/strategy.h"
#include "plan/strategy_rule.h"

namespace evsim {

// "--strategy 2M4P2D", formatted only when a message needs it: a search checks every candidate
// and most pass, and formatting the label for each was a tenth of a search's enumeration. Always
// before a message's first ": ", so ViolationReport leaves it out of the key.
struct StrategyLabel {
  const Strategy& strategy;
};

// "--cp 2 --cp-comm-type a2a", the context-parallel checks' flags, formatted only in a message
// (it was formatted for every candidate with C > 1, valid ones too). Always before the first ": ".
struct CpFlag {
  const Strategy& strategy;
};

struct MessageReport {
  using Value = std::string;
  template <typename... T>
  std::optional<std::string> operator()(StrategyRule, fmt::format_string<T...> format,
                                        T&&... values) const {
    return fmt::format(format, std::forward<T>(values)...);
  }
};

struct ViolationReport {
  using Value = StrategyViolation;
  template <typename... T>
  std::optional<StrategyViolation> operator()(StrategyRule rule, fmt::format_string<T...>,
                                              T&&... values) const {
    uint64_t key = 14695981039346656037ull;  // FNV-1a over the values, each ended by a byte
    (mix(key, values), ...);
    return StrategyViolation{rule, key};
  }

 private:
  static void bytes(uint64_t& key, const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) key = (key ^ p[i]) * 1099511628211ull;
    key = (key ^ 0xffu) * 1099511628211ull;
  }
  static void mix(uint64_t&, const StrategyLabel&) {}
  static void mix(uint64_t&, const CpFlag&) {}
  static void mix(uint64_t& key, std::string_view text) { bytes(key, text.data(), text.size()); }
  static void mix(uint64_t& key, const std::string& text) { mix(key, std::string_view(text)); }
  static void mix(uint64_t& key, const char* text) { mix(key, std::string_view(text)); }
  template <typename N>
  requires std::is_arithmetic_v<N>
  static void mix(uint64_t& key, N value) { bytes(key, &value, sizeof value); }
};

}  // namespace evsim

template <>
struct fmt::formatter<evsim::StrategyLabel> : fmt::formatter<std::string_view> {
  auto format(const evsim::StrategyLabel& label, format_context& ctx) const {
    return fmt::format_to(ctx.out(), "--strategy {}", label.strategy.name());
  }
};

template <>
struct fmt::formatter<evsim::CpFlag> : fmt::formatter<std::string_view> {
  auto format(const evsim::CpFlag& flag, format_context& ctx) const {
    return fmt::format_to(ctx.out(), "--cp {} --cp-comm-type {}", flag.strategy.cp,
                          evsim::cpCommName(flag.strategy.cp_comm));
  }
};

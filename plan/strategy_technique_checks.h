#pragma once
// The checks strategyViolation (strategy_validation.cpp) runs on one technique each: context,
// expert parallelism, per-op checkpointing, the overlap flags and MoE communication. Apart from
// the core M/P/D, batch and schedule checks so that each file holds one kind of rule; shared only
// by those two files.

#include <fmt/format.h>

#include <optional>
#include <string>

#include "plan/strategy.h"

namespace evsim {

// "--strategy 2M4P2D", formatted only when a message needs it: a search checks every candidate
// and most pass, and formatting the label for each was a tenth of a search's enumeration.
struct StrategyLabel {
  const Strategy& strategy;
};

}  // namespace evsim

template <>
struct fmt::formatter<evsim::StrategyLabel> : fmt::formatter<std::string_view> {
  auto format(const evsim::StrategyLabel& label, format_context& ctx) const {
    return fmt::format_to(ctx.out(), "--strategy {}", label.strategy.name());
  }
};

namespace evsim {

std::optional<std::string> contextParallelViolation(const ModelConfig& model, const Strategy& s);
std::optional<std::string> opCheckpointViolation(const ModelConfig& model, const Strategy& s);
std::optional<std::string> expertParallelViolation(const ModelConfig& model, const Strategy& s);
std::optional<std::string> overlapViolation(const ModelConfig& model, const ClusterConfig& cluster,
                                            const Strategy& s, StrategyLabel label);
std::optional<std::string> moeCommViolation(const ClusterConfig& cluster, const Strategy& s,
                                            StrategyLabel label);

}  // namespace evsim

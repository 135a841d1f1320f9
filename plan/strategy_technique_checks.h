#pragma once
// The checks strategyViolation (strategy_validation.cpp) runs on one technique each: context,
// expert parallelism, per-op checkpointing, the overlap flags and MoE communication. Apart from
// the core M/P/D, batch and schedule checks so that each file holds one kind of rule; shared only
// by those two files. Each is a template over its report (strategy_check_report.h), instantiated
// for ViolationReport and MessageReport in strategy_technique_checks.cpp.

#include <optional>

#include "plan/strategy.h"
#include "plan/strategy_check_report.h"

namespace evsim {

template <typename Report>
std::optional<typename Report::Value> contextParallelCheck(const ModelConfig& model,
                                                           const Strategy& s, const Report& report);
template <typename Report>
std::optional<typename Report::Value> opCheckpointCheck(const ModelConfig& model, const Strategy& s,
                                                        const Report& report);
template <typename Report>
std::optional<typename Report::Value> expertParallelCheck(const ModelConfig& model,
                                                          const Strategy& s, const Report& report);
template <typename Report>
std::optional<typename Report::Value> overlapCheck(const ModelConfig& model,
                                                   const ClusterConfig& cluster, const Strategy& s,
                                                   const Report& report);
template <typename Report>
std::optional<typename Report::Value> moeCommCheck(const ClusterConfig& cluster, const Strategy& s,
                                                   const Report& report);

}  // namespace evsim

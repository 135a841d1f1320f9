#pragma once
// A search's invalid candidates counted by rule (SearchReport::invalid_by_rule) without a message
// per candidate: each is counted under its violation (plan/strategy_rule.h: equal violations have
// the same rule text), and one message per distinct violation, its first candidate's, is formatted
// when the report is written. Both searches keep one per worker and merge them; the counts and
// examples are what one enumeration noting every candidate's message would give.

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"

namespace evsim {

struct SearchReport;

class InvalidTally {
 public:
  // One invalid candidate; `index` its place in the enumeration (the examples are the first).
  void add(const Strategy& strategy, const StrategyViolation& violation, size_t index);
  // Adds `other`'s candidates (another worker's part of the same enumeration).
  void merge(const InvalidTally& other);
  int64_t count() const { return count_; }
  // Sets report.invalid and, by rule text (violationRule), invalid_by_rule and the first
  // candidate's message as invalid_example ("<message> (b=<micro-batch>)").
  void report(const ModelConfig& model, const ClusterConfig& cluster, SearchReport& out) const;

 private:
  struct Entry {
    int64_t count = 0;
    size_t first_index = 0;
    Strategy first;  // the candidate whose message is the example
  };
  std::unordered_map<StrategyViolation, Entry, StrategyViolationHash> entries_;
  int64_t count_ = 0;
};

}  // namespace evsim

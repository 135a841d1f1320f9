#include "modeler/invalid_tally.h"

#include <fmt/format.h>

#include <map>
#include <string>

#include "modeler/pruned_search.h"
#include "modeler/search.h"

namespace evsim {

void InvalidTally::add(const Strategy& strategy, const StrategyViolation& violation, size_t index) {
  ++count_;
  auto [it, inserted] = entries_.try_emplace(violation);
  Entry& e = it->second;
  if (inserted) {
    e.first_index = index;
    e.first = strategy;
  }
  ++e.count;
  if (index < e.first_index) {  // a worker's candidates come in order; merged ones may not
    e.first_index = index;
    e.first = strategy;
  }
}

void InvalidTally::merge(const InvalidTally& other) {
  count_ += other.count_;
  for (const auto& [violation, theirs] : other.entries_) {
    auto [it, inserted] = entries_.try_emplace(violation, theirs);
    if (inserted) continue;
    Entry& mine = it->second;
    mine.count += theirs.count;
    if (theirs.first_index < mine.first_index) {
      mine.first_index = theirs.first_index;
      mine.first = theirs.first;
    }
  }
}

void InvalidTally::report(const ModelConfig& model, const ClusterConfig& cluster,
                          SearchReport& out) const {
  out.invalid = count_;
  std::map<std::string, size_t> first_of_rule;  // rule text -> its example's index
  for (const auto& [violation, e] : entries_) {
    const std::string message = violationMessage(model, cluster, e.first, violation);
    const std::string rule = violationRule(message);
    out.invalid_by_rule[rule] += e.count;
    auto [it, inserted] = first_of_rule.try_emplace(rule, e.first_index);
    if (inserted || e.first_index < it->second) {
      it->second = e.first_index;
      out.invalid_example[rule] = fmt::format("{} (b={})", message, e.first.micro_batch);
    }
  }
}

}  // namespace evsim

#include "modeler/invalid_tally.h"

#include <fmt/format.h>

#include "modeler/pruned_search.h"
#include "modeler/search.h"

namespace evsim {

int InvalidTally::noteRule(const std::string& message, int64_t micro_batch, size_t index) {
  auto [it, inserted] =
      rule_of_text_.try_emplace(violationRule(message), static_cast<int>(rules_.size()));
  if (inserted) rules_.push_back(Rule{0, index, fmt::format("{} (b={})", message, micro_batch)});
  Rule& rule = rules_[static_cast<size_t>(it->second)];
  if (index < rule.first_index) {
    rule.first_index = index;
    rule.example = fmt::format("{} (b={})", message, micro_batch);
  }
  return it->second;
}

void InvalidTally::add(const ModelConfig& model, const ClusterConfig& cluster,
                       const Strategy& strategy, const StrategyViolation& violation, size_t index) {
  ++count_;
  if (seen_.empty()) seen_.resize(kSeenSlots);
  Seen& seen = seen_[StrategyViolationHash{}(violation) & (kSeenSlots - 1)];
  if (seen.rule < 0 || !(seen.violation == violation)) {
    seen.violation = violation;
    seen.rule = noteRule(violationMessage(model, cluster, strategy, violation),
                         strategy.micro_batch, index);
  } else if (index < rules_[static_cast<size_t>(seen.rule)].first_index) {
    // Earlier than the rule's example (a worker's candidates come in order; this is for callers
    // whose do not): its message is the example.
    noteRule(violationMessage(model, cluster, strategy, violation), strategy.micro_batch, index);
  }
  ++rules_[static_cast<size_t>(seen.rule)].count;
}

void InvalidTally::merge(const InvalidTally& other) {
  count_ += other.count_;
  for (const auto& [text, r] : other.rule_of_text_) {
    const Rule& theirs = other.rules_[static_cast<size_t>(r)];
    auto [it, inserted] = rule_of_text_.try_emplace(text, static_cast<int>(rules_.size()));
    if (inserted) {
      rules_.push_back(theirs);
      continue;
    }
    Rule& mine = rules_[static_cast<size_t>(it->second)];
    mine.count += theirs.count;
    if (theirs.first_index < mine.first_index) {
      mine.first_index = theirs.first_index;
      mine.example = theirs.example;
    }
  }
}

void InvalidTally::report(SearchReport& out) const {
  out.invalid = count_;
  for (const auto& [text, r] : rule_of_text_) {
    const Rule& rule = rules_[static_cast<size_t>(r)];
    out.invalid_by_rule[text] += rule.count;
    out.invalid_example[text] = rule.example;
  }
}

}  // namespace evsim

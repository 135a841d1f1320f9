#pragma once
// A search's invalid candidates counted by rule (SearchReport::invalid_by_rule) without a message
// per candidate. Counts are kept per rule text (violationRule: the message without its numbers),
// so the tally holds one entry per rule however many values a space gives its rules (issue 34:
// keyed by violation, a space of 4,000 micro-batch sizes held an entry for every b x D). A small
// memo maps a violation (plan/strategy_rule.h: equal violations have the same rule text) to its
// rule's entry; a violation not in it has its message formatted once to find the rule. Both
// searches keep one tally per worker and merge them; the counts and examples are what one
// enumeration formatting every candidate's message would give.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"

namespace evsim {

struct SearchReport;

class InvalidTally {
 public:
  // One invalid candidate breaking `violation`; `index` its place in the enumeration (a rule's
  // example is its first candidate's message).
  void add(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& strategy,
           const StrategyViolation& violation, size_t index);
  // Adds `other`'s candidates (another worker's part of the same enumeration).
  void merge(const InvalidTally& other);
  int64_t count() const { return count_; }
  // Sets report.invalid, and by rule text invalid_by_rule and the first candidate's message as
  // invalid_example ("<message> (b=<micro-batch>)").
  void report(SearchReport& out) const;

 private:
  struct Rule {
    int64_t count = 0;
    size_t first_index = 0;
    std::string example;  // the first candidate's message and micro-batch
  };
  // The memo's slots (a power of two): a violation's slot is its hash's low bits, a later one
  // with the same bits takes it over. Ample for the bench spaces' distinct violations per rule
  // run (a miss formats one message: what the tally did once per distinct violation before).
  static constexpr size_t kSeenSlots = 256;
  struct Seen {
    StrategyViolation violation;
    int rule = -1;  // index into rules_, -1 while empty
  };
  // `index`'s candidate's entry under the rule of `message`, new or earlier.
  int noteRule(const std::string& message, int64_t micro_batch, size_t index);

  std::vector<Rule> rules_;
  std::map<std::string, int, std::less<>> rule_of_text_;  // rule text -> index into rules_
  std::vector<Seen> seen_;  // kSeenSlots once the first candidate is added
  int64_t count_ = 0;
};

}  // namespace evsim

// A search's invalid candidates counted by rule (modeler/invalid_tally.h) without a message
// each: the counts by rule text and the examples must be what formatting every candidate's
// message gives (violationRule of each, the first candidate of each rule as its example), in one
// enumeration (in order, or last to first: each rule's example moves to an earlier candidate) or
// split between workers and merged. The spaces break rules whose rule text carries
// a value besides numbers: the schedule's name (zbv / dualpipev need P >= 2), the recomputation's
// (--recompute-every 2 needs full), the model's.
#include "modeler/invalid_tally.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "modeler/pruned_search.h"
#include "modeler/search.h"
#include "support/test_support.h"

namespace evsim {
namespace {

struct Reference {
  int64_t invalid = 0;
  std::map<std::string, int64_t> by_rule;
  std::map<std::string, std::string> example;
};

// Every invalid candidate's message formatted, as the search did before it counted violations.
Reference formatEach(const ModelConfig& model, const ClusterConfig& cluster,
                     const std::vector<Candidate>& all) {
  Reference out;
  for (const Candidate& c : all) {
    if (!c.violation) continue;
    std::optional<std::string> message = strategyViolation(model, cluster, c.strategy);
    if (!message) message = crossNodeTpViolation(cluster, c.strategy);
    EXPECT_TRUE(message.has_value())
        << c.strategy.name() << c.strategy.techniques() << " b=" << c.strategy.micro_batch
        << " sched=" << scheduleName(c.strategy.schedule) << " rule "
        << static_cast<int>(c.violation->rule);
    if (!message) continue;
    ++out.invalid;
    const std::string rule = violationRule(*message);
    if (++out.by_rule[rule] == 1) {
      out.example[rule] = *message + " (b=" + std::to_string(c.strategy.micro_batch) + ")";
    }
  }
  return out;
}

void expectSame(const Reference& want, const SearchReport& got) {
  EXPECT_EQ(got.invalid, want.invalid);
  EXPECT_EQ(got.invalid_by_rule, want.by_rule);
  EXPECT_EQ(got.invalid_example, want.example);
}

void checkSpace(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                const StrategySpace& space, size_t min_rules) {
  const std::vector<Candidate> all = enumerateCandidates(model, cluster, base, space);
  const Reference want = formatEach(model, cluster, all);
  std::string rules;
  for (const auto& [rule, count] : want.by_rule) rules += "\n  " + rule;
  ASSERT_GE(want.by_rule.size(), min_rules) << rules;
  // Equal violations have equal rule texts (what the tally relies on).
  std::map<std::pair<int, uint64_t>, std::string> rule_of;
  for (const Candidate& c : all) {
    if (!c.violation) continue;
    const std::string rule =
        violationRule(violationMessage(model, cluster, c.strategy, *c.violation));
    auto [it, inserted] =
        rule_of.try_emplace({static_cast<int>(c.violation->rule), c.violation->key}, rule);
    EXPECT_EQ(it->second, rule) << c.strategy.name();
  }
  // One tally in enumeration order.
  InvalidTally one;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].violation) one.add(model, cluster, all[i].strategy, *all[i].violation, i);
  }
  SearchReport single;
  one.report(single);
  expectSame(want, single);
  // One tally last to first: every rule's example is replaced by each earlier candidate's.
  InvalidTally reversed;
  for (size_t i = all.size(); i-- > 0;) {
    if (all[i].violation) reversed.add(model, cluster, all[i].strategy, *all[i].violation, i);
  }
  SearchReport backwards;
  reversed.report(backwards);
  expectSame(want, backwards);
  // Three workers taking runs of 7 candidates in turn, merged last worker first.
  std::vector<InvalidTally> workers(3);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].violation) {
      workers[(i / 7) % 3].add(model, cluster, all[i].strategy, *all[i].violation, i);
    }
  }
  InvalidTally merged;
  for (size_t w = workers.size(); w-- > 0;) merged.merge(workers[w]);
  EXPECT_EQ(merged.count(), want.invalid);
  SearchReport split;
  merged.report(split);
  expectSame(want, split);
}

TEST(InvalidTallyTest, CountsAndExamplesAreThoseOfEveryMessage) {
  const ModelConfig moe = loadModelConfig(test::configPath("models", "tiny-moe"));
  const ClusterConfig local = loadClusterConfig(test::configPath("clusters", "cpu-local"));
  Strategy base;
  base.global_batch = 16;
  StrategySpace space;
  space.gpus = 4;
  space.micro_batches = {1, 2, 3};
  space.schedules = {Schedule::kDapple, Schedule::kZbh1, Schedule::kZbv, Schedule::kDualPipeV,
                     Schedule::kInterleaved};
  space.recomputes = {Recompute::kNone, Recompute::kFull, Recompute::kSelective};
  space.sequence_parallel = {false, true};
  space.zero_stages = {0, 1, 3};
  space.dp_overlaps = {false, true};
  space.context_parallel = {1, 2};
  space.expert_parallel = {1, 2};
  space.offloads = {Offload::kNone, Offload::kOptimizer, Offload::kActivations};
  checkSpace(moe, local, base, space, 5);
  // --recompute-every 2 with every recomputation mode: the rule's text names the mode.
  base.recompute_every = 2;
  checkSpace(moe, local, base, space, 3);
}

TEST(InvalidTallyTest, DenseModelOnNodesOfFour) {
  const ModelConfig bert = loadModelConfig(test::configPath("models", "bert-large"));
  const ClusterConfig a40 = loadClusterConfig(test::configPath("clusters", "a40-4x4"));
  Strategy base;
  base.global_batch = 24;
  StrategySpace space;
  space.gpus = 32;  // more than the cluster's 16: the GPU rule beside heads, layers, batch
  space.micro_batches = {1, 2, 4};
  space.schedules = {Schedule::kGpipe, Schedule::kZbv, Schedule::kDualPipeV};
  space.zero_stages = {0, 1};
  checkSpace(bert, a40, base, space, 3);
  space.gpus = 8;  // within the cluster: cross-node TP (8M) among the rules
  checkSpace(bert, a40, base, space, 2);
}

}  // namespace
}  // namespace evsim

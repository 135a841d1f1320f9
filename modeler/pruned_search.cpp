#include "modeler/pruned_search.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/units.h"
#include "modeler/equivalent_plans.h"
#include "modeler/pruned_search_state.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "plan/plan_core.h"
#include "plan/shape_cache.h"

namespace evsim::pruned {

// Ends a pass over the enumeration: simulates the pool best bound first. True when candidates
// set aside could still reach the top K, so the enumeration must run again for them (the next
// pass takes the range from the least set-aside key up).
bool PrunedSearch::endPass() {
  // The closed forms' memos (activation states, layer times) would sit beside the simulations,
  // whose peak is the search's: a further pass computes them again.
  for (Share& share : shares_) share.workspace.release();
  tier_.releaseShared();
  // So do the schedules' orders, states and graphs the pass kept per shape (shape_cache.h).
  releaseShapeCaches();
  while (simulateRound()) {
  }
  // Missing costs: the search ends in an error listing them; no need to find more.
  if (set_aside_ == 0 || missing_.size() > 0 || ceiling_.bound_us > limit()) {
    report_.pruned_by_bound += static_cast<int64_t>(pruned_in_pass_ + set_aside_);
    return false;
  }
  // The threshold was constant over the pass, and every key kept was below it: what it pruned
  // lies above the ceiling and is counted in the next pass.
  floor_ = ceiling_;
  ceiling_ = PoolKey{};
  set_aside_ = 0;
  pruned_in_pass_ = 0;
  ++pass_;
  ++report_.passes;
  return true;
}

// The report (throws for missing costs). After the last endPass().
SearchReport PrunedSearch::finish() {
  invalid_.report(model_, cluster_, report_);
  if (missing_.size() > 0) costs_.costAll(missing_);  // throws, listing all
  report_.pruned = true;
  report_.tokens_per_sample = model_.seq_length;
  report_.headroom = options_.memory_headroom;
  report_.capacity_bytes = cluster_.device.memoryBytes();
  report_.usable_bytes = static_cast<int64_t>(static_cast<double>(report_.capacity_bytes) *
                                              (1 - options_.memory_headroom));
  report_.valid = report_.ok + report_.oom;
  // Already collapsed (above): RankedRows numbers them.
  for (Ranked& r : top_) report_.candidates.add(std::move(r.result), r.index);
  report_.candidates.finish();
  return std::move(report_);
}

// The time a bound must not exceed to reach the top K (infinite until it is full).
double PrunedSearch::limit() const {
  if (top_.size() < static_cast<size_t>(options_.top_k)) {
    return std::numeric_limits<double>::infinity();
  }
  return top_.back().iteration_us * (1 + kBoundSlack);
}

// The candidate's row with the timing fields of `timing` (its own or an equal timing key's).
Ranked PrunedSearch::rankedRow(const Pending& candidate, const CandidateResult& timing) {
  Ranked r;
  r.iteration_us = timing.iteration_us;
  r.index = candidate.index;
  r.row_index = candidate.index;
  CandidateResult& c = r.result;
  c = timing;
  c.strategy = candidate.strategy;
  c.status = CandidateStatus::kOk;
  c.micro_batches = candidate.closed.micro_batches;
  c.peak_memory_bytes = candidate.closed.peak_memory_bytes;
  c.peak_memory_stage = candidate.closed.peak_memory_stage;
  return r;
}

// Simulates `candidate` unless its timeline before link sharing already ends after `limit_us`
// (simulateWithin: then `slower` and no row; the full time could only be longer).
Simulated PrunedSearch::simulateOne(const Pending& candidate, double limit_us) const {
  Simulated out;
  IterationPlan plan = buildIterationPlan(model_, cluster_, candidate.strategy, &cache_);
  std::vector<EventCost> event_costs;
  event_costs.reserve(plan.events.size());
  for (const UniqueEvent& u : plan.events.events()) {
    std::optional<EventCost> c = costs_.cost(u.event);
    if (!c) out.missing.push_back(u.event);
    event_costs.push_back(c.value_or(EventCost{}));
  }
  if (!out.missing.empty()) return out;
  EVSIM_CHECK(plan.micro_batches == candidate.closed.micro_batches, "{} micro-batches, {} closed",
              plan.micro_batches, candidate.closed.micro_batches);
  double unshared_us = 0;
  const std::optional<Simulation> sim =
      simulateWithin(std::move(plan), std::move(event_costs), limit_us, unshared_us);
  if (!sim) {
    out.slower = true;
    return out;
  }
  CandidateResult timing;
  setTiming(timing, sim->summary);
  out.ranked = rankedRow(candidate, timing);
  return out;
}

// The OOM candidate as the closed-form tier saw it (for the "what would make it fit" advice).
CandidateResult PrunedSearch::oomRow(const Strategy& strategy, const ClosedFormResult& closed) {
  CandidateResult c;
  c.strategy = strategy;
  c.status = CandidateStatus::kOom;
  c.micro_batches = closed.micro_batches;
  c.peak_memory_bytes = closed.peak_memory_bytes;
  c.peak_memory_stage = closed.peak_memory_stage;
  return c;
}

// Drops the pool's candidates above the threshold (pruned), then simulates its best bounds
// (one round) and ranks them. False when the pool was left empty before the round.
bool PrunedSearch::simulateRound() {
  const double bound_limit = limit();
  while (!pool_.empty() && std::prev(pool_.end())->bound_us > bound_limit) {
    pool_.erase(std::prev(pool_.end()));
    ++report_.pruned_by_bound;
  }
  if (pool_.empty()) return false;
  // The best bounds until the round holds `size` candidates that need a simulation of their
  // own (a timing key new to the round, neither simulated nor found too slow before), with the
  // candidates among them that take an earlier one's timing: a round gives every thread work
  // however many candidates share their keys. Until the top K is full, `size` is K - |top|:
  // a timing simulated gives one row at most (equal timings join one row), so no fewer can
  // fill it. Counting candidates instead left a round of 10 with 5 simulations, then rounds
  // of 3, 1, 1 while one thread waited (Llama 3.1 405B on 1,024 GPUs).
  const bool filling = std::isinf(bound_limit);
  const size_t size = filling ? static_cast<size_t>(options_.top_k) - top_.size() : kRoundSize;
  std::vector<Pending> round;
  // Only the first of each timing key not simulated before runs; the others take its timing
  // (or, when its unshared timeline was already too slow, are pruned with it).
  std::vector<Strategy> keys;
  std::vector<size_t> first;  // the round's first candidate of the same key
  std::vector<size_t> to_simulate;
  std::unordered_map<Strategy, size_t, TimingKeyHash> first_of_key;
  while (!pool_.empty() && to_simulate.size() < size) {
    const size_t j = round.size();
    round.push_back(std::move(pool_.extract(pool_.begin()).value()));
    keys.push_back(timingKey(model_, round[j].strategy));
    first.push_back(first_of_key.try_emplace(keys[j], j).first->second);
    if (first[j] == j && memo_.count(keys[j]) == 0 && slower_.count(keys[j]) == 0) {
      to_simulate.push_back(j);
    }
  }
  std::vector<Simulated> done(round.size());
  for (size_t j = 0; j < round.size(); ++j) {
    if (first[j] != j) continue;
    if (auto known = memo_.find(keys[j]); known != memo_.end()) {
      done[j].ranked = rankedRow(round[j], known->second);
    } else if (slower_.count(keys[j]) > 0) {
      done[j].slower = true;  // the threshold only falls: still too slow
    }
  }
  // Longest first (micro-batches x stages x chunks, the tasks to time), so that the threads
  // end together; each result goes to its candidate's slot, so the order changes no result.
  std::vector<size_t> longest_first = to_simulate;
  auto tasks = [&](size_t j) {
    const Strategy& s = round[j].strategy;
    return round[j].closed.micro_batches * s.pp * std::max(1, s.virtual_stages);
  };
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [&](size_t a, size_t b) { return tasks(a) > tasks(b); });
  parallelFor(longest_first.size(), options_.threads, [&](size_t i) {
    done[longest_first[i]] = simulateOne(round[longest_first[i]], bound_limit);
    // Its shape's orders, states and graph would sit beside the next simulations (a graph of
    // 2^16 tasks is ~4 MB): the two threads' simulations are the search's peak.
    releaseShapeCaches();
  });
  if (memo_.size() + to_simulate.size() > kTimingMemoCapacity) memo_.clear();
  if (slower_.size() + to_simulate.size() > kTimingMemoCapacity) slower_.clear();
  for (size_t j : to_simulate) {
    if (done[j].ranked) memo_.emplace(keys[j], done[j].ranked->result);
    if (done[j].slower) slower_.insert(keys[j]);
  }
  for (size_t j = 0; j < round.size(); ++j) {
    if (first[j] == j) continue;
    if (done[first[j]].slower) done[j].slower = true;
    if (!done[first[j]].ranked) continue;
    done[j].ranked = rankedRow(round[j], done[first[j]].ranked->result);
  }
  for (Simulated& d : done) {
    for (const Event& e : d.missing) missing_.intern(e);
    if (d.slower) ++report_.pruned_by_bound;
    if (!d.ranked) continue;
    ++report_.simulated;
    Ranked r = std::move(*d.ranked);
    // A plan that simulates like one already kept joins its row: the top K are K distinct
    // timelines, not one plan under several names.
    auto same = std::find_if(top_.begin(), top_.end(),
                             [&](const Ranked& t) { return sameOutcome(t.result, r.result); });
    if (same != top_.end()) {
      // As the exhaustive search collapses them: the group ranks at its first member in
      // enumeration order.
      same->index = std::min(same->index, r.index);
      mergeEquivalent(same->result, same->row_index, std::move(r.result), r.row_index);
      std::sort(top_.begin(), top_.end(), before);  // an earlier index may move it among ties
      ++report_.equivalent;
      continue;
    }
    auto at = std::upper_bound(top_.begin(), top_.end(), r, before);
    if (at - top_.begin() < options_.top_k) {
      top_.insert(at, std::move(r));
      if (top_.size() > static_cast<size_t>(options_.top_k)) top_.pop_back();
    }
  }
  return true;
}

}  // namespace evsim::pruned

namespace evsim {

std::string violationRule(std::string_view violation) {
  size_t colon = violation.find(": ");
  std::string_view rule = colon == std::string_view::npos ? violation : violation.substr(colon + 2);
  auto letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  std::string out;
  for (size_t i = 0; i < rule.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(rule[i]))) {
      out += rule[i];
      continue;
    }
    const size_t begin = i;
    while (i + 1 < rule.size() && std::isdigit(static_cast<unsigned char>(rule[i + 1]))) ++i;
    // A number stands alone; digits inside a name ("llama3-70b", "mixtral-8x7b") stay (issue 31).
    const bool in_word =
        (begin > 0 && letter(rule[begin - 1])) || (i + 1 < rule.size() && letter(rule[i + 1]));
    out += in_word ? std::string(rule.substr(begin, i + 1 - begin)) : std::string("N");
  }
  return out;
}

SearchReport runPrunedSearch(const ModelConfig& model, const ClusterConfig& cluster,
                             const CostModel& costs, const SearchOptions& options) {
  validateSearchOptions(options);
  if (options.top_k < 1) EVSIM_THROW(InputError, "--top {}: must be >= 1", options.top_k);
  pruned::PrunedSearch search(model, cluster, costs, options);
  search.runPass();
  while (search.endPass()) search.runPass();  // the invalid ones were counted in the first pass
  return search.finish();
}

}  // namespace evsim

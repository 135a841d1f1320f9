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
#include "modeler/candidate_stream.h"
#include "modeler/closed_form_tier.h"
#include "modeler/equivalent_plans.h"
#include "modeler/parallel_for.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "plan/plan_core.h"
#include "plan/shape_cache.h"

namespace evsim {

namespace {

// Fixed sizes, independent of the thread count, so that results are too. The pool holds the
// candidates that fit and whose bound is below the threshold, waiting to be simulated best bound
// first; a round is what one threshold applies to. Until the top K is full a round takes the best
// bounds until it holds K - |top| timing keys to simulate (the threshold is infinite).
constexpr size_t kRoundSize = 16;
// Valid candidates a worker enumerates before it evaluates them.
constexpr size_t kClosedFormBlock = 256;
// Sums in a different order differ by rounding: prune only clearly above the threshold.
constexpr double kBoundSlack = 1e-9;

struct Ranked {
  double iteration_us = 0;
  size_t index = 0;      // enumeration order, the tie-break (of a group's first member)
  size_t row_index = 0;  // enumeration order of the plan shown (equivalent_plans.h)
  CandidateResult result;
};

bool before(const Ranked& a, const Ranked& b) {
  if (a.iteration_us != b.iteration_us) return a.iteration_us < b.iteration_us;
  return a.index < b.index;
}

// A fitting candidate waiting to be simulated, ordered by bound, then enumeration order.
struct Pending {
  double bound_us = 0;
  size_t index = 0;
  Strategy strategy;
  ClosedFormResult closed;
};
// A candidate's place in the pool's order: (bound, enumeration index), unique per candidate.
struct PoolKey {
  double bound_us = std::numeric_limits<double>::infinity();
  size_t index = std::numeric_limits<size_t>::max();
};
bool operator<(const PoolKey& a, const PoolKey& b) {
  if (a.bound_us != b.bound_us) return a.bound_us < b.bound_us;
  return a.index < b.index;
}
PoolKey keyOf(const Pending& p) { return PoolKey{p.bound_us, p.index}; }
struct ByBound {
  bool operator()(const Pending& a, const Pending& b) const { return keyOf(a) < keyOf(b); }
};

// One simulated candidate, or the signatures of the events it lacks costs for.
struct Simulated {
  std::optional<Ranked> ranked;
  std::vector<Event> missing;
  bool slower = false;  // its timeline before link sharing ended after the threshold: pruned
};

// The timing fields of a simulated candidate (setTiming), kept per timing key (plan_core.h): a
// candidate whose key was simulated before takes them instead of simulating the same timeline
// again (selective recomputation beside none under fused attention; ZeRO-2 beside ZeRO-1 before
// session 19, when ZeRO-2 timed its reductions once per step).
struct TimingKeyHash {
  size_t operator()(const Strategy& s) const {
    size_t h = 0;
    for (int64_t x :
         {int64_t{s.tp}, int64_t{s.pp}, int64_t{s.dp}, int64_t{s.cp}, int64_t{s.ep}, s.micro_batch,
          static_cast<int64_t>(s.schedule), int64_t{s.virtual_stages},
          static_cast<int64_t>(s.recompute), int64_t{s.sequence_parallel}, int64_t{s.zero_stage},
          static_cast<int64_t>(s.offload), int64_t{s.dp_overlap}}) {
      h = h * 1000003u ^ std::hash<int64_t>{}(x);
    }
    return h;
  }
};
using TimingMemo = std::unordered_map<Strategy, CandidateResult, TimingKeyHash>;
// Entries kept (a few hundred bytes each); the memo is emptied when it would grow past them.
constexpr size_t kTimingMemoCapacity = 16384;

class PrunedSearch {
 public:
  PrunedSearch(const ModelConfig& model, const ClusterConfig& cluster, const CostModel& costs,
               const SearchOptions& options)
      : model_(model),
        cluster_(cluster),
        costs_(costs),
        options_(options),
        tier_(model, cluster, costs, options.memory_headroom, cache_),
        workers_(resolveThreads(options.threads)),
        shares_(workers_) {}

  // One pass over the enumeration, shared among the workers (candidate_stream.h): the closed-form
  // tier for every valid candidate; the fitting ones of this pass's range whose bound does not
  // exceed the threshold join the pool, which keeps the best `pool_capacity` bounds and sets the
  // others aside (pruned_search.h). Each worker keeps a pool of its own (no lock per candidate);
  // merged, they hold exactly what one pool fed in enumeration order would: the best
  // `pool_capacity` keys, the least key left out as the ceiling.
  void runPass() {
    const double bound_limit = limit();
    for (Share& share : shares_) share.startPass();
    shareCandidates(model_, cluster_, options_.base, options_.space, workers_,
                    [&](unsigned w, size_t index, Candidate&& c) {
                      visit(shares_[w], index, std::move(c), bound_limit);
                    });
    for (Share& share : shares_) {
      evaluateWaiting(share, bound_limit);  // the last few of each worker
      mergeShare(share);
    }
    while (pool_.size() > pool_capacity_) {
      auto worst = std::prev(pool_.end());
      ceiling_ = std::min(ceiling_, keyOf(*worst));
      pool_.erase(worst);
      ++set_aside_;
    }
  }

  // Ends a pass over the enumeration: simulates the pool best bound first. True when candidates
  // set aside could still reach the top K, so the enumeration must run again for them (the next
  // pass takes the range from the least set-aside key up).
  bool endPass() {
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
  SearchReport finish() {
    report_.invalid = invalid_.invalid;
    report_.invalid_by_rule = std::move(invalid_.invalid_by_rule);
    report_.invalid_example = std::move(invalid_.invalid_example);
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

 private:
  // A valid candidate waiting for the closed-form tier: a worker evaluates them kClosedFormBlock
  // at a time, not between the enumeration's steps (their memory is the tier's, not the
  // enumeration's, and interleaving them cost ~10% of the time at one thread).
  struct Waiting {
    size_t index = 0;
    Strategy strategy;
  };
  // One worker's part of a pass: its workspace (kept across passes), pool and counts.
  struct Share {
    std::vector<Waiting> waiting;
    ClosedFormTier::Workspace workspace;
    std::set<Pending, ByBound> pool;
    PoolKey ceiling;  // the least key this worker set aside
    size_t set_aside = 0, pruned = 0;
    int64_t closed_form = 0, oom = 0, ok = 0;
    // The first pass's invalid candidates (counts, rules, the first example of each rule) and the
    // index of each rule's example; the closest OOM candidate and its index.
    SearchReport invalid;
    std::map<std::string, size_t> example_index;
    std::optional<CandidateResult> closest_oom;
    size_t closest_oom_index = 0;

    void startPass() {
      waiting.clear();
      pool.clear();
      ceiling = PoolKey{};
      set_aside = pruned = 0;
    }
  };

  // One candidate on the worker of `share`: an invalid one noted, a valid one left waiting.
  void visit(Share& share, size_t index, Candidate&& c, double bound_limit) const {
    if (!c.violation) {
      share.waiting.push_back(Waiting{index, std::move(c.strategy)});
      if (share.waiting.size() == kClosedFormBlock) evaluateWaiting(share, bound_limit);
      return;
    }
    if (pass_ > 0) return;  // counted in the first pass
    const size_t rules = share.invalid.invalid_example.size();
    ++share.invalid.invalid;
    share.invalid.noteInvalid(c.strategy, *c.violation);
    if (share.invalid.invalid_example.size() > rules) {  // the first of its rule here
      share.example_index.emplace(violationRule(*c.violation), index);
    }
  }

  // The closed-form tier over the worker's waiting candidates, each then as the pass's single
  // pool would take it.
  void evaluateWaiting(Share& share, double bound_limit) const {
    for (Waiting& w : share.waiting) evaluateOne(share, w.index, std::move(w.strategy), bound_limit);
    share.waiting.clear();
  }

  void evaluateOne(Share& share, size_t index, Strategy&& strategy, double bound_limit) const {
    const ClosedFormResult closed = tier_.evaluate(strategy, share.workspace);
    if (pass_ == 0) {  // counted once, in the first pass
      ++share.closed_form;
      if (!closed.fits) {
        ++share.oom;
        // Strictly closer, as SearchReport::noteOom: the first in index order among ties.
        if (!share.closest_oom || closed.peak_memory_bytes < share.closest_oom->peak_memory_bytes) {
          share.closest_oom = oomRow(strategy, closed);
          share.closest_oom_index = index;
        }
        return;
      }
      ++share.ok;
    } else if (!closed.fits) {
      return;
    }
    const PoolKey key{closed.lower_bound_us, index};
    if (key < floor_) return;  // an earlier pass's: simulated or pruned there
    if (closed.lower_bound_us > bound_limit) {
      ++share.pruned;
      return;
    }
    if (!(key < share.ceiling)) {  // worse than one set aside already: set aside too
      ++share.set_aside;
      return;
    }
    share.pool.insert(Pending{key.bound_us, key.index, std::move(strategy), closed});
    if (share.pool.size() > pool_capacity_) {
      // The worst bound leaves; everything at or above it waits for the next pass.
      auto worst = std::prev(share.pool.end());
      share.ceiling = keyOf(*worst);
      share.pool.erase(worst);
      ++share.set_aside;
    }
  }

  // Adds a worker's pass to the search's pool and counts. Counts and rules are sums; examples
  // and the closest OOM candidate are the first in enumeration order, as one enumeration gives.
  void mergeShare(Share& share) {
    pool_.merge(share.pool);
    ceiling_ = std::min(ceiling_, share.ceiling);
    set_aside_ += share.set_aside;
    pruned_in_pass_ += share.pruned;
    if (pass_ > 0) return;
    report_.closed_form += share.closed_form;
    report_.oom += share.oom;
    report_.ok += share.ok;
    if (share.closest_oom &&
        (!report_.closest_oom ||
         share.closest_oom->peak_memory_bytes < report_.closest_oom->peak_memory_bytes ||
         (share.closest_oom->peak_memory_bytes == report_.closest_oom->peak_memory_bytes &&
          share.closest_oom_index < closest_oom_index_))) {
      report_.closest_oom = std::move(share.closest_oom);
      closest_oom_index_ = share.closest_oom_index;
    }
    invalid_.invalid += share.invalid.invalid;
    for (const auto& [rule, count] : share.invalid.invalid_by_rule) {
      invalid_.invalid_by_rule[rule] += count;
      const size_t at = share.example_index.at(rule);
      auto [it, inserted] = example_index_.try_emplace(rule, at);
      if (inserted || at < it->second) {
        it->second = at;
        invalid_.invalid_example[rule] = share.invalid.invalid_example.at(rule);
      }
    }
    share.invalid = SearchReport{};
    share.example_index.clear();
    share.closest_oom.reset();
  }

  // The time a bound must not exceed to reach the top K (infinite until it is full).
  double limit() const {
    if (top_.size() < static_cast<size_t>(options_.top_k)) {
      return std::numeric_limits<double>::infinity();
    }
    return top_.back().iteration_us * (1 + kBoundSlack);
  }

  // The candidate's row with the timing fields of `timing` (its own or an equal timing key's).
  static Ranked rankedRow(const Pending& candidate, const CandidateResult& timing) {
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
  Simulated simulateOne(const Pending& candidate, double limit_us) const {
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
  static CandidateResult oomRow(const Strategy& strategy, const ClosedFormResult& closed) {
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
  bool simulateRound() {
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

  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const CostModel& costs_;
  const SearchOptions& options_;
  mutable PlanCache cache_{8};
  ClosedFormTier tier_;
  unsigned workers_;
  std::vector<Share> shares_;  // one per worker thread
  std::set<Pending, ByBound> pool_;  // keys in [floor_, ceiling_), at most pool_capacity_
  size_t pool_capacity_ = std::max<size_t>(options_.pool_capacity, 1);
  // This pass's range of pool keys: below floor_ an earlier pass decided; from ceiling_ up,
  // set_aside_ fitting candidates wait for the next pass (ceiling_ only falls within a pass).
  PoolKey floor_{-std::numeric_limits<double>::infinity(), 0};
  PoolKey ceiling_;
  size_t set_aside_ = 0;
  size_t pruned_in_pass_ = 0;  // by the threshold on joining the pool
  int pass_ = 0;
  std::vector<Ranked> top_;  // best first, at most top_k
  TimingMemo memo_;
  // Timing keys whose timeline before link sharing ended after the threshold of their round.
  std::unordered_set<Strategy, TimingKeyHash> slower_;
  EventTable missing_;
  SearchReport report_;
  // The first pass's invalid candidates, merged over the workers, and each rule's example's index.
  SearchReport invalid_;
  std::map<std::string, size_t> example_index_;
  size_t closest_oom_index_ = 0;
};

}  // namespace

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
  PrunedSearch search(model, cluster, costs, options);
  search.runPass();
  while (search.endPass()) search.runPass();  // the invalid ones were counted in the first pass
  return search.finish();
}

}  // namespace evsim

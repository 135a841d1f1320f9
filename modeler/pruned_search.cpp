#include "modeler/pruned_search.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_set>

#include "common/error.h"
#include "common/units.h"
#include "plan/iteration_plan.h"
#include "plan/plan_cache.h"
#include "modeler/closed_form_tier.h"
#include "modeler/parallel_for.h"
#include "modeler/simulation.h"

namespace evsim {

namespace {

// Fixed sizes, independent of the thread count, so that results are too. A batch bounds memory
// (candidates and their closed-form results); a round is what one threshold applies to.
// Until the top K is full the first round is K candidates (the threshold is infinite before).
constexpr size_t kBatchSize = 4096;
constexpr size_t kRoundSize = 32;
// Sums in a different order differ by rounding: prune only clearly above the threshold.
constexpr double kBoundSlack = 1e-9;

struct Ranked {
  double iteration_us = 0;
  size_t index = 0;  // enumeration order, the tie-break
  CandidateResult result;
};

bool before(const Ranked& a, const Ranked& b) {
  if (a.iteration_us != b.iteration_us) return a.iteration_us < b.iteration_us;
  return a.index < b.index;
}

// One simulated candidate, or the signatures of the events it lacks costs for.
struct Simulated {
  std::optional<Ranked> ranked;
  std::vector<Event> missing;
};

class PrunedSearch {
 public:
  PrunedSearch(const ModelConfig& model, const ClusterConfig& cluster, const CostModel& costs,
               const SearchOptions& options)
      : model_(model),
        cluster_(cluster),
        costs_(costs),
        options_(options),
        tier_(model, cluster, costs, options.memory_headroom, cache_) {}

  void add(Candidate&& candidate) {
    batch_.push_back(std::move(candidate));
    if (batch_.size() == kBatchSize) flush();
  }

  // Processes the last batch and returns the report (throws for missing costs).
  SearchReport finish() {
    flush();
    if (missing_.size() > 0) costs_.costAll(missing_);  // throws, listing all
    report_.pruned = true;
    report_.headroom = options_.memory_headroom;
    report_.capacity_bytes = cluster_.device.memoryBytes();
    report_.usable_bytes = static_cast<int64_t>(static_cast<double>(report_.capacity_bytes) *
                                                (1 - options_.memory_headroom));
    report_.valid = report_.ok + report_.oom;
    int rank = 0;
    for (Ranked& r : top_) {
      r.result.rank = ++rank;
      if (worst_samples_per_s_ > 0) {
        r.result.speedup_over_worst = r.result.samples_per_s / worst_samples_per_s_;
      }
      report_.candidates.push_back(std::move(r.result));
    }
    return std::move(report_);
  }

 private:
  double threshold() const {
    if (top_.size() < static_cast<size_t>(options_.top_k)) {
      return std::numeric_limits<double>::infinity();
    }
    return top_.back().iteration_us;
  }

  Simulated simulateOne(const Candidate& candidate, const ClosedFormResult& closed) const {
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
    const int64_t micro_batches = plan.micro_batches;
    Simulation sim = simulate(std::move(plan), std::move(event_costs));
    Ranked r;
    r.iteration_us = sim.summary.iteration_us;
    CandidateResult& c = r.result;
    c.strategy = candidate.strategy;
    c.status = CandidateStatus::kOk;
    c.micro_batches = micro_batches;
    c.peak_memory_bytes = closed.peak_memory_bytes;
    c.peak_memory_stage = closed.peak_memory_stage;
    c.iteration_us = sim.summary.iteration_us;
    c.samples_per_s = sim.summary.samples_per_s;
    c.bubble_fraction = sim.summary.bubble_fraction;
    c.model_tflops_per_gpu = sim.summary.flops_per_gpu_per_s / kFlopsPerTflop;
    c.mfu = sim.summary.mfu;
    c.provenance_share = sim.summary.provenance_share;
    out.ranked = std::move(r);
    return out;
  }

  // The OOM candidate as the closed-form tier saw it (for the "what would make it fit" advice).
  void noteOom(const Strategy& strategy, const ClosedFormResult& closed) {
    if (report_.closest_oom && report_.closest_oom->peak_memory_bytes <= closed.peak_memory_bytes) {
      return;  // not closer: no copy
    }
    CandidateResult c;
    c.strategy = strategy;
    c.status = CandidateStatus::kOom;
    c.micro_batches = closed.micro_batches;
    c.peak_memory_bytes = closed.peak_memory_bytes;
    c.peak_memory_stage = closed.peak_memory_stage;
    report_.noteOom(c);
  }

  void flush() {
    const size_t n = batch_.size();
    if (n == 0) return;
    std::vector<ClosedFormResult> closed(n);
    parallelFor(n, options_.threads, [&](size_t i) {
      if (!batch_[i].violation) closed[i] = tier_.evaluate(batch_[i].strategy);
    });
    std::vector<size_t> fitting;
    for (size_t i = 0; i < n; ++i) {
      if (batch_[i].violation) {
        ++report_.invalid;
        report_.noteInvalid(batch_[i].strategy, *batch_[i].violation);
        continue;
      }
      ++report_.closed_form;
      if (closed[i].fits) {
        ++report_.ok;
        fitting.push_back(i);
      } else {
        ++report_.oom;
        noteOom(batch_[i].strategy, closed[i]);
      }
    }
    // Most promising first, so the threshold tightens early.
    std::sort(fitting.begin(), fitting.end(), [&](size_t a, size_t b) {
      if (closed[a].lower_bound_us != closed[b].lower_bound_us) {
        return closed[a].lower_bound_us < closed[b].lower_bound_us;
      }
      return a < b;
    });
    for (size_t start = 0, size = 0; start < fitting.size(); start += size) {
      const double limit = threshold() * (1 + kBoundSlack);
      size = std::isinf(limit) ? static_cast<size_t>(options_.top_k) - top_.size() : kRoundSize;
      std::vector<size_t> round;
      for (size_t j = start; j < std::min(fitting.size(), start + size); ++j) {
        if (closed[fitting[j]].lower_bound_us > limit) break;
        round.push_back(fitting[j]);
      }
      if (round.empty()) {  // sorted by bound: everything after is above the limit too
        report_.pruned_by_bound += static_cast<int64_t>(fitting.size() - start);
        break;
      }
      std::vector<Simulated> done(round.size());
      parallelFor(round.size(), options_.threads,
                  [&](size_t j) { done[j] = simulateOne(batch_[round[j]], closed[round[j]]); });
      for (size_t j = 0; j < round.size(); ++j) {
        for (const Event& e : done[j].missing) missing_.intern(e);
        if (!done[j].ranked) continue;
        ++report_.simulated;
        Ranked r = std::move(*done[j].ranked);
        r.index = first_index_ + round[j];
        if (worst_samples_per_s_ == 0 || r.result.samples_per_s < worst_samples_per_s_) {
          worst_samples_per_s_ = r.result.samples_per_s;
        }
        auto at = std::upper_bound(top_.begin(), top_.end(), r, before);
        if (at - top_.begin() < options_.top_k) {
          top_.insert(at, std::move(r));
          if (top_.size() > static_cast<size_t>(options_.top_k)) top_.pop_back();
        }
      }
      // A round cut short by the limit leaves the rest of this batch pruned.
      if (round.size() < std::min(size, fitting.size() - start)) {
        report_.pruned_by_bound += static_cast<int64_t>(fitting.size() - start - round.size());
        break;
      }
    }
    first_index_ += n;
    batch_.clear();
  }

  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const CostModel& costs_;
  const SearchOptions& options_;
  mutable PlanCache cache_;
  ClosedFormTier tier_;
  std::vector<Candidate> batch_;
  size_t first_index_ = 0;   // enumeration index of batch_[0]
  std::vector<Ranked> top_;  // best first, at most top_k
  double worst_samples_per_s_ = 0;
  EventTable missing_;
  SearchReport report_;
};

}  // namespace

std::string violationRule(std::string_view violation) {
  size_t colon = violation.find(": ");
  std::string_view rule = colon == std::string_view::npos ? violation : violation.substr(colon + 2);
  std::string out;
  for (size_t i = 0; i < rule.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(rule[i]))) {
      while (i + 1 < rule.size() && std::isdigit(static_cast<unsigned char>(rule[i + 1]))) ++i;
      out += 'N';
    } else {
      out += rule[i];
    }
  }
  return out;
}

SearchReport runPrunedSearch(const ModelConfig& model, const ClusterConfig& cluster,
                             const CostModel& costs, const SearchOptions& options) {
  validateSearchOptions(options);
  if (options.top_k < 1) EVSIM_THROW(InputError, "--top {}: must be >= 1", options.top_k);
  PrunedSearch search(model, cluster, costs, options);
  forEachCandidate(model, cluster, options.base, options.space,
                   [&](Candidate&& c) { search.add(std::move(c)); });
  return search.finish();
}

}  // namespace evsim

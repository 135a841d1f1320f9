#include "modeler/search.h"

#include <algorithm>
#include <optional>

#include "common/error.h"
#include "common/units.h"
#include "modeler/closed_form_tier.h"
#include "modeler/equivalent_plans.h"
#include "modeler/invalid_tally.h"
#include "modeler/parallel_for.h"
#include "modeler/pruned_search.h"
#include "modeler/simulation.h"
#include "modeler/worker_team.h"
#include "plan/iteration_plan.h"

namespace evsim {

std::string_view candidateStatusName(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kOk:
      return "ok";
    case CandidateStatus::kOom:
      return "OOM";
    case CandidateStatus::kInvalid:
      return "invalid";
  }
  return "?";
}

const CandidateResult* SearchReport::best() const { return candidates.best(); }

void setTiming(CandidateResult& r, const SimulationSummary& summary) {
  r.iteration_us = summary.iteration_us;
  r.samples_per_s = summary.samples_per_s;
  r.bubble_fraction = summary.bubble_fraction;
  r.model_tflops_per_gpu = summary.flops_per_gpu_per_s / kFlopsPerTflop;
  r.mfu = summary.mfu;
  r.provenance_share = summary.provenance_share;
}

double SearchReport::timeVsBest(const CandidateResult& r) const {
  const CandidateResult* b = best();
  return b && b->iteration_us > 0 ? r.iteration_us / b->iteration_us : 0;
}

void SearchReport::noteOom(const CandidateResult& candidate) {
  if (!closest_oom || candidate.peak_memory_bytes < closest_oom->peak_memory_bytes) {
    closest_oom = candidate;
  }
}

void validateSearchOptions(const SearchOptions& options) {
  const StrategySpace& space = options.space;
  if (space.gpus <= 0) EVSIM_THROW(InputError, "--gpus {}: must be > 0", space.gpus);
  if (space.micro_batches.empty()) EVSIM_THROW(InputError, "--micro-batch: no sizes given");
  for (int64_t b : space.micro_batches) {
    if (b <= 0) EVSIM_THROW(InputError, "--micro-batch {}: must be > 0", b);
  }
  if (space.schedules.empty()) EVSIM_THROW(InputError, "--schedule: no schedule given");
  if (space.recomputes.empty()) EVSIM_THROW(InputError, "--recompute: no mode given");
  if (space.sequence_parallel.empty()) {
    EVSIM_THROW(InputError, "--sequence-parallel: no setting given");
  }
  if (space.zero_stages.empty()) EVSIM_THROW(InputError, "--zero: no stage given");
  for (int zero : space.zero_stages) {
    if (zero < 0 || zero > 3) EVSIM_THROW(InputError, "--zero {}: must be 0, 1, 2 or 3", zero);
  }
  if (space.offloads.empty()) EVSIM_THROW(InputError, "--offload: no setting given");
  for (int c : space.context_parallel) {
    if (c < 1) EVSIM_THROW(InputError, "--cp {}: must be >= 1", c);
  }
  for (int e : space.expert_parallel) {
    if (e < 1) EVSIM_THROW(InputError, "--ep {}: must be >= 1", e);
  }
  if (space.uneven_stage_shift < 0 || space.uneven_stage_shift > 1024) {
    EVSIM_THROW(InputError, "--uneven-stages {}: must be in 0..1024", space.uneven_stage_shift);
  }
  for (int v : space.virtual_stages) {
    if (v < 2)
      EVSIM_THROW(InputError, "--virtual-stages {}: the interleaved schedule needs v >= 2", v);
  }
  if (!(options.memory_headroom >= 0 && options.memory_headroom < 1)) {
    EVSIM_THROW(InputError, "--memory-headroom {}: must be in [0, 1)", options.memory_headroom);
  }
  if (options.base.global_batch <= 0) {
    EVSIM_THROW(InputError, "--global-batch {}: must be > 0", options.base.global_batch);
  }
}

namespace {

// Candidates enumerated per batch: the batch's closed-form tier and simulations run in parallel,
// then its rows go to the report in enumeration order.
constexpr size_t kBatchCandidates = 4096;

struct Indexed {
  Candidate candidate;
  size_t index = 0;
};

}  // namespace

SearchReport runSearch(const ModelConfig& model, const ClusterConfig& cluster,
                       const CostModel& costs, const SearchOptions& options) {
  validateSearchOptions(options);
  const StrategySpace& space = options.space;
  // Every batch's parallel region runs on these threads, the caller's among them, not on threads
  // started for each batch (worker_team.h: a fresh thread starts on its creator's core).
  WorkerTeam team(resolveThreads(options.threads));
  const WorkerTeam::Use use(team);

  SearchReport report;
  report.candidates = RankedRows(options.rows_in_memory);
  report.tokens_per_sample = model.seq_length;
  report.headroom = options.memory_headroom;
  report.capacity_bytes = cluster.device.memoryBytes();
  report.usable_bytes = static_cast<int64_t>(static_cast<double>(report.capacity_bytes) *
                                             (1 - options.memory_headroom));
  // Partitions, placements and plan cores shared by the candidates' plans.
  PlanCache cache(PlanCache::kDefaultCoreCapacity, PlanCache::Lookups::kSearch);
  // Memory from the closed-form tier first (the plan's own estimate, closed_form_tier.h): OOM
  // candidates build no plan. A fitting candidate's plan is simulated at once and freed, so at
  // most one plan per thread is alive.
  ClosedFormTier tier(model, cluster, costs, options.memory_headroom, cache);
  std::vector<ClosedFormTier::Workspace> workspaces(resolveThreads(options.threads));
  EventTable missing;  // the events fitting candidates lack costs for, in candidate order
  InvalidTally invalid;

  std::vector<Indexed> batch;
  std::vector<CandidateResult> results;
  std::vector<std::vector<Event>> batch_missing;
  auto runBatch = [&] {
    const size_t n = batch.size();
    results.assign(n, CandidateResult{});
    batch_missing.assign(n, {});
    parallelForWorkers(n, options.threads, /*block=*/32, [&](size_t i, unsigned w) {
      CandidateResult& r = results[i];
      Candidate& c = batch[i].candidate;
      r.strategy = std::move(c.strategy);
      if (c.violation) {
        r.status = CandidateStatus::kInvalid;
        r.violation = violationMessage(model, cluster, r.strategy, *c.violation);  // the row's
        return;
      }
      const ClosedFormResult closed = tier.evaluate(r.strategy, workspaces[w]);
      r.micro_batches = closed.micro_batches;
      r.peak_memory_bytes = closed.peak_memory_bytes;
      r.peak_memory_stage = closed.peak_memory_stage;
      r.status = closed.fits ? CandidateStatus::kOk : CandidateStatus::kOom;
      if (r.status != CandidateStatus::kOk) return;
      IterationPlan plan = buildIterationPlan(model, cluster, r.strategy, &cache);
      std::vector<EventCost> event_costs;
      event_costs.reserve(plan.events.size());
      for (const UniqueEvent& u : plan.events.events()) {
        std::optional<EventCost> cost = costs.cost(u.event);
        if (!cost) batch_missing[i].push_back(u.event);
        event_costs.push_back(cost.value_or(EventCost{}));
      }
      if (!batch_missing[i].empty()) return;
      setTiming(r, simulate(std::move(plan), std::move(event_costs)).summary);
    });
    // In enumeration order: the counts, the rules' first examples, the closest OOM and the
    // missing events come out as a serial pass would give them.
    for (size_t i = 0; i < n; ++i) {
      CandidateResult& r = results[i];
      for (const Event& e : batch_missing[i]) missing.intern(e);
      switch (r.status) {
        case CandidateStatus::kOk:
          ++report.ok;
          break;
        case CandidateStatus::kOom:
          ++report.oom;
          report.noteOom(r);
          break;
        case CandidateStatus::kInvalid:
          invalid.add(model, cluster, r.strategy, *batch[i].candidate.violation, batch[i].index);
          break;
      }
      // Once an event lacks a cost the search throws at the end: no row need be kept.
      if (missing.size() == 0) report.candidates.add(std::move(r), batch[i].index);
    }
    batch.clear();
  };
  size_t index = 0;
  forEachCandidate(model, cluster, options.base, space, [&](Candidate&& c) {
    batch.push_back(Indexed{std::move(c), index++});
    if (batch.size() == kBatchCandidates) runBatch();
  });
  if (!batch.empty()) runBatch();
  // Every event of every fitting candidate must have a cost: the missing ones listed once, in
  // candidate order.
  if (missing.size() > 0) costs.costAll(missing);  // throws, listing them all

  invalid.report(report);
  report.valid = report.ok + report.oom;
  // Ties keep enumeration order (M, then P, then b, then schedule, then techniques); equivalent
  // plans collapse into one row (equivalent_plans.h), which numbers the ranks.
  report.equivalent = report.candidates.finish(collapseEquivalents);
  return report;
}

}  // namespace evsim

#include "modeler/pruned_search.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/units.h"
#include "modeler/equivalent_plans.h"
#include "modeler/link_flows.h"
#include "modeler/lone_tasks.h"
#include "modeler/network/link_sharing.h"
#include "modeler/parallel_profile.h"
#include "modeler/parallel_within_budget.h"
#include "modeler/pruned_search_state.h"
#include "modeler/simulation.h"
#include "modeler/simulation_in_place.h"
#include "modeler/worker_team.h"
#include "plan/iteration_plan.h"
#include "plan/plan_core.h"
#include "plan/shape_cache.h"
#include "plan/task_graph.h"

namespace evsim::pruned {

// Ends a pass over the enumeration (runPass has freed what it kept for the closed forms):
// simulates the pool best bound first. True when candidates set aside could still reach the top
// K, so the enumeration must run again for them (the next pass takes the range from the least
// set-aside key up).
bool PrunedSearch::endPass() {
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
  scratch_.clear();  // after the last round: no worker holds or returns a scratch
  invalid_.report(report_);
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
// (simulateWithin: then `slower` and no row; the full time could only be longer). With
// `unshared_only`, that timeline alone: its iteration time in `unshared_us` (a row only where it
// is infinite, which the sharing pass does not change and summarize() refuses).
Simulated PrunedSearch::simulateOne(const Pending& candidate, double limit_us,
                                    bool unshared_only) const {
  Simulated out;
  std::unique_ptr<Simulation> sim = takeScratch();
  IterationPlan& plan = sim->plan;
  rebuildIterationPlan(candidate.strategy, cache_, plan);
  std::vector<EventCost>& event_costs = sim->costs;
  event_costs.clear();
  event_costs.reserve(plan.events.size());
  for (const UniqueEvent& u : plan.events.events()) {
    std::optional<EventCost> c = costs_.cost(u.event);
    if (!c) out.missing.push_back(u.event);
    event_costs.push_back(c.value_or(EventCost{}));
  }
  if (!out.missing.empty()) {
    giveBackScratch(std::move(sim));
    return out;
  }
  EVSIM_CHECK(plan.micro_batches == candidate.closed.micro_batches, "{} micro-batches, {} closed",
              plan.micro_batches, candidate.closed.micro_batches);
  if (unshared_only) out.sharing_flows = sharingFlowCount(plan, event_costs);
  double unshared_us = 0;
  if (!simulateWithinInPlace(*sim,
                             unshared_only ? std::numeric_limits<double>::lowest() : limit_us,
                             unshared_us)) {
    if (unshared_only) {
      out.unshared_us = unshared_us;
    } else {
      out.slower = true;
    }
  } else {
    CandidateResult timing;
    setTiming(timing, sim->summary);
    out.ranked = rankedRow(candidate, timing);
  }
  giveBackScratch(std::move(sim));
  return out;
}

std::unique_ptr<Simulation> PrunedSearch::takeScratch() const {
  if (std::unique_ptr<Simulation> sim = scratch_.take()) return sim;
  auto sim = std::make_unique<Simulation>();
  sim->plan.model = model_;  // once per worker and search, not per plan
  sim->plan.cluster = cluster_;
  return sim;
}

void PrunedSearch::giveBackScratch(std::unique_ptr<Simulation> sim) const {
  // The timing's arrays (the timeline, link sharing's stretches) are the simulation's bulk and
  // are not filled in place: freed now, as a simulation of its own freed them.
  sim->input = TimingInput{};
  sim->timeline = IterationTimeline{};
  sim->task_link_stretch = {};
  scratch_.put(std::move(sim));
}

namespace {

// The tasks a simulation of `candidate` times: micro-batches x virtual stages x phases.
double tasksOf(const Pending& candidate) {
  const Strategy& s = candidate.strategy;
  const int phases = pipelineSchedule(s.schedule).splitsBackward() ? 3 : 2;
  return static_cast<double>(candidate.closed.micro_batches) * s.pp *
         std::max(1, s.virtual_stages) * phases;
}

}  // namespace

// A simulation's memory at its largest, estimated for the round's budget. A first pass holds per
// task the task graph's node, about 1.5 edges and its send code; while the graph is built, the
// node's id slot and the schedule's order entry; then the timing engine's record and output, and
// under DP overlap a bucket mark: 88 bytes (161 before session 25 shrank the node, the edge and the
// record, bench/RESULTS.md, session 25, rec34d), plus a device's overlap slowdowns (a double a
// task, kept for every task of a device once any of its tasks overlaps a collective: most searched
// plans overlap their DP reductions, so it is always counted). A sharing pass (`full`) frees the
// timeline's records as it lists their flows, and is at its largest while the links are shared:
// per task the graph (27 bytes; let go since session 27 above the size kept cached, below), the
// run a lone task's retiming reads, its run of flows' index and its send and task stretches (8
// each), and per flow its start, shape and link sharing's slot (14 bytes) and the start order's
// record of the run it came from (1 byte up to 256 runs; the search's passes have 16-64). Measured
// without that record (heap in use at its peak less at its start, one thread, Llama 3.1 405B on
// 1,024 GPUs, 16,384-131,072 tasks and 0.47-1.03 M flows: 8.4-23.4 MB; bench/RESULTS.md, session
// 25, rec34d) a fit gave ~55 bytes a task and ~16 a flow (session 24: 140 and 12, with the larger
// records). Since session 27 (budget27) the task graph is let go while the links are shared and a
// schedule's orders of more than 65,536 tasks are not kept (plan/schedules/registry.cpp): the
// 131,072-task, 1.03 M-flow pass peaks at 20.1-21.2 MB, not 22.2-24.9, so 28 a task and 16 + 1 a
// flow; and a pass is at least what its timings hold (a first pass's figure: the 131,072-task
// passes of 0.13 M flows, 9.5-10.7 MB). Since session 32 a flow's start is 4 bytes, not 8, in a
// list of 65,536 flows or more while the iteration before sharing (the candidate's bound: no
// listed flow starts after it) is under 2^32 ticks (FlowList, link_sharing.h): 12 + 1 a flow
// then (the 131,072-task, 1.03 M-flow pass estimated 17.1 MB, ~15.4 over its start;
// sharingFlowCount may count a little more than the list reserves, so near 65,536 flows the
// estimate can take 4-byte starts the list does not: 0.26 MB at most). Up to kKeptShapeTasks
// (65,536) tasks the graph and the orders stay cached, so letting them go frees nothing: such a
// pass still holds the 60 bytes a task of before (a 65,536-task, 0.52 M-flow pass
// measured 12.7-12.8 MB either way, bench/RESULTS.md, session 27, budget27).
size_t PrunedSearch::simulationBytes(const Pending& candidate, bool full) {
  constexpr double kFirstPassTaskBytes = sizeof(TaskNode) + 1.5 * sizeof(TaskEdge) +
                                         sizeof(uint8_t) + sizeof(int) + sizeof(StageTask) +
                                         sizeof(TaskTiming) + sizeof(lone::Output) + sizeof(int8_t) +
                                         sizeof(double);
  constexpr double kSharingPassTaskBytes = 28, kSharingPassKeptGraphTaskBytes = 60;
  // Per flow its start, its shape and link sharing's slot with the fit's rest (8), and the start
  // order's record (1).
  const double sharing_pass_flow_bytes =
      static_cast<double>(FlowList::startBytes(candidate.sharing_flows, candidate.bound_us) + 8 + 1);
  const double tasks = tasksOf(candidate);
  const double sharing_task_bytes = tasks > static_cast<double>(kKeptShapeTasks)
                                        ? kSharingPassTaskBytes
                                        : kSharingPassKeptGraphTaskBytes;
  const double first_pass = kFirstPassTaskBytes * tasks;
  if (!full) return static_cast<size_t>(first_pass);
  // A sharing pass times the plan twice (a first pass's peak each) and shares its links between.
  return static_cast<size_t>(std::max(
      first_pass, sharing_task_bytes * tasks +
                      sharing_pass_flow_bytes * static_cast<double>(candidate.sharing_flows)));
}

// A simulation's time, in units of about a timed task (~0.7 us): its timing, and for a sharing
// pass its flows (~1-1.5 us each) and the timing again.
double PrunedSearch::workOf(const Pending& candidate, bool full) {
  const double tasks = tasksOf(candidate);
  return full ? 2 * tasks + 2 * static_cast<double>(candidate.sharing_flows) : tasks;
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

// Drops the pools' candidates above the threshold (pruned), then runs one round of simulations
// and ranks what they give. False when both pools were left empty before the round.
//
// Two pools, one order: pool_ by the closed form's bound, unshared_pool_ by the iteration time
// of the timeline before link sharing (a first pass, simulateWithin's; sharing only lengthens
// it). The round takes the least keys of both, best first: one of pool_ gets its first pass (and
// joins unshared_pool_ if that does not already end after the threshold), one of unshared_pool_
// its full simulation. Sharing, most of a simulation's cost under context parallelism across
// nodes, so runs only for candidates whose time before it is below every other candidate's
// bound: Llama 3.1 405B on 1,024 GPUs ran it for 7 candidates whose time before sharing was
// already above the final 10th time, because their closed-form bounds were below it.
bool PrunedSearch::simulateRound() {
  // EVSIM_PARALLEL_PROFILE=1: choosing the round and ranking its results are serial phases.
  std::optional<parallel_profile::Scope> choosing(std::in_place, "search.round.choose");
  const double bound_limit = limit();
  while (!pool_.empty() && pool_.worst().bound_us > bound_limit) {
    pool_.dropWorst();
    ++report_.pruned_by_bound;
  }
  while (!unshared_pool_.empty() && std::prev(unshared_pool_.end())->bound_us > bound_limit) {
    unshared_pool_.erase(std::prev(unshared_pool_.end()));
    ++report_.pruned_by_bound;
  }
  if (pool_.empty() && unshared_pool_.empty()) return false;
  // The best keys until the next would exceed the round's number of full simulations or of
  // first passes to run (of timing keys new to the round, not known from before), with the
  // candidates among them that take an earlier one's result: a round gives every thread work
  // however many candidates share their keys. Until the top K is full, the full simulations are
  // K - |top|: a timing simulated gives one row at most (equal timings join one row), so no fewer
  // can fill it. Counting candidates instead left a round of 10 with 5 simulations, then rounds of
  // 3, 1, 1 while one thread waited (Llama 3.1 405B on 1,024 GPUs); counting first passes with
  // the full simulations left the last two full ones (0.4 s and 0.3 s) in rounds of their own.
  const bool filling = std::isinf(bound_limit);
  const size_t full_size = filling ? static_cast<size_t>(options_.top_k) - top_.size() : kRoundSize;
  size_t full_count = 0, first_pass_count = 0;
  std::vector<Pending> round;
  std::vector<bool> full;  // a full simulation (from unshared_pool_), else a first pass
  // Only the first of each timing key and pass runs; the others take its result.
  std::vector<Strategy> keys;
  std::vector<size_t> first;  // the round's first candidate of the same key and pass
  std::vector<size_t> to_simulate;
  std::vector<Simulated> done;
  std::unordered_map<Strategy, size_t, TimingKeyHash> first_pass_of_key, full_of_key;
  while (!pool_.empty() || !unshared_pool_.empty()) {
    const bool from_unshared =
        pool_.empty() ||
        (!unshared_pool_.empty() && keyOf(*unshared_pool_.begin()) < keyOf(pool_.best()));
    if (from_unshared ? full_count == full_size : first_pass_count == kRoundSize) break;
    Pending candidate = from_unshared
                            ? std::move(unshared_pool_.extract(unshared_pool_.begin()).value())
                            : pool_.takeBest();
    Strategy key = timingKey(model_, candidate.strategy);
    Simulated known;
    if (auto timing = memo_.find(key); timing != memo_.end()) {
      known.ranked = rankedRow(candidate, timing->second);
    } else if (!from_unshared && slower_.count(key) > 0) {
      known.slower = true;  // the threshold only falls: still too slow
    } else if (auto before = unshared_memo_.find(key);
               !from_unshared && before != unshared_memo_.end()) {
      // Its first pass is known: it waits (or is pruned) by that time, as its own would.
      candidate.bound_us = before->second.us;
      candidate.sharing_flows = before->second.sharing_flows;
      if (candidate.bound_us > bound_limit) {
        ++report_.pruned_by_bound;
      } else {
        unshared_pool_.insert(std::move(candidate));
      }
      continue;
    }
    const size_t j = round.size();
    if (known.ranked || known.slower) {
      first.push_back(j);
    } else {
      auto& of_key = from_unshared ? full_of_key : first_pass_of_key;
      first.push_back(of_key.try_emplace(key, j).first->second);
      if (first.back() == j) {
        to_simulate.push_back(j);
        ++(from_unshared ? full_count : first_pass_count);
      }
    }
    round.push_back(std::move(candidate));
    full.push_back(from_unshared);
    keys.push_back(std::move(key));
    done.push_back(std::move(known));
  }
  // Longest first (by workOf), so that the threads end together, each within the memory budget
  // beside the others (parallel_within_budget.h); each result goes to its candidate's slot, so
  // the order changes no result.
  std::vector<size_t> longest_first = to_simulate;
  std::vector<double> work(round.size(), 0);
  for (size_t j : to_simulate) work[j] = workOf(round[j], full[j]);
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [&](size_t a, size_t b) { return work[a] > work[b]; });
  std::vector<size_t> weights;
  weights.reserve(longest_first.size());
  for (size_t j : longest_first) weights.push_back(simulationBytes(round[j], full[j]));
  choosing.reset();
  parallelForWithinBudget(weights, kSimulationBudgetBytes, options_.threads, [&](size_t i) {
    const size_t j = longest_first[i];
    done[j] = simulateOne(round[j], bound_limit, /*unshared_only=*/!full[j]);
    // Its shape's orders, states and graph would sit beside the next simulations (a graph of
    // 2^16 tasks is ~4 MB): the two threads' simulations are the search's peak.
    releaseShapeCaches();
  });
  parallel_profile::Scope ranking("search.round.rank");
  if (memo_.size() + to_simulate.size() > kTimingMemoCapacity) memo_.clear();
  if (slower_.size() + to_simulate.size() > kTimingMemoCapacity) slower_.clear();
  if (unshared_memo_.size() + to_simulate.size() > kTimingMemoCapacity) unshared_memo_.clear();
  for (size_t j : to_simulate) {
    Simulated& d = done[j];
    // A first pass already after the threshold is a stopped simulation, as the full one's.
    if (d.unshared_us && *d.unshared_us > bound_limit && std::isfinite(*d.unshared_us)) {
      d.unshared_us.reset();
      d.slower = true;
    }
    if (d.ranked) memo_.emplace(keys[j], d.ranked->result);
    if (d.slower) slower_.insert(keys[j]);
    if (d.unshared_us) unshared_memo_.emplace(keys[j], Unshared{*d.unshared_us, d.sharing_flows});
  }
  for (size_t j = 0; j < round.size(); ++j) {
    if (first[j] == j) continue;
    const Simulated& leader = done[first[j]];
    done[j].slower = leader.slower;
    done[j].unshared_us = leader.unshared_us;
    done[j].sharing_flows = leader.sharing_flows;
    if (leader.ranked) done[j].ranked = rankedRow(round[j], leader.ranked->result);
  }
  for (size_t j = 0; j < round.size(); ++j) {
    Simulated& d = done[j];
    for (const Event& e : d.missing) missing_.intern(e);
    if (d.slower) ++report_.pruned_by_bound;
    if (d.unshared_us) {  // waits for its sharing pass
      round[j].bound_us = *d.unshared_us;
      round[j].sharing_flows = d.sharing_flows;
      unshared_pool_.insert(std::move(round[j]));
      continue;
    }
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
  const bool profiled = parallel_profile::on();
  if (profiled) parallel_profile::Recorder::get().clear();  // e.g. an exhaustive search's regions
  const parallel_profile::Stamp start = profiled ? parallel_profile::now() : parallel_profile::Stamp{};
  // The passes' and rounds' parallel regions run on these threads, the caller's among them
  // (worker_team.h), not on threads started for each.
  WorkerTeam team(resolveThreads(options.threads));
  const WorkerTeam::Use use(team);
  pruned::PrunedSearch search(model, cluster, costs, options);
  search.runPass();
  while (search.endPass()) search.runPass();  // the invalid ones were counted in the first pass
  SearchReport report = [&] {
    parallel_profile::Scope profile("search.finish");
    return search.finish();
  }();
  if (profiled) {
    parallel_profile::Recorder::get().print(parallel_profile::now().wall - start.wall);
  }
  return report;
}

}  // namespace evsim

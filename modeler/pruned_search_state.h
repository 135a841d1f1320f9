#pragma once
// The pruned search's state (pruned_search.h explains the method): its pool keys, ranked rows and
// timing memo, and the PrunedSearch class. Its passes over the enumeration (closed-form tier,
// pools) are pruned_search_pass.cpp; its simulation rounds and report are pruned_search.cpp.
// Shared by those two files only.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/kept_objects.h"
#include "modeler/candidate_stream.h"
#include "modeler/closed_form_tier.h"
#include "modeler/invalid_tally.h"
#include "modeler/parallel_for.h"
#include "modeler/pending_pool.h"
#include "modeler/pruned_search.h"
#include "modeler/simulation.h"
#include "plan/plan_cache.h"

namespace evsim::pruned {

// Fixed sizes, independent of the thread count, so that results are too. The pool holds the
// candidates that fit and whose bound is below the threshold, waiting to be simulated best bound
// first; a round is what one threshold applies to. Until the top K is full a round takes the best
// bounds until it holds K - |top| timing keys to simulate (the threshold is infinite).
constexpr size_t kRoundSize = 16;
// Valid candidates a worker enumerates before it evaluates them.
constexpr size_t kClosedFormBlock = 256;
// Sums in a different order differ by rounding: prune only clearly above the threshold.
constexpr double kBoundSlack = 1e-9;
// The simulations of a round run side by side only while their estimated memory fits this budget
// (parallel_within_budget.h; simulationBytes): two link-sharing passes of Llama 3.1 405B's
// largest candidates on 1,024 GPUs (~10^6 flows, 131,072 tasks, ~30 MB each) ran at once and
// took a two-thread search to 94 MB where one thread peaked at 58 (issue 34 item 2). With it,
// the other thread simulates the round's smaller candidates meanwhile. Which thread ran what
// never changes a result. The threads' freed memory is reused in their heap (search_heap.h: two
// arenas, each keeping up to 8 MiB of free top), so the peak is about the live data plus up to
// those 16 MiB. 28 MiB since session 25 (smaller task records, truer estimates:
// such a pass is ~23 MB, ~16 of it its flows): two-thread peaks of that search's bench and of
// `eventsim search` over the same space plus offload, 28 MiB 54 / 58 MB, 32 MiB 62 / 65 MB,
// 36 MiB 65-67 / 70 MB, 40 MiB 67 / 70-71 MB, 48 MiB (the two largest passes together) 72-78 /
// 77-81 MB (bench/RESULTS.md, session 25, rec34d): the largest passes still run beside smaller
// ones only, as their flows, not their tasks, now make most of them. 29 MiB since session 27
// (budget27): with the graph and large orders let go during sharing that pass is ~21 MB
// (estimated 21.25), and 29 MiB lets the round's 16,384-task sharing passes (8.4 estimated, 8.9
// measured) run beside it, where at 28 they missed by 0.3 MB and the other thread waited (a
// load-free replay of the round: 1.375x -> 1.084x its ideal makespan); `eventsim search` at two
// threads 61.1-63.3 MB, the bench 57.0 MB (bench/RESULTS.md, session 27, budget27). Kept at 29
// in session 30 (sim30; the search's team, one arena or two keeping 8 MiB, search_heap.h): from
// 29 to 38 MiB that search ran the same rounds (two-thread peak 54-57 MB, 1.4-1.5 s); from 42
// MiB its two largest sharing passes (21.25 MB estimated each, 40.5 MiB together) ran at once,
// 1.15-1.2 s but 64.5-66.7 MB at 42 and 48 MiB, over the 64 MB bound. The 16,384-GPU searches
// (70B 30-35 MB, 405B 32-36 MB) did not change with the budget. A larger one needs smaller
// passes first. Kept at 29 in session 31 (pair31): with the pool at 4,096 (search.h) and a pass
// at 19.6 MB over its start, the two largest side by side (42 MiB) still peaked at 63.4-64.6 MB,
// live 45-48 MB beside 9.3 MB of mapped files and the arenas' free chunks (bench/RESULTS.md).
// 36 MiB since session 32: a flow's start is 4 bytes (link_sharing.h), so those two passes are
// ~15.4 MB each over their start (session 31's 19.6 less 4.1 of starts; estimated 17.1, 34.2
// together) and run side by side, with ~3.5 MB of room beside them. That search then peaks at
// 55-56 MB on two threads and its rounds no longer wait on the budget. Four threads (not the
// default on two cores) over the two arenas peaked at 57.5-76 MB, for a live peak of 39 MB: the
// arenas' free chunks; charging each simulation 4 MiB more (at 42 MiB, so that nothing ran
// beside the pair) gave 58-67.5, no remedy, and would have capped a many-core search at 10
// simulations at once (bench/RESULTS.md, session 32).
constexpr size_t kSimulationBudgetBytes = size_t{36} << 20;

struct Ranked {
  double iteration_us = 0;
  size_t index = 0;      // enumeration order, the tie-break (of a group's first member)
  size_t row_index = 0;  // enumeration order of the plan shown (equivalent_plans.h)
  CandidateResult result;
};

inline bool before(const Ranked& a, const Ranked& b) {
  if (a.iteration_us != b.iteration_us) return a.iteration_us < b.iteration_us;
  return a.index < b.index;
}

// One simulated candidate, or the signatures of the events it lacks costs for.
struct Simulated {
  std::optional<Ranked> ranked;
  std::vector<Event> missing;
  bool slower = false;  // its timeline before link sharing ended after the threshold: pruned
  // A first pass (no link sharing): its timeline's iteration time before sharing, a lower bound
  // on its simulated time, and the flows its sharing pass would list (sharingFlowCount).
  std::optional<double> unshared_us;
  size_t sharing_flows = 0;
};

// A first pass's results kept per timing key, for the other candidates of the key.
struct Unshared {
  double us = 0;
  size_t sharing_flows = 0;
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

  void runPass();  // pruned_search_pass.cpp
  // pruned_search.cpp
  bool endPass();
  SearchReport finish();

 private:
  // A valid candidate waiting for the closed-form tier: a worker evaluates them kClosedFormBlock
  // at a time, not between the enumeration's steps (their memory is the tier's, not the
  // enumeration's, and interleaving them cost ~10% of the time at one thread).
  struct Waiting {
    size_t index = 0;
    Strategy strategy;
  };
  // One worker's part of a pass: its workspace (kept across passes), pool and counts. On cache
  // lines of its own: the workers' shares sit side by side in shares_, and each writes its own
  // per candidate.
  struct alignas(64) Share {
    std::vector<Waiting> waiting;
    ClosedFormTier::Workspace workspace;
    WorkerPool pool;
    PoolKey ceiling;  // the least key this worker set aside
    size_t set_aside = 0, pruned = 0;
    int64_t closed_form = 0, oom = 0, ok = 0;
    // The first pass's invalid candidates; the closest OOM candidate and its index.
    InvalidTally invalid;
    std::optional<CandidateResult> closest_oom;
    size_t closest_oom_index = 0;

    void startPass(size_t pool_capacity) {
      waiting.clear();
      pool = WorkerPool(pool_capacity);
      ceiling = PoolKey{};
      set_aside = pruned = 0;
    }
  };

  // pruned_search_pass.cpp
  void visit(Share& share, size_t index, const Candidate& c, double bound_limit) const;
  void evaluateWaiting(Share& share, double bound_limit) const;
  void evaluateOne(Share& share, size_t index, Strategy&& strategy, double bound_limit) const;
  void mergeShare(Share& share);
  // pruned_search.cpp
  double limit() const;
  static Ranked rankedRow(const Pending& candidate, const CandidateResult& timing);
  // `unshared_only`: the timeline before link sharing alone (Simulated::unshared_us).
  Simulated simulateOne(const Pending& candidate, double limit_us, bool unshared_only) const;
  static CandidateResult oomRow(const Strategy& strategy, const ClosedFormResult& closed);
  // A simulation's estimated peak memory (its weight against kSimulationBudgetBytes) and time;
  // `full`: its sharing pass (candidate.sharing_flows set), else its first pass.
  static size_t simulationBytes(const Pending& candidate, bool full);
  static double workOf(const Pending& candidate, bool full);
  bool simulateRound();
  // A simulation whose plan, costs and offsets a worker fills anew (simulateOne): a round's
  // workers take one each and give it back, so a worker's next simulation, in this round or a
  // later one, reuses their storage and its plan's copy of the model and cluster
  // (simulation_in_place.h). Kept between rounds (a plan's op lists, ~1 MB for a 126-layer
  // model's, per worker: what a simulation held anyway); freed by finish().
  std::unique_ptr<Simulation> takeScratch() const;
  void giveBackScratch(std::unique_ptr<Simulation> sim) const;

  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const CostModel& costs_;
  const SearchOptions& options_;
  // What the workers of a pass tell each other (read per candidate, written rarely; on a cache
  // line of its own). `least_oom_peak`: the least exact OOM peak any worker has found (first
  // pass): a candidate needs its exact peak only up to it (evaluateOne). `least_ceiling_bound`:
  // the least bound of the workers' ceilings: a key above it is outside the merged pool's best
  // `pool_capacity` (that worker holds as many below it), so it is set aside without entering a
  // pool. With each worker's own figures alone, both stay higher at two threads than one
  // worker's at one (more pool inserts, more exact peaks; bench/RESULTS.md session 24, ratio34:
  // little of either in Llama 3 70B on 1,024 GPUs).
  struct alignas(64) Shared {
    std::atomic<int64_t> least_oom_peak{std::numeric_limits<int64_t>::max()};
    std::atomic<double> least_ceiling_bound{std::numeric_limits<double>::infinity()};
  };
  mutable Shared shared_;
  // Two plan cores kept (a worker's last each): a core of Llama 3.1 405B is ~0.5 MB in ~300
  // pieces, built beside the simulations' arrays. Keeping 8 saved few builds (Llama 3.1 405B on
  // 1,024 GPUs: 14 builds of 42 look-ups against 19 with 2; Llama 3 70B: 799 of 829 either way;
  // 16,384 GPUs: 159 / 163 and 396 / 404) for ~3 MB more at the two-thread search's peak
  // (bench/RESULTS.md, session 28, mem28).
  mutable PlanCache cache_{2, PlanCache::Lookups::kSearch};
  mutable KeptObjects<Simulation> scratch_;  // at most one per worker
  ClosedFormTier tier_;
  unsigned workers_;
  std::vector<Share> shares_;  // one per worker thread
  PendingQueue pool_;          // keys in [floor_, ceiling_), at most pool_capacity_
  // Candidates of pool_ whose timeline before link sharing is known, keyed by its iteration time
  // (a tighter lower bound than the closed form's), waiting for the sharing pass.
  std::set<Pending, ByBound> unshared_pool_;
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
  // Timing keys' iteration times before link sharing (a first pass), for the other candidates of
  // the key.
  std::unordered_map<Strategy, Unshared, TimingKeyHash> unshared_memo_;
  EventTable missing_;
  SearchReport report_;
  // The first pass's invalid candidates, merged over the workers.
  InvalidTally invalid_;
  size_t closest_oom_index_ = 0;
};

}  // namespace evsim::pruned

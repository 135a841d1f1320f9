#pragma once
// Grid search over hybrid parallel strategies (DistSim section 4.4): every (M, P, D) with
// M*P*D = N x micro-batch x schedule (x v) x recomputation x sequence parallelism x ZeRO stage,
// each checked for validity, then for memory (the memory model with headroom), then simulated
// from a shared, const CostModel. Candidates run on a thread pool.
//
// Call order: runSearch() streams the enumeration (forEachCandidate) in batches; per batch, in
// parallel, checks every valid candidate's memory with the closed-form tier (the plan's own
// estimate, without building it) and builds, costs, simulates and frees the plan of each one that
// fits; the batch's rows then go, in enumeration order, to the report's RankedRows (sorted runs
// spilled to a temporary file: memory does not grow with the space). At the end it reports the
// events the cost model lacks (one MissingCostsError listing all, over every fitting candidate).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modeler/candidate_result.h"
#include "modeler/cost_model.h"
#include "modeler/memory_model.h"
#include "modeler/ranked_rows.h"
#include "plan/strategy_space.h"

namespace evsim {

struct SearchOptions {
  Strategy base;        // global batch, dp_overlap and bucket size shared by every candidate
  StrategySpace space;  // N, micro-batch sizes, schedules, cross-node TP
  double memory_headroom = kDefaultMemoryHeadroom;  // share of device memory set aside
  unsigned threads = 0;                             // 0: std::thread::hardware_concurrency()
  int top_k = 10;  // runPrunedSearch only: how many of the best candidates to keep and rank
  // runPrunedSearch only: fitting candidates waiting to be simulated, best bounds kept; the others
  // are set aside for another pass over the enumeration should they still be needed
  // (pruned_search.h). A test makes it small to force passes. 4,096 since session 31 (16,384
  // before): the pool is 208 bytes a candidate, and its 3.4 MB (each worker's too, while a pass
  // runs) sat beside every simulation round; with 4,096 the every-dimension searches of Llama 3 70B
  // and 3.1 405B on 1,024 and 16,384 GPUs still take one pass (70B on 1,024 needs more than 1,024,
  // at most 2,048) and peak 2.6-10 MB lower (bench/RESULTS.md, session 31, pair31). A space whose
  // bounds leave more than 4,096 candidates below the 10th time takes another pass: the same top K.
  size_t pool_capacity = 4096;
  // runSearch: rows held in memory before a sorted run is spilled to a temporary file.
  size_t rows_in_memory = RankedRows::kDefaultRowsInMemory;
};

struct SearchReport {
  // Ranked: ok candidates by throughput (best first), then OOM by peak memory, then invalid in
  // enumeration order; read with candidates.forEach (memory bounded whatever the space).
  RankedRows candidates;
  int64_t valid = 0;  // ok + OOM
  int64_t ok = 0;
  int64_t oom = 0;
  int64_t invalid = 0;
  int64_t equivalent = 0;
  int64_t tokens_per_sample =
      0;  // the model's sequence length: tokens/s = samples/s x this  // ok candidates merged into
          // an equivalent row (not listed on their own)
  int64_t capacity_bytes = 0;  // device memory
  int64_t usable_bytes = 0;    // capacity * (1 - headroom)
  double headroom = kDefaultMemoryHeadroom;

  // runPrunedSearch only: `candidates` holds the top K ok candidates (ranked as above); the others
  // are only counted. ok and oom are exact (the closed-form tier computes every valid candidate's
  // memory).
  bool pruned = false;
  int64_t closed_form = 0;      // valid candidates the closed-form tier evaluated
  // Ok candidates timed by a full simulation: their own, or (runPrunedSearch) the one of an
  // earlier candidate with the same timing key (plan_core.h's timingKey), whose timing they take.
  int64_t simulated = 0;
  // Ok candidates whose lower bound (the closed form's, or the timeline before link sharing)
  // exceeded the K-th best time.
  int64_t pruned_by_bound = 0;
  int64_t passes = 1;           // passes over the enumeration (pruned_search.h)
  std::map<std::string, int64_t> invalid_by_rule;  // rule (numbers written N) -> candidates
  // Both searches: the first invalid candidate of each rule ("--strategy 8M2P4D: M=8 does not
  // divide ... (b=1)"),
  // and the valid candidate that missed the memory limit by the least (when any did).
  std::map<std::string, std::string> invalid_example;
  std::optional<CandidateResult> closest_oom;
  int64_t total() const { return valid + invalid; }

  // The best ok candidate, or nullptr when none fits.
  const CandidateResult* best() const;
  // An ok candidate's iteration time over the best one's (1 for the best, 1.25 for 25% slower).
  double timeVsBest(const CandidateResult& r) const;
  // Bookkeeping both searches share: an OOM candidate (the closest to fitting kept; the counts
  // of ok and OOM are the caller's). Invalid ones are counted by InvalidTally (invalid_tally.h).
  void noteOom(const CandidateResult& candidate);
};

struct SimulationSummary;
// Sets an ok candidate's timing fields (iteration time, throughput, bubble, model TFLOP/s, MFU,
// provenance) from its simulation: both searches rank candidates by these.
void setTiming(CandidateResult& r, const SimulationSummary& summary);

// Throws InputError on an empty space (N <= 0, no micro-batch sizes, schedules, recomputation
// modes, SP settings or ZeRO stages), a ZeRO stage outside 0..3, a v < 2 or a headroom outside
// [0, 1), naming the flag.
void validateSearchOptions(const SearchOptions& options);

// Validates `options` (above), then ranks the space. Throws InputError for events the cost model
// does not cover (listed once for the union).
SearchReport runSearch(const ModelConfig& model, const ClusterConfig& cluster,
                       const CostModel& costs, const SearchOptions& options);

}  // namespace evsim

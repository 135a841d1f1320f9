#pragma once
// The pruned, streaming search (issue 14): the same ranking as runSearch's first K ok candidates,
// in bounded memory and without simulating what provably cannot reach them.
//
// The workers share the enumeration (candidate_stream.h: each takes whole groups of units and
// enumerates them itself; nothing is held but the pools, so memory does not grow with the space).
// The closed-form tier (closed_form_tier.h) gives every valid candidate its exact peak memory (OOM
// ones stop there) and a lower bound on its iteration time. The fitting ones wait in a pool of
// bounded size (SearchOptions::pool_capacity) that keeps the best bounds: when it overflows, its
// worst bound is set aside, and so is every later candidate whose bound is no better (the pool's
// "ceiling"). Each worker fills a pool of its own (so up to threads x pool_capacity candidates
// are held at the end of a pass), setting aside every key above the least ceiling of any
// worker's (that worker holds a full pool below it); merged then, they keep what one pool would
// (the best keys, whatever the order they came in). Nothing is simulated while the
// enumeration runs: simulating when the pool overflowed (as before session 13) spent the time on
// whatever the enumeration had reached — Llama 3.1 405B on 1,024 GPUs simulated 1M64P1D with
// 2,048 micro-batches, 2.2 GB, before the 4M8P8D plans that win came along. At the end of the
// enumeration the pool is simulated best bound first, in rounds; before each round the candidates
// whose bound now exceeds the K-th best time leave it (pruned). A candidate is simulated in two
// passes: first its timeline before link sharing (simulateWithin, simulation.h: sharing only
// lengthens it), whose iteration time is a tighter bound; the candidate then waits in a second
// pool by that time, and gets its sharing pass (the full simulation) only when that time is the
// least key of both pools. Link sharing is most of a simulation's cost under context parallelism
// across nodes, so it runs only for candidates whose time before it can still reach the top K
// (Llama 3.1 405B on 1,024 GPUs: 25 sharing passes before, 10 after; session 22). A round takes
// the least keys of both pools until it holds a number of simulations to run (K - |top| until the
// top K is full, then a fixed kRoundSize), with the candidates between them that reuse a
// simulated key's result (so every thread has a simulation to run); its simulations run longest
// first. A first pass that already ends after the K-th best time prunes the candidate, and every
// later one of its timing key. If candidates were
// set aside and the ceiling's bound does not exceed the K-th best time, some of them could still
// enter the top K: the enumeration runs again (another pass, its closed forms computed again) for
// the candidates from the ceiling up, with the same pool. Each pass decides at least the pool's
// capacity of candidates, and a pass is needed only when more candidates than that have a bound
// below the K-th time (all of which must then be simulated anyway). Ties rank in enumeration
// order, as runSearch's stable sort does, so the top K are runSearch's first K.
//
// Determinism: pool and round sizes are fixed, the threshold changes only between rounds and a
// pass's pool is the best keys of the pass whatever the order, so the result — including every
// count — is the same whatever the thread count.
//
// Costs: a candidate the full simulation reaches must have every event costed; missing ones are
// collected over the simulated candidates and reported in one MissingCostsError (cost_model.h);
// with missing costs no further pass runs.

#include <string_view>

#include "modeler/search.h"

namespace evsim {

// Validates `options` (validateSearchOptions; top_k >= 1) and returns the top options.top_k.
SearchReport runPrunedSearch(const ModelConfig& model, const ClusterConfig& cluster,
                             const CostModel& costs, const SearchOptions& options);

// The rule of a violation message without its values: the text after the first ": " with every
// run of digits written N ("M=N does not divide num_heads=N of gptN-Nb").
std::string violationRule(std::string_view violation);

}  // namespace evsim

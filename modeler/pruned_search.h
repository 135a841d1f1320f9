#pragma once
// The pruned, streaming search (issue 14): the same ranking as runSearch's first K ok candidates,
// in bounded memory and without simulating what provably cannot reach them.
//
// Candidates stream from the enumeration in batches of a fixed size (memory does not grow with
// the space; with more than one thread the enumeration runs on its own thread beside the batches
// before it: candidate_stream.h). Per batch: the closed-form tier (closed_form_tier.h) gives every
// valid candidate its exact peak memory (OOM ones stop there) and a lower bound on its iteration
// time; the fitting ones whose bound does not exceed the K-th best simulated time so far (a
// candidate whose bound exceeds it cannot enter the top K) wait in a pool of bounded size. The pool
// is simulated (plan, costs, timing) best bound first, in rounds of a fixed size, whenever it
// outgrows its capacity and at the end; before each round the candidates whose bound now exceeds
// the K-th best time leave it (pruned). Across batches the best bounds are thus simulated first,
// and the threshold tightens before the weaker ones are reached. Ties rank in enumeration order,
// as runSearch's stable sort does, so the top K are runSearch's first K.
//
// Determinism: batch, pool and round sizes are fixed and the threshold changes only between
// rounds, so the result — including every count — is the same whatever the thread count.
//
// Costs: a candidate the full simulation reaches must have every event costed; missing ones are
// collected over the whole search and reported in one MissingCostsError (cost_model.h).

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

#pragma once
// Plans that differ only in flags without effect on this model and layout (selective
// recomputation where FlashAttention keeps nothing to recompute, GPipe and 1F1B at P = 1, ...)
// simulate to the same timeline. The search shows each such group as one row: the plan with the
// least memory, listing the others' flags (issue 31, item 1).

#include <string>
#include <vector>

#include "modeler/search.h"

namespace evsim {

// Both ok, the same M, P, D, C, E and micro-batch, and bit-identical iteration time, bubble and
// model FLOP/s: the same events timed the same way. Different times are never merged.
bool sameOutcome(const CandidateResult& a, const CandidateResult& b);

// The schedule and techniques that tell `s` apart from its equivalents: "gpipe", "dapple rc=sel".
std::string equivalentFlags(const Strategy& s);

// Merges `other` into `into`: the one with less peak memory stays the row (on a tie the one first
// in enumeration order, `*_order`; `into_order` follows the row), and the other's flags (and any
// it had absorbed) join its sorted `equivalents`.
void mergeEquivalent(CandidateResult& into, size_t& into_order, CandidateResult&& other,
                     size_t other_order);

// Collapses each group of equivalent ok candidates in `ranked` (ok candidates sorted by time
// first) into one and renumbers the ranks 1..n. Returns how many candidates were absorbed.
int64_t collapseEquivalents(std::vector<CandidateResult>& ranked);

}  // namespace evsim

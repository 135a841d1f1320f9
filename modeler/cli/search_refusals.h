#pragma once
// What `eventsim search` refuses once its space is known (bad input: exit code 2, one line): sizes
// no candidate of the model can take, techniques whose candidates the space lacks, and a search
// without one valid candidate. The enumeration itself skips such candidates without a word
// (plan/strategy_space.cpp), so the refusals say what it would have left out.

#include "modeler/cli/search_args.h"
#include "modeler/search.h"
#include "config/model_config.h"

namespace evsim {

// --ep, --etp or --cp values that no candidate of `model` can take.
void checkSearchedSizesApply(const ModelConfig& model, const StrategySpace& space);
// --cp-comm-type, --tp-comm-overlap, --overlap-param-gather, --virtual-stages, --uneven-stages
// given for a space with no candidate they apply to.
void refuseTechniquesWithoutCandidates(const SearchArgs& args, const SearchOptions& options);
// After the search: no valid candidate (the most frequent rule broken, or no candidate at all).
void refuseWithoutValidCandidates(const SearchArgs& args, const SearchOptions& options,
                                  const ModelConfig& model, const SearchReport& report);

}  // namespace evsim

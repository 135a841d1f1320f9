#pragma once
// Splits transformer blocks into P contiguous pipeline stages, balancing cost: the embedding's cost
// counts on the first stage and the head's on the last, and every stage gets at least one block.

#include <vector>

namespace evsim {

// Returns the first block index of each stage (size `stages`), minimising the largest stage cost.
// Ties go to the earliest split, so equal costs that divide evenly give equal stages.
std::vector<int> partitionLayers(const std::vector<double>& block_cost, double first_stage_extra,
                                 double last_stage_extra, int stages);

}  // namespace evsim

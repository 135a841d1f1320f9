#pragma once
// torchtitan's per-layer selective activation checkpointing (activation_checkpoint.mode
// "selective", selective_ac_option = "N"; torchtitan/distributed/activation_checkpoint.py,
// _apply_layer_sac, until 2026-03): a module-level counter, one per process, is incremented for
// every transformer block apply_ac wraps, and the block is checkpointed (recomputed in full before
// its backward, like --recompute full) when counter % N == 0; the others keep all their
// activations. Under pipeline parallelism each rank builds its model chunks in stage order
// (pipeline_module_split: stage pp_rank + s * P for the looped layouts, pp_rank and 2P - 1 -
// pp_rank for the V layout) and apply_ac runs on each in that order, so the counter runs over the
// rank's blocks across its chunks: which blocks are checkpointed depends on the split.

#include <vector>

#include "plan/strategy.h"

namespace evsim {

// One flag per model block (model.blocks order): whether it is recomputed under `strategy`
// (Strategy::recompute_every > 1 with Recompute::kFull; otherwise every block when the strategy
// recomputes fully, none when it does not). `first_layer`: the first block of each of the P*v
// chunks in virtual-stage order (stageFirstLayers), `blocks` the model's block count.
std::vector<char> checkpointedBlocks(const Strategy& strategy, const std::vector<int>& first_layer,
                                     int blocks);

}  // namespace evsim

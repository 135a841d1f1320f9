#pragma once
// Parameter counts of a whole model (unsplit, padded vocabulary at t = 1), summed from its op lists
// (layer_footprint.h), never from formulas: a new block architecture changes them by changing the
// op lists alone.

#include <cstdint>

#include "config/model_config.h"

namespace evsim {

int64_t blockParameters(const ModelConfig& model, const TransformerBlock& block);
int64_t embeddingParameters(const ModelConfig& model);
int64_t totalParameters(const ModelConfig& model);
// Parameters one token passes through: an MoE block counts its router, shared experts and only
// top-k of its routed experts (totalParameters for a dense model).
int64_t activeParameters(const ModelConfig& model);
// Multi-token prediction's own parameters (its blocks, eh_proj and norms; the embedding and the
// output layer are the model's, shared). Neither count above includes them: DeepSeek-V3's 671 B is
// the main model's.
int64_t mtpParameters(const ModelConfig& model);

}  // namespace evsim

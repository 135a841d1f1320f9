#include "ops/parameter_counts.h"

#include "ops/layer_footprint.h"

namespace evsim {

int64_t blockParameters(const ModelConfig& model, const TransformerBlock& block) {
  return unsplitFootprint(model).block(block).weights;
}

int64_t embeddingParameters(const ModelConfig& model) {
  return unsplitFootprint(model).embedding.weights;
}

int64_t totalParameters(const ModelConfig& model) {
  const ModelFootprint footprint = unsplitFootprint(model);
  // The head's weights include the multi-token-prediction depths' own (mtpParameters).
  int64_t params = footprint.embedding.weights + footprint.head.weights - footprint.mtp.weights;
  if (model.spec.untied_output) params += footprint.output_weights;
  for (const TransformerBlock& b : model.blocks) params += footprint.block(b).weights;
  return params;
}

int64_t mtpParameters(const ModelConfig& model) { return unsplitFootprint(model).mtp.weights; }

int64_t activeParameters(const ModelConfig& model) {
  if (model.moe.num_experts == 0) return totalParameters(model);
  // Unsplit, an MoE block's routed experts hold all E experts' weights; a token passes k of them.
  const ModelFootprint footprint = unsplitFootprint(model);
  int64_t inactive = 0;
  for (const TransformerBlock& b : model.blocks) {
    if (!b.moe) continue;
    inactive += footprint.block(b).expert_weights / model.moe.num_experts *
                (model.moe.num_experts - model.moe.top_k);
  }
  return totalParameters(model) - inactive;
}

}  // namespace evsim

#pragma once
// What each kind of layer costs one tensor-parallel rank, summed from its op lists (layer_ops.h)
// and nothing else: parameters (the weights its forward ops own), activation bytes kept per
// micro-batch (the saved bytes of its forward ops) and FLOPs. Parameter counts, the memory model,
// the stage partition and the closed-form search tier all read these sums, so a new block
// architecture changes them by changing the op lists alone.

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/layer_ops.h"
#include "config/model_config.h"

namespace evsim {

struct LayerFootprint {
  int64_t weights = 0;      // parameter elements on one rank (forward ops' weights)
  int64_t expert_weights = 0;  // the part of `weights` in routed experts (OpInstance::expert)
  int64_t saved_bytes = 0;  // activation bytes kept per micro-batch (forward ops' saved bytes)
  // What a split backward's W tasks read, per micro-batch: the inputs of its weight_grad GEMMs
  // (weightGradInputBytes). Zero-bubble schedules keep them from B until W.
  int64_t weight_grad_input_bytes = 0;
  double model_flops = 0;  // forward + backward per micro-batch, recomputed ops excluded
  double work_flops = 0;   // the same with recomputed ops: what the device runs
};

struct ModelFootprint {
  // One entry per distinct block of the model (self-attention, cross-attention, ...).
  std::vector<std::pair<TransformerBlock, LayerFootprint>> blocks;
  LayerFootprint embedding;    // all embedding streams
  LayerFootprint head;         // final norm, LM head and loss, without the LM head's own weight
  int64_t output_weights = 0;  // the LM head's weight on one rank (padded vocabulary / t x h)
  // Multi-token prediction: its depths' own ops (part of `head`), and the embedding table copy the
  // last chunk holds for them when the embedding is on another chunk (not in `head`).
  LayerFootprint mtp;
  int64_t mtp_embedding_weights = 0;

  // Throws Error for a block the model does not have.
  const LayerFootprint& block(const TransformerBlock& block) const;
};

// Both operands of a weight-gradient GEMM dW[m,n] = dY^T[m,k] X[k,n] (layer_ops.h's wgrad, layout
// tn): the output gradient and the layer input, (m + n) * k elements of the event's dtype.
int64_t weightGradInputBytes(const Event& wgrad);

// Sums of `forward` and `backward` (ops of one layer or more).
LayerFootprint footprintOf(const EventTable& table, const OpList& forward, const OpList& backward);

// Every layer kind of `model` under `shape` (only the shape's sizes and techniques matter; the TP
// group placement does not change any sum).
ModelFootprint modelFootprint(const ModelConfig& model, const LayerShape& shape);

// The model unsplit: t = 1, one sequence, no techniques (parameter counts of the whole model).
ModelFootprint unsplitFootprint(const ModelConfig& model);

// 2 for T5-style models, which embed the encoder and decoder inputs on the first stage.
int embeddingStreams(const ModelConfig& model);

}  // namespace evsim

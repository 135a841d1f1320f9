#pragma once
// A strategy's layer shape: the model's sizes (ops/layer_ops.h's modelLayerShape) under the
// strategy's tensor, context and expert parallelism, sequence parallelism and recomputation.

#include "config/model_config.h"
#include "ops/layer_ops.h"
#include "plan/strategy.h"

namespace evsim {

// The shape of every layer of `model` under `strategy`, with its TP group at `tp_group`.
LayerShape layerShape(const ModelConfig& model, const Strategy& strategy, Placement tp_group);

}  // namespace evsim

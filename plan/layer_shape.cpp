#include "plan/layer_shape.h"

namespace evsim {

LayerShape layerShape(const ModelConfig& model, const Strategy& strategy, Placement tp_group) {
  LayerShape shape = modelLayerShape(model, strategy.micro_batch, strategy.tp);
  shape.cp = strategy.cp;
  shape.ep = strategy.ep;
  shape.tp_group = tp_group;
  // A placeholder valid for any sum over op lists; the plan sets the real placement per stage.
  shape.ep_group = Placement{strategy.ep, 1, strategy.ep};
  shape.sequence_parallel = strategy.sequence_parallel;
  shape.tp_comm_overlap = strategy.tp_comm_overlap;
  shape.recompute = strategy.recompute;
  return shape;
}

}  // namespace evsim

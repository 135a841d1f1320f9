#include "plan/layer_shape.h"

namespace evsim {

LayerShape layerShape(const ModelConfig& model, const Strategy& strategy, Placement tp_group) {
  LayerShape shape = modelLayerShape(model, strategy.micro_batch, strategy.tp);
  shape.cp = strategy.cp;
  shape.cp_comm = strategy.cp_comm;
  shape.cp_a2a = strategy.cp_a2a;
  shape.ep = strategy.ep;
  shape.etp = strategy.expertTp();
  shape.tp_group = tp_group;
  // Placeholders valid for any sum over op lists; the plan sets the real placements per stage.
  shape.ep_group = Placement{strategy.ep, 1, strategy.ep};
  shape.etp_group = shape.etp == strategy.tp ? tp_group : Placement{shape.etp, 1, shape.etp};
  shape.sequence_parallel = strategy.sequence_parallel;
  shape.tp_comm_overlap = strategy.tp_comm_overlap;
  shape.deepep = strategy.moe_dispatcher == MoeDispatcher::kDeepEp;
  shape.swiglu_recompute_product = strategy.swiglu_recompute_product;
  shape.recompute = strategy.recompute;
  // torchtitan compiles each block and (since 2025-04) the loss; the final norm stays outside
  // (ops/eager_ops.h). Its complex RoPE and repeat_kv run as kernels of their own either way.
  shape.eager_blocks = strategy.eagerKernels();
  shape.eager_loss = strategy.eagerLoss();
  shape.eager_final_norm = strategy.framework == Framework::kFsdp;
  shape.complex_rope = strategy.framework == Framework::kFsdp;
  shape.repeat_kv = strategy.framework == Framework::kFsdp;
  shape.te_ring_copies = strategy.framework == Framework::kMegatron;
  shape.saves_gathered_input = strategy.framework == Framework::kFsdp;
  return shape;
}

}  // namespace evsim

#include "kernels/event_shapes.h"

#include "common/error.h"

namespace evsim {

void checkKernelDType(const Event& event, const ComputeOpKind& kind, std::string_view backend) {
  if (isFp8(event.dtype) && kind.family != OpFamily::kGemm) {
    EVSIM_THROW(InputError,
                "'{}': fp8 is for GEMM operands only; no {} kernel runs {} in fp8 (the planner "
                "keeps non-GEMM ops in bf16)",
                event.signature(), backend, event.op);
  }
}

void checkRopeDim(const Event& event) {
  if (event.dim("dim") % 2 != 0) {
    EVSIM_THROW(InputError,
                "'{}': rope needs an even dim (rotate-half pairs channel i with i + dim/2)",
                event.signature());
  }
}

void checkMoeShape(const Event& event) {
  if (event.hasDim("experts") && event.dim("topk") > event.dim("experts")) {
    EVSIM_THROW(InputError, "'{}': topk={} is more than experts={}", event.signature(),
                event.dim("topk"), event.dim("experts"));
  }
  if (event.hasDim("rows") && event.hasDim("topk") && event.dim("rows") % event.dim("topk") != 0) {
    EVSIM_THROW(InputError, "'{}': topk={} must divide rows={} (k copies per token)",
                event.signature(), event.dim("topk"), event.dim("rows"));
  }
}

kernel_params::AttentionShape attentionShape(const Event& event) {
  if (!event.hasDim("dim")) {
    // MLA's core (qk_dim != v_dim) has no measured kernel: its cost comes from the device model.
    EVSIM_THROW(InputError,
                "'{}': no kernel runs multi-latent attention's core (qk_dim {} != v_dim)",
                event.signature(), event.dim("qk_dim"));
  }
  kernel_params::AttentionShape shape;
  shape.batch = event.dim("batch");
  shape.groups = event.dim("groups");
  shape.seq = event.dim("seq");
  shape.dim = event.dim("dim");
  shape.causal = event.dim("causal") != 0;
  // makeCompute refuses groups that do not divide batch; an Event built by hand may not have been
  // through it.
  if (shape.batch % shape.groups != 0) {
    EVSIM_THROW(InputError, "'{}': groups={} must divide batch={}", event.signature(), shape.groups,
                shape.batch);
  }
  return shape;
}

}  // namespace evsim

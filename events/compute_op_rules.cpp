// The compute ops' rule table (compute_op_rules.h) and the queries answered from it. Apart from
// event.cpp, which builds, names and parses events: the table of formulas is most of the lines and
// grows with every op kind.
#include "events/compute_op_rules.h"

#include <cmath>

#include "common/error.h"

namespace evsim {

namespace {

double rows_cols(std::span<const int64_t> d) { return double(d[0]) * double(d[1]); }

// The share of an attention's s x s products its mask keeps: half under the causal mask.
double causalShare(int64_t causal) { return causal != 0 ? 0.5 : 1.0; }

}  // namespace

const std::map<std::string, ComputeOpRule, std::less<>>& computeRules() {
  // Flop counts of the non-GEMM ops are the usual per-element operation counts; they only matter
  // for the analytic fallback, where these ops are memory-bound anyway.
  static const std::map<std::string, ComputeOpRule, std::less<>> rules = {
      {"gemm",
       {{OpFamily::kGemm, false},
        {"m", "n", "k"},
        true,
        [](auto d) { return 2.0 * d[0] * d[1] * d[2]; },
        [](auto d) {
          return double(d[0]) * d[2] + double(d[2]) * d[1] + double(d[0]) * d[1];
        },
        false,
        // SMs the GEMM leaves to a communication kernel beside it (Transformer Engine's
        // set_sm_margin: the GEMM is launched on sm_count - num_sm SMs;
        // ops/layer_tp_overlap_ops.cpp).
        {"sm_margin"}}},
      {"bgemm",
       {{OpFamily::kGemm, false},
        {"batch", "m", "n", "k"},
        true,
        [](auto d) { return 2.0 * d[0] * d[1] * d[2] * d[3]; },
        [](auto d) {
          return double(d[0]) * (double(d[1]) * d[3] + double(d[3]) * d[2] + double(d[1]) * d[2]);
        }}},
      {"layernorm_fwd",
       {{OpFamily::kLayerNorm, false},
        {"rows", "cols"},
        false,
        [](auto d) { return 8 * rows_cols(d); },
        [](auto d) { return 2 * rows_cols(d); }}},
      {"layernorm_bwd",
       {{OpFamily::kLayerNorm, true},
        {"rows", "cols"},
        false,
        [](auto d) { return 10 * rows_cols(d); },
        [](auto d) { return 3 * rows_cols(d); }}},
      {"softmax_fwd",
       {{OpFamily::kSoftmax, false},
        {"rows", "cols"},
        false,
        [](auto d) { return 5 * rows_cols(d); },
        [](auto d) { return 2 * rows_cols(d); }}},
      {"softmax_bwd",
       {{OpFamily::kSoftmax, true},
        {"rows", "cols"},
        false,
        [](auto d) { return 4 * rows_cols(d); },
        [](auto d) { return 3 * rows_cols(d); }}},
      {"cross_entropy_fwd",
       {{OpFamily::kCrossEntropy, false},
        {"rows", "cols"},
        false,
        [](auto d) { return 4 * rows_cols(d); },
        [](auto d) { return rows_cols(d); }}},
      {"cross_entropy_bwd",
       {{OpFamily::kCrossEntropy, true},
        {"rows", "cols"},
        false,
        [](auto d) { return 3 * rows_cols(d); },
        [](auto d) { return 2 * rows_cols(d); }}},
      {"gelu_fwd",
       {{OpFamily::kElementwise, false},
        {"elems"},
        false,
        [](auto d) { return 8.0 * d[0]; },
        [](auto d) { return 2.0 * d[0]; }}},
      {"gelu_bwd",
       {{OpFamily::kElementwise, true},
        {"elems"},
        false,
        [](auto d) { return 12.0 * d[0]; },
        [](auto d) { return 3.0 * d[0]; }}},
      {"dropout_fwd",
       {{OpFamily::kElementwise, false},
        {"elems"},
        false,
        [](auto d) { return 2.0 * d[0]; },
        [](auto d) { return 2.5 * d[0]; }}},  // x in, y out, 1-byte mask
      {"dropout_bwd",
       {{OpFamily::kElementwise, true},
        {"elems"},
        false,
        [](auto d) { return 1.0 * d[0]; },
        [](auto d) { return 2.5 * d[0]; }}},
      {"add",
       {{OpFamily::kElementwise, false},
        {"elems"},
        false,
        [](auto d) { return 1.0 * d[0]; },
        [](auto d) { return 3.0 * d[0]; }}},
      {"embedding_fwd",
       {{OpFamily::kEmbedding, false},
        {"tokens", "hidden", "vocab"},
        false,
        [](auto) { return 0.0; },
        [](auto d) { return 2.0 * d[0] * d[1]; }}},
      {"embedding_bwd",
       {{OpFamily::kEmbedding, true},
        {"tokens", "hidden", "vocab"},
        false,
        [](auto d) { return double(d[0]) * d[1]; },
        [](auto d) { return 2.0 * d[0] * d[1] + double(d[2]) * d[1]; }}},
      // RMSNorm (Llama): y = x / rms(x) * g, no mean and no bias.
      {"rmsnorm_fwd",
       {{OpFamily::kRmsNorm, false},
        {"rows", "cols"},
        false,
        [](auto d) { return 4 * rows_cols(d); },
        [](auto d) { return 2 * rows_cols(d); }}},
      {"rmsnorm_bwd",
       {{OpFamily::kRmsNorm, true},
        {"rows", "cols"},
        false,
        [](auto d) { return 8 * rows_cols(d); },
        [](auto d) { return 3 * rows_cols(d); }}},
      // SwiGLU: y = silu(gate) * up over `elems` outputs, reading the 2 * elems fused fc1 output
      // [gate | up] (Megatron's --swiglu). Backward reads both halves and dy, writes both grads.
      {"swiglu_fwd",
       {{OpFamily::kSwiGlu, false},
        {"elems"},
        false,
        [](auto d) { return 8.0 * d[0]; },
        [](auto d) { return 3.0 * d[0]; }}},
      {"swiglu_bwd",
       {{OpFamily::kSwiGlu, true},
        {"elems"},
        false,
        [](auto d) { return 16.0 * d[0]; },
        [](auto d) { return 5.0 * d[0]; }}},
      // Rotary position embedding on `heads` heads of `dim` channels for each of `tokens` tokens
      // (query and key heads together), in place; the backward is the inverse rotation.
      {"rope_fwd",
       {{OpFamily::kRope, false},
        {"tokens", "heads", "dim"},
        false,
        [](auto d) { return 3.0 * d[0] * d[1] * d[2]; },
        [](auto d) { return 2.0 * d[0] * d[1] * d[2]; }}},
      {"rope_bwd",
       {{OpFamily::kRope, true},
        {"tokens", "heads", "dim"},
        false,
        [](auto d) { return 3.0 * d[0] * d[1] * d[2]; },
        [](auto d) { return 2.0 * d[0] * d[1] * d[2]; }}},
      // Fused (Flash) attention over `batch` query heads (micro-batch x heads on this rank) that
      // share `groups` key/value heads (grouped-query attention: batch % groups == 0), `seq`
      // tokens, `dim` channels per head; causal 1 masks future tokens. The s x s scores never reach
      // memory. FLOPs: forward 4 * batch * seq^2 * dim (QK^T and PV), backward twice that, halved
      // by the causal mask: the FLOPs the model needs, as NeMo / Megatron-Bridge count them for
      // their published TFLOP/s (flops_utils: "0.5 if causal_self_attn"), so that MFU never counts
      // the masked half the kernel skips (torchtitan's 12*l*h*q*t counts the full square). The
      // backward's recomputed QK^T is hardware work, not model work: the device model's business
      // (modeler/device_model.cpp). Memory: Q, K, V and O once, plus the fp32 log-sum-exp per
      // row (backward: also dO, dQ, dK, dV).
      {"flash_attn_fwd",
       {{OpFamily::kAttention, false},
        {"batch", "groups", "seq", "dim", "causal"},
        false,
        [](auto d) { return 4.0 * d[0] * d[2] * d[2] * d[3] * causalShare(d[4]); },
        [](auto d) {
          return 2.0 * d[0] * d[2] * d[3] + 2.0 * d[1] * d[2] * d[3] + 2.0 * d[0] * d[2];
        }}},
      {"flash_attn_bwd",
       {{OpFamily::kAttention, true},
        {"batch", "groups", "seq", "dim", "causal"},
        false,
        [](auto d) { return 8.0 * d[0] * d[2] * d[2] * d[3] * causalShare(d[4]); },
        [](auto d) {
          return 4.0 * d[0] * d[2] * d[3] + 4.0 * d[1] * d[2] * d[3] + 2.0 * d[0] * d[2];
        }}},
      // Multi-head latent attention's fused core (DeepSeek-V2/V3): `batch` heads (one K/V head per
      // query head after the up-projections), Q and K of `qk_dim` channels (no-position + RoPE), V
      // and the output of `v_dim`. FLOPs: forward 2 * batch * seq^2 * (qk_dim + v_dim), backward
      // twice that, halved by the causal mask (as flash_attn). Memory: Q, K, V, O, the log-sum-exp
      // (backward: also dO, dQ, dK, dV).
      {"mla_attn_fwd",
       {{OpFamily::kAttention, false},
        {"batch", "seq", "qk_dim", "v_dim", "causal"},
        false,
        [](auto d) { return 2.0 * d[0] * d[1] * d[1] * (d[2] + d[3]) * causalShare(d[4]); },
        [](auto d) { return 2.0 * d[0] * d[1] * (d[2] + d[3]) + 2.0 * d[0] * d[1]; }}},
      {"mla_attn_bwd",
       {{OpFamily::kAttention, true},
        {"batch", "seq", "qk_dim", "v_dim", "causal"},
        false,
        [](auto d) { return 4.0 * d[0] * d[1] * d[1] * (d[2] + d[3]) * causalShare(d[4]); },
        [](auto d) { return 4.0 * d[0] * d[1] * (d[2] + d[3]) + 2.0 * d[0] * d[1]; }}},
      // Mixture-of-experts routing. The router's softmax over `experts` logits per token and the
      // top-k choice (reads the logits, writes fp32 probabilities and k indices); its backward
      // reads the probability gradients and probabilities, writes the logit gradients.
      {"moe_router_fwd",
       {{OpFamily::kMoeRouting, false},
        {"tokens", "experts", "topk"},
        false,
        [](auto d) { return 5.0 * d[0] * d[1]; },
        [](auto d) { return 3.0 * d[0] * d[1] + 2.0 * d[0] * d[2]; }}},
      {"moe_router_bwd",
       {{OpFamily::kMoeRouting, true},
        {"tokens", "experts", "topk"},
        false,
        [](auto d) { return 4.0 * d[0] * d[1]; },
        [](auto d) { return 3.0 * d[0] * d[1]; }}},
      // Token permutation: `rows` token copies of `hidden` gathered into expert order (a copy).
      {"moe_permute",
       {{OpFamily::kMoeRouting, false},
        {"rows", "hidden"},
        false,
        [](auto) { return 0.0; },
        [](auto d) { return 2.0 * d[0] * d[1]; }}},
      // The inverse: each token's `topk` copies weighted and summed back into token order.
      {"moe_unpermute",
       {{OpFamily::kMoeRouting, false},
        {"rows", "hidden", "topk"},
        false,
        [](auto d) { return 2.0 * d[0] * d[1]; },
        [](auto d) { return double(d[0]) * d[1] * (1.0 + 1.0 / double(d[2])); }}},
      // FP8 training's casts (docs/TECHNIQUES.md, FP8 recipes), memory-bound. Traffic in 2-byte
      // elements (the 16-bit source): the source read once, each fp8 copy written (1 byte per
      // element) with its scales, ceil(elems / block) of scale_bytes each.
      {"fp8_quantize",
       {{OpFamily::kFp8Cast, false},
        {"elems", "copies", "block", "scale_bytes"},
        false,
        [](auto d) { return 2.0 * d[0] * d[1]; },  // scale and convert per element and copy
        [](auto d) {
          const double scales = std::ceil(double(d[0]) / double(d[2]));
          return double(d[0]) + double(d[1]) * (double(d[0]) + scales * double(d[3])) / 2.0;
        }}},
      // The absolute maximum of a 16-bit tensor (current scaling's first pass): read once.
      {"amax",
       {{OpFamily::kFp8Cast, false},
        {"elems"},
        false,
        [](auto d) { return 1.0 * d[0]; },
        [](auto d) { return 1.0 * d[0]; }}},
      // One memory-bound kernel known by its traffic (ops/eager_ops.h): an eager PyTorch op
      // (x.float(), pow, mean, a broadcast multiply, ...) or an FSDP2 copy. No FLOPs are counted:
      // every one of them is bound by memory on the GPUs modelled.
      {"memory_pass",
       {{OpFamily::kMemoryPass, false},
        {"read_bytes", "write_bytes"},
        false,
        [](auto) { return 0.0; },
        [](auto d) { return double(d[0]) + double(d[1]); },
        true}},
      // fp32 master weight, gradient, two moments read; weight and moments written.
      {"adam",
       {{OpFamily::kAdam, false},
        {"params"},
        false,
        [](auto d) { return 12.0 * d[0]; },
        [](auto d) { return 7.0 * d[0]; }}},
      // The same step run by the host CPU on optimizer state offloaded to host memory
      // (ZeRO-Offload's CPU Adam, Megatron's --optimizer-cpu-offload).
      {"cpu_adam",
       {{OpFamily::kHostAdam, false},
        {"params"},
        false,
        [](auto d) { return 12.0 * d[0]; },
        [](auto d) { return 7.0 * d[0]; }}},
      // Copies over the GPU's host link (PCIe): `elems` elements of the event's dtype to pinned
      // host memory (offload) and back (prefetch). Traffic is what crosses the link, once.
      {"offload_d2h",
       {{OpFamily::kHostCopy, false},
        {"elems"},
        false,
        [](auto) { return 0.0; },
        [](auto d) { return double(d[0]); }}},
      {"offload_h2d",
       {{OpFamily::kHostCopy, false},
        {"elems"},
        false,
        [](auto) { return 0.0; },
        [](auto d) { return double(d[0]); }}},
  };
  return rules;
}

namespace {

const ComputeOpRule* findRule(std::string_view op) {
  auto it = computeRules().find(op);
  return it == computeRules().end() ? nullptr : &it->second;
}

}  // namespace

const std::vector<std::string>& computeOpNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, rule] : computeRules()) out.push_back(name);
    return out;
  }();
  return names;
}

ComputeOpKind computeOpKind(const Event& event, std::string_view backend) {
  if (event.kind != EventKind::kCompute) {
    EVSIM_THROW(InputError, "'{}': not a compute event; no {} kernel runs it", event.signature(),
                backend);
  }
  const ComputeOpRule* rule = findRule(event.op);
  if (rule == nullptr) {
    EVSIM_THROW(InputError, "'{}': no {} kernel for compute op '{}'", event.signature(), backend,
                event.op);
  }
  return rule->kind;
}

bool countsModelFlops(const Event& event) {
  if (event.kind != EventKind::kCompute) return false;
  const OpFamily family = computeOpKind(event, "model FLOPs").family;
  return family == OpFamily::kGemm || family == OpFamily::kAttention;
}

bool isGemmOp(std::string_view op) {
  const ComputeOpRule* rule = findRule(op);
  return rule != nullptr && rule->kind.family == OpFamily::kGemm;
}

}  // namespace evsim

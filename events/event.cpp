#include "events/event.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "common/checked.h"
#include "common/error.h"
#include "common/strings.h"
#include "events/collective.h"

namespace evsim {

namespace {

// Cost rule of one compute op: flops and bytes moved per execution from its dims.
struct ComputeOpRule {
  ComputeOpKind kind;
  std::vector<std::string> dims;
  bool has_layout = false;
  // flops and memory traffic (in elements of the event's dtype, except adam) from dims
  double (*flops)(const std::vector<int64_t>&);
  double (*elements_moved)(const std::vector<int64_t>&);
  // elements_moved counts bytes, not elements of the event's dtype (memory_pass: its kernels
  // mix dtypes, e.g. a bf16 read and an fp32 write).
  bool counts_bytes = false;
  // Dims an event may add after `dims`, in this order; they change neither flops nor bytes.
  std::vector<std::string> optional_dims = {};
};

double rows_cols(const std::vector<int64_t>& d) { return double(d[0]) * double(d[1]); }

// The share of an attention's s x s products its mask keeps: half under the causal mask.
double causalShare(int64_t causal) { return causal != 0 ? 0.5 : 1.0; }

const std::map<std::string, ComputeOpRule, std::less<>>& computeRules() {
  // Flop counts of the non-GEMM ops are the usual per-element operation counts; they only matter
  // for the analytic fallback, where these ops are memory-bound anyway.
  static const std::map<std::string, ComputeOpRule, std::less<>> rules = {
      {"gemm",
       {{OpFamily::kGemm, false},
        {"m", "n", "k"},
        true,
        [](const auto& d) { return 2.0 * d[0] * d[1] * d[2]; },
        [](const auto& d) {
          return double(d[0]) * d[2] + double(d[2]) * d[1] + double(d[0]) * d[1];
        },
        false,
        // SMs the GEMM leaves to a communication kernel beside it (Transformer Engine's
        // set_sm_margin: the GEMM is launched on sm_count - num_sm SMs; ops/layer_ops.cpp).
        {"sm_margin"}}},
      {"bgemm",
       {{OpFamily::kGemm, false},
        {"batch", "m", "n", "k"},
        true,
        [](const auto& d) { return 2.0 * d[0] * d[1] * d[2] * d[3]; },
        [](const auto& d) {
          return double(d[0]) * (double(d[1]) * d[3] + double(d[3]) * d[2] + double(d[1]) * d[2]);
        }}},
      {"layernorm_fwd",
       {{OpFamily::kLayerNorm, false},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 8 * rows_cols(d); },
        [](const auto& d) { return 2 * rows_cols(d); }}},
      {"layernorm_bwd",
       {{OpFamily::kLayerNorm, true},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 10 * rows_cols(d); },
        [](const auto& d) { return 3 * rows_cols(d); }}},
      {"softmax_fwd",
       {{OpFamily::kSoftmax, false},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 5 * rows_cols(d); },
        [](const auto& d) { return 2 * rows_cols(d); }}},
      {"softmax_bwd",
       {{OpFamily::kSoftmax, true},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 4 * rows_cols(d); },
        [](const auto& d) { return 3 * rows_cols(d); }}},
      {"cross_entropy_fwd",
       {{OpFamily::kCrossEntropy, false},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 4 * rows_cols(d); },
        [](const auto& d) { return rows_cols(d); }}},
      {"cross_entropy_bwd",
       {{OpFamily::kCrossEntropy, true},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 3 * rows_cols(d); },
        [](const auto& d) { return 2 * rows_cols(d); }}},
      {"gelu_fwd",
       {{OpFamily::kElementwise, false},
        {"elems"},
        false,
        [](const auto& d) { return 8.0 * d[0]; },
        [](const auto& d) { return 2.0 * d[0]; }}},
      {"gelu_bwd",
       {{OpFamily::kElementwise, true},
        {"elems"},
        false,
        [](const auto& d) { return 12.0 * d[0]; },
        [](const auto& d) { return 3.0 * d[0]; }}},
      {"dropout_fwd",
       {{OpFamily::kElementwise, false},
        {"elems"},
        false,
        [](const auto& d) { return 2.0 * d[0]; },
        [](const auto& d) { return 2.5 * d[0]; }}},  // x in, y out, 1-byte mask
      {"dropout_bwd",
       {{OpFamily::kElementwise, true},
        {"elems"},
        false,
        [](const auto& d) { return 1.0 * d[0]; },
        [](const auto& d) { return 2.5 * d[0]; }}},
      {"add",
       {{OpFamily::kElementwise, false},
        {"elems"},
        false,
        [](const auto& d) { return 1.0 * d[0]; },
        [](const auto& d) { return 3.0 * d[0]; }}},
      {"embedding_fwd",
       {{OpFamily::kEmbedding, false},
        {"tokens", "hidden", "vocab"},
        false,
        [](const auto&) { return 0.0; },
        [](const auto& d) { return 2.0 * d[0] * d[1]; }}},
      {"embedding_bwd",
       {{OpFamily::kEmbedding, true},
        {"tokens", "hidden", "vocab"},
        false,
        [](const auto& d) { return double(d[0]) * d[1]; },
        [](const auto& d) { return 2.0 * d[0] * d[1] + double(d[2]) * d[1]; }}},
      // RMSNorm (Llama): y = x / rms(x) * g, no mean and no bias.
      {"rmsnorm_fwd",
       {{OpFamily::kRmsNorm, false},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 4 * rows_cols(d); },
        [](const auto& d) { return 2 * rows_cols(d); }}},
      {"rmsnorm_bwd",
       {{OpFamily::kRmsNorm, true},
        {"rows", "cols"},
        false,
        [](const auto& d) { return 8 * rows_cols(d); },
        [](const auto& d) { return 3 * rows_cols(d); }}},
      // SwiGLU: y = silu(gate) * up over `elems` outputs, reading the 2 * elems fused fc1 output
      // [gate | up] (Megatron's --swiglu). Backward reads both halves and dy, writes both grads.
      {"swiglu_fwd",
       {{OpFamily::kSwiGlu, false},
        {"elems"},
        false,
        [](const auto& d) { return 8.0 * d[0]; },
        [](const auto& d) { return 3.0 * d[0]; }}},
      {"swiglu_bwd",
       {{OpFamily::kSwiGlu, true},
        {"elems"},
        false,
        [](const auto& d) { return 16.0 * d[0]; },
        [](const auto& d) { return 5.0 * d[0]; }}},
      // Rotary position embedding on `heads` heads of `dim` channels for each of `tokens` tokens
      // (query and key heads together), in place; the backward is the inverse rotation.
      {"rope_fwd",
       {{OpFamily::kRope, false},
        {"tokens", "heads", "dim"},
        false,
        [](const auto& d) { return 3.0 * d[0] * d[1] * d[2]; },
        [](const auto& d) { return 2.0 * d[0] * d[1] * d[2]; }}},
      {"rope_bwd",
       {{OpFamily::kRope, true},
        {"tokens", "heads", "dim"},
        false,
        [](const auto& d) { return 3.0 * d[0] * d[1] * d[2]; },
        [](const auto& d) { return 2.0 * d[0] * d[1] * d[2]; }}},
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
        [](const auto& d) { return 4.0 * d[0] * d[2] * d[2] * d[3] * causalShare(d[4]); },
        [](const auto& d) {
          return 2.0 * d[0] * d[2] * d[3] + 2.0 * d[1] * d[2] * d[3] + 2.0 * d[0] * d[2];
        }}},
      {"flash_attn_bwd",
       {{OpFamily::kAttention, true},
        {"batch", "groups", "seq", "dim", "causal"},
        false,
        [](const auto& d) { return 8.0 * d[0] * d[2] * d[2] * d[3] * causalShare(d[4]); },
        [](const auto& d) {
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
        [](const auto& d) { return 2.0 * d[0] * d[1] * d[1] * (d[2] + d[3]) * causalShare(d[4]); },
        [](const auto& d) { return 2.0 * d[0] * d[1] * (d[2] + d[3]) + 2.0 * d[0] * d[1]; }}},
      {"mla_attn_bwd",
       {{OpFamily::kAttention, true},
        {"batch", "seq", "qk_dim", "v_dim", "causal"},
        false,
        [](const auto& d) { return 4.0 * d[0] * d[1] * d[1] * (d[2] + d[3]) * causalShare(d[4]); },
        [](const auto& d) { return 4.0 * d[0] * d[1] * (d[2] + d[3]) + 2.0 * d[0] * d[1]; }}},
      // Mixture-of-experts routing. The router's softmax over `experts` logits per token and the
      // top-k choice (reads the logits, writes fp32 probabilities and k indices); its backward
      // reads the probability gradients and probabilities, writes the logit gradients.
      {"moe_router_fwd",
       {{OpFamily::kMoeRouting, false},
        {"tokens", "experts", "topk"},
        false,
        [](const auto& d) { return 5.0 * d[0] * d[1]; },
        [](const auto& d) { return 3.0 * d[0] * d[1] + 2.0 * d[0] * d[2]; }}},
      {"moe_router_bwd",
       {{OpFamily::kMoeRouting, true},
        {"tokens", "experts", "topk"},
        false,
        [](const auto& d) { return 4.0 * d[0] * d[1]; },
        [](const auto& d) { return 3.0 * d[0] * d[1]; }}},
      // Token permutation: `rows` token copies of `hidden` gathered into expert order (a copy).
      {"moe_permute",
       {{OpFamily::kMoeRouting, false},
        {"rows", "hidden"},
        false,
        [](const auto&) { return 0.0; },
        [](const auto& d) { return 2.0 * d[0] * d[1]; }}},
      // The inverse: each token's `topk` copies weighted and summed back into token order.
      {"moe_unpermute",
       {{OpFamily::kMoeRouting, false},
        {"rows", "hidden", "topk"},
        false,
        [](const auto& d) { return 2.0 * d[0] * d[1]; },
        [](const auto& d) { return double(d[0]) * d[1] * (1.0 + 1.0 / double(d[2])); }}},
      // FP8 training's casts (docs/TECHNIQUES.md, FP8 recipes), memory-bound. Traffic in 2-byte
      // elements (the 16-bit source): the source read once, each fp8 copy written (1 byte per
      // element) with its scales, ceil(elems / block) of scale_bytes each.
      {"fp8_quantize",
       {{OpFamily::kFp8Cast, false},
        {"elems", "copies", "block", "scale_bytes"},
        false,
        [](const auto& d) { return 2.0 * d[0] * d[1]; },  // scale and convert per element and copy
        [](const auto& d) {
          const double scales = std::ceil(double(d[0]) / double(d[2]));
          return double(d[0]) + double(d[1]) * (double(d[0]) + scales * double(d[3])) / 2.0;
        }}},
      // The absolute maximum of a 16-bit tensor (current scaling's first pass): read once.
      {"amax",
       {{OpFamily::kFp8Cast, false},
        {"elems"},
        false,
        [](const auto& d) { return 1.0 * d[0]; },
        [](const auto& d) { return 1.0 * d[0]; }}},
      // One memory-bound kernel known by its traffic (ops/eager_ops.h): an eager PyTorch op
      // (x.float(), pow, mean, a broadcast multiply, ...) or an FSDP2 copy. No FLOPs are counted:
      // every one of them is bound by memory on the GPUs modelled.
      {"memory_pass",
       {{OpFamily::kMemoryPass, false},
        {"read_bytes", "write_bytes"},
        false,
        [](const auto&) { return 0.0; },
        [](const auto& d) { return double(d[0]) + double(d[1]); },
        true}},
      // fp32 master weight, gradient, two moments read; weight and moments written.
      {"adam",
       {{OpFamily::kAdam, false},
        {"params"},
        false,
        [](const auto& d) { return 12.0 * d[0]; },
        [](const auto& d) { return 7.0 * d[0]; }}},
      // The same step run by the host CPU on optimizer state offloaded to host memory
      // (ZeRO-Offload's CPU Adam, Megatron's --optimizer-cpu-offload).
      {"cpu_adam",
       {{OpFamily::kHostAdam, false},
        {"params"},
        false,
        [](const auto& d) { return 12.0 * d[0]; },
        [](const auto& d) { return 7.0 * d[0]; }}},
      // Copies over the GPU's host link (PCIe): `elems` elements of the event's dtype to pinned
      // host memory (offload) and back (prefetch). Traffic is what crosses the link, once.
      {"offload_d2h",
       {{OpFamily::kHostCopy, false},
        {"elems"},
        false,
        [](const auto&) { return 0.0; },
        [](const auto& d) { return double(d[0]); }}},
      {"offload_h2d",
       {{OpFamily::kHostCopy, false},
        {"elems"},
        false,
        [](const auto&) { return 0.0; },
        [](const auto& d) { return double(d[0]); }}},
  };
  return rules;
}

const ComputeOpRule* findRule(std::string_view op) {
  auto it = computeRules().find(op);
  return it == computeRules().end() ? nullptr : &it->second;
}

std::string placementText(const Placement& p) {
  return fmt::format("group={} nodes={} rpn={}", p.group_size, p.nodes, p.ranks_per_node);
}

}  // namespace

std::string_view eventKindName(EventKind kind) {
  return kind == EventKind::kCompute ? "compute" : collectiveOf(kind).name;
}

bool isCommunication(EventKind kind) { return kind != EventKind::kCompute; }

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

std::string Event::signature() const {
  std::string out(op);
  if (kind == EventKind::kCompute) {
    for (const Dim& d : dims) out += fmt::format(" {}={}", d.name, d.value);
    if (!layout.empty()) out += " layout=" + layout;
  } else {
    out += fmt::format(" bytes={} {}", message_bytes, placementText(placement));
  }
  out += " dtype=";
  out += dtypeName(dtype);
  return out;
}

bool Event::hasDim(std::string_view name) const {
  return std::any_of(dims.begin(), dims.end(), [&](const Dim& d) { return d.name == name; });
}

int64_t Event::dim(std::string_view name) const {
  for (const Dim& d : dims) {
    if (d.name == name) return d.value;
  }
  EVSIM_THROW(Error, "event '{}' has no dimension '{}'", signature(), name);
}

Event makeCompute(std::string_view op, std::vector<Dim> dims, std::string_view layout, DType dtype,
                  std::string_view where) {
  auto rule_it = computeRules().find(op);
  if (rule_it == computeRules().end()) {
    EVSIM_THROW(InputError, "{}: unknown compute op '{}'", where, op);
  }
  const ComputeOpRule& rule = rule_it->second;
  const size_t required = rule.dims.size();
  if (dims.size() < required || dims.size() > required + rule.optional_dims.size()) {
    EVSIM_THROW(InputError, "{}: op '{}' takes dims {}{}{}", where, op, fmt::join(rule.dims, " "),
                rule.optional_dims.empty() ? "" : " and optionally ",
                fmt::join(rule.optional_dims, " "));
  }
  std::vector<int64_t> values;
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string& expected = i < required ? rule.dims[i] : rule.optional_dims[i - required];
    if (dims[i].name != expected) {
      EVSIM_THROW(InputError, "{}: op '{}' expects dim '{}' in place {}, got '{}'", where, op,
                  expected, i + 1, dims[i].name);
    }
    if (dims[i].name == "causal") {
      if (dims[i].value != 0 && dims[i].value != 1) {
        EVSIM_THROW(InputError, "{}: op '{}' dim causal={} must be 0 or 1", where, op,
                    dims[i].value);
      }
    } else if (dims[i].name == "read_bytes" ? dims[i].value < 0 : dims[i].value <= 0) {
      // A fill kernel (memory_pass) reads nothing; every other size is positive.
      EVSIM_THROW(InputError, "{}: op '{}' dim {}={} must be {}", where, op, dims[i].name,
                  dims[i].value, dims[i].name == "read_bytes" ? ">= 0" : "> 0");
    }
    values.push_back(dims[i].value);
  }
  if (rule.kind.family == OpFamily::kAttention && rule.dims[1] == "groups" &&
      values[0] % values[1] != 0) {
    EVSIM_THROW(InputError, "{}: op '{}' groups={} must divide batch={}", where, op, values[1],
                values[0]);
  }
  if (rule.has_layout != !layout.empty() ||
      (rule.has_layout && layout != "nn" && layout != "nt" && layout != "tn" && layout != "tt")) {
    EVSIM_THROW(InputError, "{}: op '{}' layout '{}' invalid ({})", where, op, layout,
                rule.has_layout ? "nn, nt, tn or tt" : "takes none");
  }
  Event e;
  e.kind = EventKind::kCompute;
  e.op = std::string(op);
  e.dims = std::move(dims);
  e.layout = std::string(layout);
  // Adam's state is fp32 whatever the model's dtype; FP8 casts read a 16-bit source.
  e.dtype = op == "adam" || op == "cpu_adam"       ? DType::kFp32
            : op == "fp8_quantize" || op == "amax" ? DType::kBf16
                                                   : dtype;
  e.flops = rule.flops(values);
  // Dims read from a file can be anything up to int64: the traffic they imply must fit int64.
  // The name is formatted only on failure: this runs for every op of every plan of a search.
  const double per_unit = rule.counts_bytes ? 1.0 : double(dtypeBytes(e.dtype));
  e.memory_bytes = checkedToInt64(rule.elements_moved(values) * per_unit, [&] {
    return fmt::format("{}: op '{}' memory traffic in bytes", where, op);
  });
  return e;
}

Event makeGemm(int64_t m, int64_t n, int64_t k, std::string_view layout, DType dtype) {
  return makeCompute("gemm", {{"m", m}, {"n", n}, {"k", k}}, layout, dtype);
}

Event makeBatchedGemm(int64_t batch, int64_t m, int64_t n, int64_t k, std::string_view layout,
                      DType dtype) {
  return makeCompute("bgemm", {{"batch", batch}, {"m", m}, {"n", n}, {"k", k}}, layout, dtype);
}

Event makeCommunication(EventKind kind, int64_t message_bytes, Placement placement, DType dtype) {
  EVSIM_CHECK(kind != EventKind::kCompute, "not a communication kind");
  EVSIM_CHECK(message_bytes > 0 && placement.group_size >= 2 && placement.nodes >= 1 &&
                  placement.ranks_per_node >= 1 && placement.ranks_per_node <= placement.group_size,
              "bad communication event: bytes={} group={} nodes={} rpn={}", message_bytes,
              placement.group_size, placement.nodes, placement.ranks_per_node);
  Event e;
  e.kind = kind;
  e.op = std::string(eventKindName(kind));
  e.dtype = dtype;
  e.message_bytes = message_bytes;
  e.placement = placement;
  return e;
}

Event parseEventSignature(std::string_view signature, std::string_view where) {
  std::vector<std::string> tokens;
  for (const std::string& t : split(trim(signature), ' ')) {
    if (!t.empty()) tokens.push_back(t);
  }
  if (tokens.empty()) EVSIM_THROW(InputError, "{}: empty event signature", where);
  std::string op = tokens[0];
  std::vector<Dim> dims;
  std::string layout;
  std::string dtype_name;
  std::map<std::string, int64_t> comm;
  const Collective* collective = findCollective(op);
  const bool is_comm = collective != nullptr;
  for (size_t i = 1; i < tokens.size(); ++i) {
    size_t eq = tokens[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      EVSIM_THROW(InputError, "{}: '{}': expected key=value, got '{}'", where, signature,
                  tokens[i]);
    }
    std::string key = tokens[i].substr(0, eq);
    std::string value = tokens[i].substr(eq + 1);
    if (key == "dtype") {
      dtype_name = value;
      continue;
    }
    if (key == "layout" && !is_comm) {
      layout = value;
      continue;
    }
    if (is_comm && key != "bytes" && key != "group" && key != "nodes" && key != "rpn") {
      EVSIM_THROW(InputError, "{}: '{}': unknown key '{}' (bytes, group, nodes, rpn, dtype)", where,
                  signature, key);
    }
    int64_t number = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (ec != std::errc() || ptr != value.data() + value.size()) {
      EVSIM_THROW(InputError, "{}: '{}': {}='{}' is not an integer", where, signature, key, value);
    }
    if (is_comm) {
      comm[key] = number;
    } else {
      dims.push_back({key, number});
    }
  }
  if (dtype_name.empty()) EVSIM_THROW(InputError, "{}: '{}': missing dtype=", where, signature);
  DType dtype = parseDType(dtype_name, where);
  if (!is_comm) return makeCompute(op, std::move(dims), layout, dtype, where);

  for (const char* key : {"bytes", "group", "nodes", "rpn"}) {
    if (!comm.count(key) || comm[key] <= 0) {
      EVSIM_THROW(InputError, "{}: '{}': needs {}= > 0", where, signature, key);
    }
  }
  // Narrowed checked: a group of 4294967298 must not become one of 2 (issue 17).
  const std::string sig_where = fmt::format("{}: '{}'", where, signature);
  Placement placement{checkedNarrow<int>(comm["group"], sig_where + ": group"),
                      checkedNarrow<int>(comm["nodes"], sig_where + ": nodes"),
                      checkedNarrow<int>(comm["rpn"], sig_where + ": rpn")};
  // One node holds rpn ranks and every other node at least one: rpn + nodes - 1 <= group (in
  // int64: the sums and products of two ints may not fit one).
  const int64_t group = placement.group_size, nodes = placement.nodes,
                rpn = placement.ranks_per_node;
  if (group < 2 || rpn + nodes - 1 > group || nodes * rpn < group) {
    EVSIM_THROW(InputError, "{}: '{}': placement group={} nodes={} rpn={} is impossible", where,
                signature, placement.group_size, placement.nodes, placement.ranks_per_node);
  }
  return makeCommunication(collective->kind, comm["bytes"], placement, dtype);
}

}  // namespace evsim

// The mixture-of-experts MLP of a block (Megatron-Core's MoE layer with the all-to-all token
// dispatcher), per rank, for T = b*s/C tokens of which the rank's region holds R = T/t under
// sequence parallelism (Megatron runs MoE with TP only with SP). The routed experts have their own
// tensor parallelism ETP (Megatron's --expert-tensor-parallel-size, default t): each expert's FFN
// is split over the ETP group, which all-gathers the tokens dispatched to it and reduce-scatters
// the experts' output (the "all-gather over TP" below is over the ETP group; none at ETP 1).
//
//   forward   norm; router GEMM [region x h] -> E logits (replicated over TP, not FP8); softmax +
//             top-k; permute the region's k token copies into expert order; all-to-all dispatch
//             over the EP group; all-gather over TP (SP); the rank's E/ep experts as one grouped
//             (batched) GEMM each for fc1 and fc2 around the activation; reduce-scatter over TP;
//             all-to-all combine; unpermute (the k copies weighted back into token order); shared
//             experts as a dense MLP on the same tokens, added; dropout; residual add.
//   backward  the reverse, each GEMM a data- and a weight-gradient GEMM.
//
// Rows: an expert rank receives R x k routed token copies on average and, after the ETP gather,
// processes R x ETP x k of them (T x k at ETP = t); the busiest rank, which the lockstep group
// waits for, processes R x ETP x k x f with f the capacity factor (tokens padded or
// dropped to capacity) or, dropless, the load imbalance (moe_load_imbalance). The all-to-all moves
// the region's k x f copies of h elements each way (nccl-tests' alltoall "size": the bytes one
// rank sends); with DeepEP (LayerShape::deepep) each exchange is instead its two pipelined hops
// of whole tokens (ops/moe_dispatch.h). Saved for the backward: the router input and probabilities,
// each grouped GEMM's input, the activation's input, the unpermute's expert outputs, and the shared
// experts' as a dense MLP keeps them.
#include <cmath>

#include "common/error.h"
#include "ops/layer_ops.h"
#include "ops/moe_dispatch.h"

namespace evsim {

namespace {
constexpr int64_t kProbabilityBytes = 4;  // router probabilities are kept in fp32
}  // namespace

int64_t LayerOpBuilder::routedRows(int64_t tokens) const {
  const MoeSpec& moe = shape_.moe;
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(tokens * moe.top_k) * moe.tokenFactor()));
}

int64_t LayerOpBuilder::rowsPerLocalExpert() const {
  const int64_t local_experts = shape_.moe.num_experts / shape_.ep;
  return (expertRows() + local_experts - 1) / local_experts;
}

void LayerOpBuilder::epAllToAll(OpList& out, int layer, std::string_view name, int64_t bytes,
                                Placement group) {
  Event e = makeCommunication(EventKind::kAllToAll, bytes, group, shape_.dtype);
  out.push_back(OpInstance{table_.intern(e), Stream::kEpComm, layer, name, recomputing_});
}

void LayerOpBuilder::epExchange(OpList& out, int layer, const ExchangeNames& names,
                                int64_t tokens) {
  if (shape_.ep == 1) return;  // every expert is local: tokens stay on the rank
  const int64_t h = shape_.hidden;
  if (!shape_.deepep) {
    epAllToAll(out, layer, names.all_to_all, routedRows(tokens) * h * e(), shape_.ep_group);
    return;
  }
  // DeepEP: whole tokens (times the busiest rank's factor) to each node and each rank that holds
  // one of their experts (ops/moe_dispatch.h).
  const Placement& g = shape_.ep_group;
  const int nodes = g.nodes, per_node = g.ranks_per_node;
  if (int64_t{nodes} * per_node != g.group_size) {
    EVSIM_THROW(InputError,
                "--moe-enable-deepep: an EP group of {} ranks spread over {} nodes (at most {} "
                "on one) is not whole nodes; DeepEP's RDMA hop needs the same ranks on each",
                g.group_size, nodes, per_node);
  }
  const DispatchFanout fan = deepEpFanout(shape_.moe, nodes, per_node);
  const double copies = static_cast<double>(tokens) * shape_.moe.tokenFactor();
  auto bytesOf = [&](double per_token) {
    return static_cast<int64_t>(std::ceil(copies * per_token)) * h * e();
  };
  if (nodes > 1) {
    epAllToAll(out, layer, names.rdma, bytesOf(fan.nodes_per_token), Placement{nodes, nodes, 1});
    out.back().overlap_ops = 1;
    out.back().pipelined_with_next = true;
  }
  if (per_node > 1) {
    epAllToAll(out, layer, names.nvlink, bytesOf(fan.ranks_per_token),
               Placement{per_node, 1, per_node});
  } else if (nodes > 1) {
    out.back().overlap_ops = 0, out.back().pipelined_with_next = false;  // the RDMA hop alone
  }
}

void LayerOpBuilder::etpCollective(OpList& out, int layer, std::string_view name, EventKind kind,
                                   int64_t bytes) {
  if (shape_.etp == 1) return;  // each rank holds whole experts: nothing to gather
  Event e = makeCommunication(kind, bytes, shape_.etp_group, shape_.dtype);
  out.push_back(OpInstance{table_.intern(e), Stream::kTpComm, layer, name, recomputing_});
}

void LayerOpBuilder::moeForward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t h = s.hidden, t = s.tp, E = s.moe.num_experts, k = s.moe.top_k;
  const int64_t region_tokens = s.regionTokens();
  const int64_t region = region_tokens * h;
  const bool swiglu = s.spec.mlp == MlpKind::kSwiGlu;
  const int64_t fe = s.moe.expert_ffn / s.etp;      // each expert's FFN on this ETP rank
  const int64_t fc1_width = (swiglu ? 2 : 1) * fe;  // SwiGLU: [gate | up]
  const int64_t local = E / s.ep, m = rowsPerLocalExpert(), rows = local * m;
  const int64_t ge = savedInputBytes(s.gemm_dtype);
  const bool fp8 = isFp8(s.gemm_dtype);
  const Fp8Recipe recipe = s.spec.fp8_recipe;

  norm(out, layer, "mlp_layernorm", false);
  compute(out, layer, "router_gemm", makeGemm(region_tokens, E, h, "nt", s.dtype), E * h,
          e() * region);
  compute(out, layer, "router_topk",
          makeCompute("moe_router_fwd", {{"tokens", region_tokens}, {"experts", E}, {"topk", k}},
                      "", s.dtype),
          0, kProbabilityBytes * region_tokens * E);
  compute(out, layer, "moe_permute",
          makeCompute("moe_permute", {{"rows", region_tokens * k}, {"hidden", h}}, "", s.dtype));
  epExchange(out, layer, {"moe_dispatch_alltoall", "moe_dispatch_rdma", "moe_dispatch_nvlink"},
             region_tokens);
  etpCollective(out, layer, "moe_dispatch_allgather", EventKind::kAllGather, rows * h * e());
  if (fp8) fp8Casts(out, layer, fp8InputCasts(recipe, rows, h));
  compute(out, layer, "expert_fc1_gemm",
          makeBatchedGemm(local, m, fc1_width, h, "nt", s.gemm_dtype),
          local * (fc1_width * h + bias(fc1_width)), ge * rows * h);
  out.back().expert = true;
  compute(out, layer, swiglu ? "expert_swiglu" : "expert_gelu",
          makeCompute(swiglu ? "swiglu_fwd" : "gelu_fwd", {{"elems", rows * fe}}, "", s.dtype), 0,
          e() * rows * fc1_width);
  if (fp8) fp8Casts(out, layer, fp8InputCasts(recipe, rows, fe));
  compute(out, layer, "expert_fc2_gemm", makeBatchedGemm(local, m, h, fe, "nt", s.gemm_dtype),
          local * (h * fe + bias(h)), ge * rows * fe);
  out.back().expert = true;
  etpCollective(out, layer, "moe_combine_reduce_scatter", EventKind::kReduceScatter,
                rows * h * e());
  epExchange(out, layer, {"moe_combine_alltoall", "moe_combine_rdma", "moe_combine_nvlink"},
             region_tokens);
  compute(out, layer, "moe_unpermute",
          makeCompute("moe_unpermute", {{"rows", region_tokens * k}, {"hidden", h}, {"topk", k}},
                      "", s.dtype),
          0, e() * region_tokens * k * h);
  if (s.moe.shared_ffn > 0) {
    const int64_t T = s.tokens(), fs = s.moe.shared_ffn / t;
    const int64_t shared_width = (swiglu ? 2 : 1) * fs;
    gatherInput(out, layer, "shared_fc1_input_allgather");
    linearForward(out, layer, "shared_fc1_gemm", T, shared_width, h, bias(shared_width), region);
    compute(out, layer, swiglu ? "shared_swiglu" : "shared_gelu",
            makeCompute(swiglu ? "swiglu_fwd" : "gelu_fwd", {{"elems", T * fs}}, "", s.dtype), 0,
            e() * T * shared_width);
    linearForward(out, layer, "shared_fc2_gemm", T, h, fs, bias(h), T * fs);
    reduceOutput(out, layer, "shared_fc2_allreduce", "shared_fc2_reduce_scatter");
    compute(out, layer, "shared_expert_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
  }
  dropout(out, layer, "mlp_dropout", region, false);
  compute(out, layer, "mlp_residual_add", makeCompute("add", {{"elems", region}}, "", s.dtype));
}

void LayerOpBuilder::moeBackward(OpList& out, int layer) {
  const LayerShape& s = shape_;
  const int64_t h = s.hidden, t = s.tp, E = s.moe.num_experts, k = s.moe.top_k;
  const int64_t region_tokens = s.regionTokens();
  const int64_t region = region_tokens * h;
  const bool swiglu = s.spec.mlp == MlpKind::kSwiGlu;
  const int64_t fe = s.moe.expert_ffn / s.etp;
  const int64_t fc1_width = (swiglu ? 2 : 1) * fe;
  const int64_t local = E / s.ep, m = rowsPerLocalExpert(), rows = local * m;
  const bool fp8 = isFp8(s.gemm_dtype);
  const Fp8Recipe recipe = s.spec.fp8_recipe;

  dropout(out, layer, "mlp_dropout_bwd", region, true);
  if (s.moe.shared_ffn > 0) {
    const int64_t T = s.tokens(), fs = s.moe.shared_ffn / t;
    const int64_t shared_width = (swiglu ? 2 : 1) * fs;
    gatherInput(out, layer, "shared_fc2_grad_allgather");
    linearBackward(out, layer, "shared_fc2_dgrad", "shared_fc2_wgrad", T, h, fs);
    compute(out, layer, swiglu ? "shared_swiglu_bwd" : "shared_gelu_bwd",
            makeCompute(swiglu ? "swiglu_bwd" : "gelu_bwd", {{"elems", T * fs}}, "", s.dtype));
    gatherInput(out, layer, "shared_fc1_input_regather");
    linearBackward(out, layer, "shared_fc1_dgrad", "shared_fc1_wgrad", T, shared_width, h);
    reduceOutput(out, layer, "shared_fc1_input_grad_allreduce",
                 "shared_fc1_input_grad_reduce_scatter");
  }
  // The gradient of the unpermute is a gather of the token gradients into expert order (the
  // permute's kernel), and the permute's gradient the unweighted sum back (the unpermute's).
  compute(out, layer, "moe_unpermute_bwd",
          makeCompute("moe_permute", {{"rows", region_tokens * k}, {"hidden", h}}, "", s.dtype));
  epExchange(out, layer,
             {"moe_combine_alltoall_bwd", "moe_combine_rdma_bwd", "moe_combine_nvlink_bwd"},
             region_tokens);
  etpCollective(out, layer, "moe_combine_grad_allgather", EventKind::kAllGather, rows * h * e());
  if (fp8) fp8Casts(out, layer, fp8GradCasts(recipe, rows, h));
  compute(out, layer, "expert_fc2_dgrad", makeBatchedGemm(local, m, fe, h, "nn", s.gemm_dtype));
  if (fp8) fp8Casts(out, layer, fp8WgradInputCasts(recipe, rows, fe), true);
  compute(out, layer, "expert_fc2_wgrad", makeBatchedGemm(local, h, fe, m, "tn", s.gemm_dtype));
  out.back().weight_grad = true;  // a W op of zero-bubble schedules
  compute(out, layer, swiglu ? "expert_swiglu_bwd" : "expert_gelu_bwd",
          makeCompute(swiglu ? "swiglu_bwd" : "gelu_bwd", {{"elems", rows * fe}}, "", s.dtype));
  if (fp8) fp8Casts(out, layer, fp8GradCasts(recipe, rows, fc1_width));
  compute(out, layer, "expert_fc1_dgrad",
          makeBatchedGemm(local, m, h, fc1_width, "nn", s.gemm_dtype));
  if (fp8) fp8Casts(out, layer, fp8WgradInputCasts(recipe, rows, h), true);
  compute(out, layer, "expert_fc1_wgrad",
          makeBatchedGemm(local, fc1_width, h, m, "tn", s.gemm_dtype));
  out.back().weight_grad = true;  // a W op of zero-bubble schedules
  etpCollective(out, layer, "moe_dispatch_grad_reduce_scatter", EventKind::kReduceScatter,
                rows * h * e());
  epExchange(out, layer,
             {"moe_dispatch_alltoall_bwd", "moe_dispatch_rdma_bwd", "moe_dispatch_nvlink_bwd"},
             region_tokens);
  compute(out, layer, "moe_permute_bwd",
          makeCompute("moe_unpermute", {{"rows", region_tokens * k}, {"hidden", h}, {"topk", k}},
                      "", s.dtype));
  compute(out, layer, "router_topk_bwd",
          makeCompute("moe_router_bwd", {{"tokens", region_tokens}, {"experts", E}, {"topk", k}},
                      "", s.dtype));
  compute(out, layer, "router_dgrad", makeGemm(region_tokens, h, E, "nn", s.dtype));
  compute(out, layer, "router_wgrad", makeGemm(E, h, region_tokens, "tn", s.dtype));
  out.back().weight_grad = true;  // a W op of zero-bubble schedules
  norm(out, layer, "mlp_layernorm_bwd", true);
  compute(out, layer, "mlp_residual_grad_add",
          makeCompute("add", {{"elems", region}}, "", s.dtype));
}

}  // namespace evsim

#pragma once
// Small, fast instances of every compute op, shared by the CPU and CUDA factory tests.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "events/event.h"

namespace evsim::test {

// `op` with small dims (GEMMs in layout "nt"); records a test failure for an op with no entry, so
// a new op in events/ forces a kernel and a test here.
// Ops no backend runs yet: multi-latent attention's core (Q/K and V head dims differ) and FP8
// training's casts (fp8_quantize, amax), costed by the device model only (issue 30); the
// factories refuse them with one line naming the event. memory_pass (eager PyTorch's kernels,
// FSDP2's copies, TE's ring copies) runs on both backends as a stand-in that moves its bytes.
inline bool hasNoKernel(const std::string& op) {
  return op == "mla_attn_fwd" || op == "mla_attn_bwd" || op == "fp8_quantize" || op == "amax";
}

inline Event smallEvent(const std::string& op, DType dtype = DType::kBf16) {
  static const std::map<std::string, std::vector<Dim>> dims = {
      {"gemm", {{"m", 8}, {"n", 6}, {"k", 4}}},
      {"bgemm", {{"batch", 3}, {"m", 8}, {"n", 6}, {"k", 4}}},
      {"layernorm_fwd", {{"rows", 4}, {"cols", 16}}},
      {"layernorm_bwd", {{"rows", 4}, {"cols", 16}}},
      {"softmax_fwd", {{"rows", 32}, {"cols", 8}}},
      {"softmax_bwd", {{"rows", 32}, {"cols", 8}}},
      {"cross_entropy_fwd", {{"rows", 4}, {"cols", 100}}},
      {"cross_entropy_bwd", {{"rows", 4}, {"cols", 100}}},
      {"gelu_fwd", {{"elems", 1000}}},
      {"gelu_bwd", {{"elems", 1000}}},
      {"dropout_fwd", {{"elems", 1000}}},
      {"dropout_bwd", {{"elems", 1000}}},
      {"add", {{"elems", 1000}}},
      {"embedding_fwd", {{"tokens", 16}, {"hidden", 8}, {"vocab", 50}}},
      {"embedding_bwd", {{"tokens", 16}, {"hidden", 8}, {"vocab", 50}}},
      {"adam", {{"params", 1000}}},
      {"cpu_adam", {{"params", 1000}}},
      {"offload_d2h", {{"elems", 1000}}},
      {"offload_h2d", {{"elems", 1000}}},
      {"rmsnorm_fwd", {{"rows", 4}, {"cols", 16}}},
      {"rmsnorm_bwd", {{"rows", 4}, {"cols", 16}}},
      {"swiglu_fwd", {{"elems", 1000}}},
      {"swiglu_bwd", {{"elems", 1000}}},
      {"mla_attn_fwd", {{"batch", 4}, {"seq", 37}, {"qk_dim", 24}, {"v_dim", 16}, {"causal", 1}}},
      {"mla_attn_bwd", {{"batch", 4}, {"seq", 37}, {"qk_dim", 24}, {"v_dim", 16}, {"causal", 1}}},
      {"rope_fwd", {{"tokens", 8}, {"heads", 3}, {"dim", 16}}},
      {"rope_bwd", {{"tokens", 8}, {"heads", 3}, {"dim", 16}}},
      {"flash_attn_fwd", {{"batch", 4}, {"groups", 2}, {"seq", 37}, {"dim", 16}, {"causal", 1}}},
      {"flash_attn_bwd", {{"batch", 4}, {"groups", 2}, {"seq", 37}, {"dim", 16}, {"causal", 1}}},
      {"moe_router_fwd", {{"tokens", 12}, {"experts", 8}, {"topk", 2}}},
      {"moe_router_bwd", {{"tokens", 12}, {"experts", 8}, {"topk", 2}}},
      {"moe_permute", {{"rows", 24}, {"hidden", 16}}},
      {"moe_unpermute", {{"rows", 24}, {"hidden", 16}, {"topk", 2}}},
      {"fp8_quantize", {{"elems", 1000}, {"copies", 2}, {"block", 128}, {"scale_bytes", 4}}},
      {"amax", {{"elems", 1000}}},
      {"memory_pass", {{"read_bytes", 4000}, {"write_bytes", 2000}}},
  };
  auto it = dims.find(op);
  if (it == dims.end()) {
    ADD_FAILURE() << "no test dims for op '" << op << "'";
    return makeCompute("add", {{"elems", 1}}, "", dtype, "test");
  }
  bool gemm_like = op == "gemm" || op == "bgemm";
  return makeCompute(op, it->second, gemm_like ? "nt" : "", dtype, "test");
}

}  // namespace evsim::test

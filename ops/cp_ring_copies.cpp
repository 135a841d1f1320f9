// Transformer Engine's ring-attention copies and merges, bytes as ops/cp_ring_copies.h works them.
#include "ops/cp_ring_copies.h"

namespace evsim {

namespace {
// The mean over the ring's ranks of a full-size add (2x -> x) and a half-size one (x -> x/2).
EagerKernel meanAdd(std::string_view name, int64_t x) { return {name, 3 * x / 2, 3 * x / 4}; }
}  // namespace

EagerKernel cpRingKvPack(int64_t k) { return {"cp_kv_pack", 2 * k, 2 * k}; }

EagerKernels cpRingOutCorrections(int ring, int64_t q) {
  EagerKernels kernels{{"cp_out_correction_init", q, q}};
  for (int i = 1; i < ring; ++i) kernels.push_back(meanAdd("cp_out_correction", q));
  return kernels;
}

EagerKernel cpRingKvGradBuffer(int64_t k) { return {"cp_kv_grad_buffer", 2 * k, 2 * k}; }

EagerKernels cpRingGradAccumulations(int step, int64_t q, int64_t k) {
  if (step == 0) {
    return {{"cp_dq_accumulate", q, q}, {"cp_dk_accumulate", k, k}, {"cp_dv_accumulate", k, k}};
  }
  return {meanAdd("cp_dq_accumulate", q), meanAdd("cp_dk_accumulate", k),
          meanAdd("cp_dv_accumulate", k)};
}

}  // namespace evsim

// Eager PyTorch's kernels, bytes as ops/eager_ops.h works them.
#include "ops/eager_ops.h"

namespace evsim {

namespace {
constexpr int64_t kFp32 = 4;
constexpr int64_t kLabelBytes = 8;  // int64 token ids
}  // namespace

EagerKernels eagerRmsNormForward(int64_t rows, int64_t cols, int64_t e) {
  const int64_t N = rows * cols, R = rows, f = kFp32;
  return {
      {"rmsnorm_float", e * N, f * N},
      {"rmsnorm_pow", f * N, f * N},
      {"rmsnorm_mean", f * N, f * R},
      {"rmsnorm_add_eps", f * R, f * R},
      {"rmsnorm_rsqrt", f * R, f * R},
      {"rmsnorm_mul_rsqrt", f * N + f * R, f * N},
      {"rmsnorm_type_as", f * N, e * N},
      {"rmsnorm_mul_weight", e * N + e * cols, e * N},
  };
}

EagerKernels eagerRmsNormBackward(int64_t rows, int64_t cols, int64_t e) {
  const int64_t N = rows * cols, R = rows, f = kFp32;
  return {
      {"rmsnorm_mul_weight_bwd_input", e * N + e * cols, e * N},
      {"rmsnorm_mul_weight_bwd_weight", 2 * e * N, e * N},
      {"rmsnorm_weight_grad_sum", e * N, e * cols},
      {"rmsnorm_type_as_bwd", e * N, f * N},
      {"rmsnorm_mul_rsqrt_bwd_x", f * N + f * R, f * N},
      {"rmsnorm_mul_rsqrt_bwd_r", 2 * f * N, f * N},
      {"rmsnorm_rsqrt_grad_sum", f * N, f * R},
      {"rmsnorm_rsqrt_bwd_pow", f * R, f * R},
      {"rmsnorm_rsqrt_bwd_scale", f * R, f * R},
      {"rmsnorm_rsqrt_bwd_mul", 2 * f * R, f * R},
      {"rmsnorm_mean_bwd", f * R, f * N},
      {"rmsnorm_pow_bwd_copy", f * N, f * N},
      {"rmsnorm_pow_bwd_scale", f * N, f * N},
      {"rmsnorm_pow_bwd_mul", 2 * f * N, f * N},
      {"rmsnorm_grad_accumulate", 2 * f * N, f * N},
      {"rmsnorm_float_bwd", f * N, e * N},
  };
}

EagerKernels eagerRopeForward(int64_t tokens, int64_t heads, int64_t dim, int64_t seq,
                              int64_t e) {
  const int64_t n = tokens * heads * dim, freqs = kFp32 * seq * dim, f = kFp32;
  return {
      {"rope_float", e * n, f * n},
      {"rope_complex_mul", f * n + freqs, f * n},
      {"rope_type_as", f * n, e * n},
  };
}

EagerKernels eagerRopeBackward(int64_t tokens, int64_t heads, int64_t dim, int64_t seq,
                               int64_t e) {
  const int64_t n = tokens * heads * dim, freqs = kFp32 * seq * dim, f = kFp32;
  return {
      {"rope_type_as_bwd", e * n, f * n},
      {"rope_complex_mul_bwd", f * n + freqs, f * n},
      {"rope_float_bwd", f * n, e * n},
  };
}

EagerKernels eagerSwiGluForward(int64_t elems, int64_t e) {
  const int64_t F = elems;
  return {
      {"swiglu_silu", e * F, e * F},
      {"swiglu_mul", 2 * e * F, e * F},
  };
}

EagerKernels eagerSwiGluBackward(int64_t elems, int64_t e) {
  const int64_t F = elems;
  return {
      {"swiglu_mul_bwd_up", 2 * e * F, e * F},
      {"swiglu_mul_bwd_silu", 2 * e * F, e * F},
      {"swiglu_silu_bwd", 2 * e * F, e * F},
  };
}

EagerKernels eagerCrossEntropyForward(int64_t rows, int64_t vocab, int64_t e) {
  const int64_t L = rows * vocab, T = rows, f = kFp32;
  return {
      {"ce_logits_float", e * L, f * L},
      {"ce_log_softmax", 3 * f * L, f * L},
      {"ce_nll_loss", kLabelBytes * T + f * T, 2 * f},
  };
}

EagerKernels eagerCrossEntropyBackward(int64_t rows, int64_t vocab, int64_t e) {
  const int64_t L = rows * vocab, T = rows, f = kFp32;
  return {
      {"ce_nll_loss_bwd_zero", 0, f * L},
      {"ce_nll_loss_bwd", kLabelBytes * T + 2 * f, f * T},
      {"ce_log_softmax_bwd", 3 * f * L, f * L},
      {"ce_logits_float_bwd", f * L, e * L},
  };
}

EagerKernels eagerRepeatKvForward(int64_t tokens, int64_t groups, int64_t n_rep, int64_t dim,
                                  int64_t e) {
  const int64_t kv = e * tokens * groups * dim;
  return {
      {"repeat_kv_k", kv, n_rep * kv},
      {"repeat_kv_v", kv, n_rep * kv},
  };
}

EagerKernels eagerRepeatKvBackward(int64_t tokens, int64_t groups, int64_t n_rep, int64_t dim,
                                   int64_t e) {
  const int64_t kv = e * tokens * groups * dim;
  return {
      {"repeat_kv_k_bwd", n_rep * kv, kv},
      {"repeat_kv_v_bwd", n_rep * kv, kv},
  };
}

EagerKernel inputGradientSum(std::string_view name, int64_t elems, int64_t e) {
  return {name, 2 * e * elems, e * elems};
}

int64_t eagerRmsNormSavedBytes(int64_t rows, int64_t cols, int64_t e) {
  return kFp32 * rows * cols + kFp32 * rows + e * rows * cols;
}

int64_t totalBytes(const EagerKernels& kernels) {
  int64_t sum = 0;
  for (const EagerKernel& k : kernels) sum += k.read_bytes + k.write_bytes;
  return sum;
}

}  // namespace evsim

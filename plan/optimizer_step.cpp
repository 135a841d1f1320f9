// Per-step ops by framework: optimizer_step.h says what each framework runs and where it is read.
#include "plan/optimizer_step.h"

#include <fmt/format.h>

#include "common/checked.h"
#include "plan/strategy_check_report.h"

namespace evsim {

DType dataParallelGradDtype(Framework framework, DType model_dtype, bool reduce_in_bf16) {
  if (framework == Framework::kMegatron && model_dtype == DType::kBf16 && !reduce_in_bf16) {
    return DType::kFp32;
  }
  return model_dtype;
}

template <typename Report>
std::optional<typename Report::Value> optimizerImplCheck(const Strategy& s, const Report& report) {
  if (s.optimizer_impl != OptimizerImpl::kFused && s.framework != Framework::kFsdp) {
    return report(StrategyRule::kOptimizerImplNeedsFsdp,
                  "--optimizer-impl {} with --framework {}: only with --framework fsdp "
                  "(Megatron-LM's step is Apex / Transformer Engine's fused Adam)",
                  optimizerImplName(s.optimizer_impl), frameworkName(s.framework));
  }
  if (s.optimizer_impl == OptimizerImpl::kForLoop) {
    return report(StrategyRule::kOptimizerForLoop,
                  "--optimizer-impl for-loop: not modelled (its kernels run once per parameter "
                  "tensor, and the plan does not hold the model's tensor list); use fused or "
                  "foreach");
  }
  return std::nullopt;
}

template <typename Report>
std::optional<typename Report::Value> frameworkFlagCheck(const Strategy& s, const Report& report) {
  if (s.framework != Framework::kFsdp) {
    if (s.reshard != Reshard::kDefault) {
      return report(StrategyRule::kReshardNeedsFsdp,
                    "--reshard-after-forward {}: only with --framework fsdp",
                    reshardName(s.reshard));
    }
    if (s.fsdp_wrap != FsdpWrap::kSeparate) {
      return report(StrategyRule::kFsdpWrapNeedsFsdp, "--fsdp-wrap {}: only with --framework fsdp",
                    fsdpWrapName(s.fsdp_wrap));
    }
    if (s.torch_compile != TorchCompile::kDefault) {
      return report(StrategyRule::kTorchCompileNeedsFsdp,
                    "--torch-compile {}: only with --framework fsdp (Megatron-LM runs its own "
                    "fused kernels)",
                    torchCompileName(s.torch_compile));
    }
  }
  return optimizerImplCheck(s, report);
}

template std::optional<StrategyViolation> frameworkFlagCheck(const Strategy&,
                                                             const ViolationReport&);
template std::optional<std::string> frameworkFlagCheck(const Strategy&, const MessageReport&);

std::optional<std::string> optimizerImplViolation(const Strategy& s) {
  return optimizerImplCheck(s, MessageReport{});
}

std::optional<std::string> frameworkFlagViolation(const Strategy& s) {
  return frameworkFlagCheck(s, MessageReport{});
}

const std::vector<ForeachKernel>& foreachAdamWKernels() {
  // In order: p *= 1 - lr wd; m.lerp_(g, 1 - b1); v *= b2; v.addcmul_(g, g, 1 - b2) (g read
  // once); d = sqrt(v) (a new tensor); d /= sqrt(bias correction 2); d += eps;
  // p.addcdiv_(m, d, -step size).  20 fp32 elements per parameter, against the fused step's 7.
  static const std::vector<ForeachKernel> kernels = {
      {"adamw_weight_decay", 1, 1},   {"adamw_exp_avg_lerp", 2, 1},
      {"adamw_exp_avg_sq_mul", 1, 1}, {"adamw_exp_avg_sq_addcmul", 2, 1},
      {"adamw_denom_sqrt", 1, 1},     {"adamw_denom_div", 1, 1},
      {"adamw_denom_add_eps", 1, 1},  {"adamw_param_addcdiv", 3, 1}};
  return kernels;
}

const std::vector<ForeachKernel>& fusedAdamWKernels() {
  // FusedAdamMathFunctor<scalar_t, 4, ADAMW>: loads param, grad, exp_avg, exp_avg_sq; stores
  // param, exp_avg, exp_avg_sq. 7 fp32 elements per parameter.
  static const std::vector<ForeachKernel> kernels = {{"adamw_fused", 4, 3}};
  return kernels;
}

const std::vector<ForeachKernel>& clipGradNormKernels() {
  // torch.nn.utils.clip_grad_norm_: _foreach_norm over the gradients (read), the total norm of
  // the per-tensor norms (tiny), then _foreach_mul_ by the clamped coefficient (read + write),
  // which runs whether or not the norm exceeds max_norm.
  static const std::vector<ForeachKernel> kernels = {{"grad_norm", 1, 0},
                                                     {"grad_clip_scale", 1, 1}};
  return kernels;
}

std::vector<StepOp> frameworkStepOps(int64_t params, DType model_dtype, Offload offload,
                                     Framework framework, OptimizerImpl impl) {
  if (framework != Framework::kFsdp || offloadsOptimizer(offload)) {
    return optimizerStepOps(params, model_dtype, offload);
  }
  const int64_t fp32 = dtypeBytes(DType::kFp32);
  std::vector<StepOp> ops;
  auto add = [&](const ForeachKernel& k) {
    const int64_t per_tensor = checkedMul(params, fp32, "optimizer bytes");
    const int64_t read = checkedMul(per_tensor, int64_t{k.reads}, "optimizer bytes");
    // A reduction writes one fp32 norm per tensor: counted as one (the event needs bytes > 0).
    const int64_t write =
        k.writes > 0 ? checkedMul(per_tensor, int64_t{k.writes}, "optimizer bytes") : fp32;
    ops.push_back({makeCompute("memory_pass", {{"read_bytes", read}, {"write_bytes", write}}, "",
                               DType::kFp32),
                   Stream::kCompute, k.name});
  };
  for (const ForeachKernel& k : clipGradNormKernels()) add(k);
  // strategyViolation refuses the for-loop step (per-tensor kernels) before a plan is built.
  EVSIM_CHECK(impl != OptimizerImpl::kForLoop, "the for-loop AdamW step is not modelled");
  const auto& adamw = impl == OptimizerImpl::kFused ? fusedAdamWKernels() : foreachAdamWKernels();
  for (const ForeachKernel& k : adamw) add(k);
  return ops;
}

}  // namespace evsim

// What one training step adds beside the forward and backward, by framework: the wire type of the
// data-parallel gradient reduction and the ops of the optimizer step.
//
// Gradient reduction (Megatron-LM): with --bf16, megatron/training/arguments.py sets
// accumulate_allreduce_grads_in_fp32 = True ("bfloat16 requires gradient accumulation and
// all-reduce to be done in fp32") unless --grad-reduce-in-bf16 is given; Megatron-core's
// DistributedDataParallelConfig.grad_reduce_in_fp32 follows it, so the fp32 main-gradient buffer
// is what the DP all-reduce / reduce-scatter sends (4 bytes per parameter; the memory model
// already holds that fp32 buffer). fp16 models reduce in fp16 (no such default). The Llama 3
// paper (sec. 3.3.2, numerical stability) reduce-scatters gradients in FP32 too. FSDP's fp32 reduce_dtype is set
// where its collectives are built (plan_core.cpp, finish_plan.cpp).
//
// Optimizer step under --framework fsdp (torchtitan): clip_grad_norm_ (training.max_norm 1.0;
// foreach on CUDA whatever the optimizer's implementation), then torch.optim.AdamW as
// Strategy::optimizer_impl says (torchtitan's optimizer.implementation):
//   fused (its default since 2025-02-24, 6e4988550 "use Fused AdamW as default"): one
//     _fused_adamw_ kernel (aten/src/ATen/native/cuda/fused_adamw_impl.cu, FusedAdamMathFunctor
//     with depth 4): each element of p, g, m and v loaded once, p, m and v stored (the gradient
//     is stored back only to unscale it with a grad_scale, which bf16 training does not pass):
//     4 reads + 3 writes of fp32;
//   foreach (the default before, and what torchtitan's Dec 2024 benchmarks ran:
//     build_optimizers passed fused=False, foreach=True): _multi_tensor_adam's eight separate
//     foreach kernels, 20 fp32 elements a parameter.
// Every tensor is the rank's fp32 shard. Megatron's step is one fused multi-tensor Adam (the
// "adam" event).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/iteration_plan.h"
#include "plan/strategy.h"

namespace evsim {

// The dtype the DP group reduces gradients in: fp32 for Megatron's bf16 models unless told to
// reduce in bf16, else the model's.
// `reduce_in_bf16` is Megatron's --grad-reduce-in-bf16 (Strategy::grad_reduce_in_bf16).
DType dataParallelGradDtype(Framework framework, DType model_dtype, bool reduce_in_bf16);

// fp32 elements each foreach kernel reads and writes per parameter (torch/optim/adam.py,
// _multi_tensor_adam with decoupled weight decay, capturable=False; clip_grad_norm_ with foreach).
struct ForeachKernel {
  std::string_view name;
  int reads = 0;   // fp32 tensors read, per parameter
  int writes = 0;  // fp32 tensors written, per parameter (0: a reduction, one fp32 out)
};
const std::vector<ForeachKernel>& foreachAdamWKernels();
const std::vector<ForeachKernel>& fusedAdamWKernels();  // the one _fused_adamw_ pass
const std::vector<ForeachKernel>& clipGradNormKernels();

// Why `s` cannot run its optimizer_impl (one line, as strategyViolation and search say it):
// anything but fused under Megatron, and the for-loop step (not modelled); nullopt otherwise.
std::optional<std::string> optimizerImplViolation(const Strategy& s);
// The flags of one framework used with another: --reshard-after-forward and --torch-compile
// without --framework fsdp, then optimizerImplViolation. Part of strategyViolation; also what the
// --gpus union (RunOptions::unionSpace) checks, whose strategies are built from a base strategy,
// not from these flags.
std::optional<std::string> frameworkFlagViolation(const Strategy& s);
// The same check over a report (plan/strategy_check_report.h), as strategyViolation runs it;
// instantiated for ViolationReport and MessageReport.
template <typename Report>
std::optional<typename Report::Value> frameworkFlagCheck(const Strategy& s, const Report& report);

// The optimizer step's ops over `params` parameters under `framework`: optimizerStepOps (the
// fused Adam, or the offloaded step) for Megatron and for any offloaded step; under FSDP
// clip_grad_norm_'s kernels then AdamW's (`impl`: fused or foreach) as memory passes.
std::vector<StepOp> frameworkStepOps(int64_t params, DType model_dtype, Offload offload,
                                     Framework framework, OptimizerImpl impl);

}  // namespace evsim

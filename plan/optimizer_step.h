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
// where its collectives are built (plan_core.cpp).
//
// Optimizer step under --framework fsdp (torchtitan): torch.optim.AdamW with foreach=True (its
// default before the fused implementation became the default, and what torchtitan's Dec 2024
// benchmarks ran: build_optimizers passes fused=False, foreach=True), i.e. _multi_tensor_adam's
// separate foreach kernels, then clip_grad_norm_ (training.max_norm 1.0). Every tensor is the
// rank's fp32 shard. Megatron's step is one fused multi-tensor Adam (the "adam" event).
#pragma once

#include <cstdint>
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
const std::vector<ForeachKernel>& clipGradNormKernels();

// The optimizer step's ops over `params` parameters under `framework`: optimizerStepOps (the
// fused Adam, or the offloaded step) for Megatron and for any offloaded step; foreach AdamW's
// kernels and clip_grad_norm_'s as memory passes under FSDP.
std::vector<StepOp> frameworkStepOps(int64_t params, DType model_dtype, Offload offload,
                                     Framework framework);

}  // namespace evsim

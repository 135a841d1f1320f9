#pragma once
// ZeRO-2's gradient reduction as DeepSpeed runs it (deepspeedai/DeepSpeed edaa72212,
// deepspeed/runtime/zero/stage_1_and_2.py; Megatron-LM's DDP has no ZeRO-2):
// - partition_gradients (stage 2) reduces on every micro-batch, not only at the accumulation
//   boundary: reduce_ready_partitions_and_remove_grads calls
//   reduce_independent_p_g_buckets_and_remove_grads whenever partition_gradients is set (and
//   runtime/engine.py allreduce_gradients: "ZeRO stage >= 2 communicates during non gradient
//   accumulation boundaries as well"). Each rank keeps only its partition of the reduced gradient
//   (grads_in_partition), so no unsharded gradient outlives its bucket.
// - A parameter's gradient hook copies it into the current IPG bucket (contiguous_gradients, the
//   default); when `bucket.elements + param.numel() > reduce_bucket_size` the bucket is reduced
//   first (reduce_ipg_grads -> average_tensor), then the parameter goes into the next one. What is
//   left is reduced by the backward's epilogue (independent_gradient_partition_epilogue).
// - reduce_bucket_size is in elements, default 5e8 (zero/config.py); setup_buckets allocates
//   torch.empty(reduce_bucket_size) in the optimizer's (the model's) dtype, and a second one with
//   overlap_comm ("double buffers"): 1 or 2 x reduce_bucket_size x e bytes, whatever the model's
//   size.
// - overlap_comm (eventsim's --dp-overlap; off by default for stage 2): the reduction runs on the
//   reduction stream, and before it is issued the compute stream waits for that stream
//   (average_tensor: current_stream().wait_stream(reduction_stream)), so bucket i's reduction runs
//   beside the backward until bucket i+1 closes, and the epilogue waits for the last. Without
//   overlap_comm each reduction runs on the compute stream, in order.
// At a layer's granularity (the plan knows a layer's parameters, not each tensor's): a bucket
// closes at the end of a layer (in backward order) when the next layer would not fit, and a layer
// larger than the bucket is reduced as one bucket (DeepSpeed reduces it in parts of at most the
// bucket, or alone when one tensor exceeds it).
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/op_list.h"
#include "plan/strategy.h"

namespace evsim {

// DeepSpeed's default reduce_bucket_size, in elements.
inline constexpr int64_t kDeepSpeedReduceBucketElements = 500'000'000;

// The bucket in elements, else DeepSpeed's default. `dp_bucket_bytes` counts the gradient wire's
// bytes (`wire_bytes` an element; io/strategy_from_options.cpp: --ddp-bucket-size N is N elements,
// --dp-bucket-mb M is M MiB of the wire), as it does for DDP's buckets.
int64_t zero2BucketElements(const Strategy& strategy, int64_t wire_bytes);

// The IPG buffers' bytes: one bucket of `elem_bytes` elements (the model dtype, DeepSpeed's
// torch.empty(reduce_bucket_size)), two with overlap_comm (--dp-overlap).
int64_t zero2BufferBytes(const Strategy& strategy, int64_t wire_bytes, int64_t elem_bytes);

struct Zero2Bucket {
  int last_layer = 0;    // the layer (in backward order) after whose backward it is reduced
  int64_t elements = 0;  // gradient elements in it
};

// The buckets of a chunk whose layers' gradients come in `backward_layers` order ({layer,
// parameters}), for buckets of `bucket_elements`.
std::vector<Zero2Bucket> zero2Buckets(const std::vector<std::pair<int, int64_t>>& backward_layers,
                                      int64_t bucket_elements);

// The op name of a ZeRO-2 bucket's reduction (dense parameters; experts' apart).
inline constexpr std::string_view kZero2ReduceName = "zero2_grad_reduce_scatter";
inline constexpr std::string_view kZero2ExpertReduceName = "zero2_expert_grad_reduce_scatter";

// With overlap_comm: each ZeRO-2 reduction of `backward` (ops named as above, on the DP stream)
// runs beside the ops up to the next bucket's reductions (OpInstance::overlap_ops); the chunk's
// last bucket stays exposed (the epilogue waits for it). Ops already running beside others are
// untouched.
void overlapZero2Reductions(OpList& backward);

}  // namespace evsim

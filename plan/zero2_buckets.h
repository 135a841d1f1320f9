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
// By parameter, as the hook sees them: each weight-gradient GEMM's weight (m x n of its "tn"
// GEMM: out x in features, the linear's weight on the rank; batch x m x n for the routed experts'
// batched wgrad GEMM, their weights on the rank) arrives after that GEMM; what else a layer holds
// (norm gains, biases, the embedding, a tied output weight) arrives after the layer's last
// backward op, as one gradient (a layer whose GEMMs claim more than it holds arrives whole there).
// A bucket is reduced when a gradient arrives that would overflow it (after that gradient's op),
// the last one by the epilogue after the chunk's last op; a gradient larger than the bucket is
// reduced alone (DeepSpeed's extra_large_param_to_reduce).
// Where eventsim departs from DeepSpeed: the wire is the plan's DP gradient dtype (Megatron's fp32
// unless --grad-reduce-in-bf16, which gives DeepSpeed's default communication_data_type, the
// model's bf16), so a bucket's elements count that wire; and DeepSpeed's PipelineEngine refuses
// ZeRO-2 with pipeline parallelism (runtime/pipe/engine.py), so under P > 1 the per-micro-batch
// reductions are an extrapolation: every chunk's backward ends with its own epilogue.
#include <cstdint>
#include <string_view>
#include <vector>

#include "events/event_table.h"
#include "ops/op_list.h"
#include "plan/iteration_plan.h"
#include "plan/layer_params.h"
#include "plan/strategy.h"

namespace evsim {

// DeepSpeed's default reduce_bucket_size, in elements.
inline constexpr int64_t kDeepSpeedReduceBucketElements = 500'000'000;

// The bucket in elements, else DeepSpeed's default. `dp_bucket_bytes` counts the gradient wire's
// bytes (`wire_bytes` an element; io/strategy_from_options.cpp: --ddp-bucket-size N is N elements,
// --dp-bucket-mb M is M MiB of the wire), as it does for DDP's buckets.
int64_t zero2BucketElements(const Strategy& strategy, int64_t wire_bytes);

// The IPG buffers' bytes: one bucket of `elem_bytes` elements (the model dtype, DeepSpeed's
// torch.empty(reduce_bucket_size)), two with overlap_comm (--dp-overlap); none under
// --grad-reduce-sync step, where each queued bucket is a buffer of its own from its first gradient
// to its reduction's end (modeler/pending_reductions.h): a persistent buffer beside them would
// count the bucket being filled twice.
int64_t zero2BufferBytes(const Strategy& strategy, int64_t wire_bytes, int64_t elem_bytes);

// One gradient as DeepSpeed's hook receives it: after op `after_op` of the chunk's backward list,
// `elements` gradient elements, `experts` of them a routed expert's (reduced over the
// expert-data-parallel group).
struct Zero2Arrival {
  int after_op = 0;
  int64_t elements = 0;
  int64_t experts = 0;
};

// The gradients of a chunk's `backward` list (ops of `table`), in the order they arrive, for the
// chunk's layers' parameters `layer_params` ({layer, parameters on the rank}) of which
// `layer_experts` are routed experts' (under expert parallelism, where the batched wgrad GEMMs
// are theirs; absent: none). A layer whose weight-gradient GEMMs account for more than its
// parameters (a tied output weight) arrives whole after its last op.
std::vector<Zero2Arrival> zero2Arrivals(const OpList& backward, const EventTable& table,
                                        const LayerParams& layer_params,
                                        const LayerParams& layer_experts);

struct Zero2Bucket {
  int after_op = 0;      // the backward op after which it is reduced
  int64_t elements = 0;  // gradient elements in it
  int64_t experts = 0;   // of them routed experts'
};

// DeepSpeed's buckets of `bucket_elements` over the arrivals: reduced before the gradient that
// would overflow it goes in (at that gradient's op), the rest after `last_op` (the epilogue).
std::vector<Zero2Bucket> zero2Buckets(const std::vector<Zero2Arrival>& arrivals,
                                      int64_t bucket_elements, int last_op);

// What the search's memory check knows of a chunk's gradient arrivals (a_1 .. a_n in backward
// order, zero2Arrivals) without its op lists, all in elements on the rank: their sum; a least
// value of a_1; a most value of every a_j, 2 <= j <= n, but a trailing one; and that trailing
// arrival, known to be a_n whole (the embedding's, at the chunk's last op), or 0 for none.
struct Zero2ChunkGradients {
  int64_t total = 0;
  int64_t first_at_least = 0;
  int64_t later_at_most = 0;
  int64_t trailing = 0;
};

// A least value of the elements of zero2Buckets(arrivals, bucket_elements, ...)'s first bucket
// F, for any arrivals that `g` describes. If the sum fits the bucket nothing closes it before
// the epilogue: F = total. Otherwise F holds a_1 (F >= a_1), and it is closed by the first a_j
// (j >= 2) that would overflow it: F + a_j > bucket, so F >= bucket + 1 - later_at_most, or, when
// a_j is the trailing arrival, F is every arrival before it, total - trailing. So
//   F >= max(first_at_least, min(bucket + 1 - later_at_most, total - trailing)),
// at least 0 and at most total.
int64_t zero2FirstBucketAtLeast(const Zero2ChunkGradients& g, int64_t bucket_elements);

// The op name of a ZeRO-2 bucket's reduction (dense parameters; experts' apart).
inline constexpr std::string_view kZero2ReduceName = "zero2_grad_reduce_scatter";
inline constexpr std::string_view kZero2ExpertReduceName = "zero2_expert_grad_reduce_scatter";

// With overlap_comm: each ZeRO-2 reduction of `backward` (ops named as above, on the DP stream)
// runs beside the ops up to the next bucket's reductions (OpInstance::overlap_ops); the chunk's
// last bucket stays exposed (the epilogue waits for it). Ops already running beside others are
// untouched.
void overlapZero2Reductions(OpList& backward);

// --grad-reduce-sync step: the ZeRO-2 reductions of `backward` (ops named as above) removed from
// it and returned as buckets (GradBucket: its event, the op of the remaining list it follows, -1
// when none, its bytes from `table`, whether the experts'), in list order. The timing engine
// queues them on the DP stream as each micro-batch's gradient task reaches that op, and only the
// optimizer step (or a queue bound) waits for them (modeler/timing_engine.h).
std::vector<GradBucket> deferZero2Reductions(OpList& backward, const EventTable& table);

}  // namespace evsim

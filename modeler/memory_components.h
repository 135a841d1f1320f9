#pragma once
// The bytes a training framework holds on one device beside the saved activations, one small
// function per mechanism, so that each can be checked by hand
// (tests/modeler/memory_components_test). modeler/memory_model.h adds them up per pipeline stage. e
// is the bytes of the model dtype, T the tokens of one micro-batch on the rank (s/C x b), h the
// hidden size, t the TP size.
//
// Model states per parameter of the rank's TP shard (weights / gradients / optimizer state):
//   Megatron-LM, 16-bit model: 2 / 4 (fp32 main gradient) / 12 (fp32 master, Adam m and v);
//     fp32 model 4 / 4 / 8. ZeRO-1 (distributed optimizer) divides the optimizer state by the
//     shard group G = D x C, ZeRO-2 also the gradients (held in the model dtype, DeepSpeed's
//     grads_in_partition: e/G, not 4/G), ZeRO-3 also the weights.
//   FSDP2 (torchtitan, bf16 parameters, fp32 reduction): fp32 sharded parameters 4/G, fp32
//     sharded gradients 4/G, Adam moments 8/G: 16/G bytes per parameter in all.
//
// Buffers of the data-parallel sharding (ZeRO-3 and FSDP; Megatron's ZeRO-0/1 reduce and gather
// in views of its contiguous buffers and need none: Megatron-LM d98e8a64dd param_and_grad_buffer.py
// allocates grad_data = torch.zeros(numel) once for all of a buffer's parameters and each bucket's
// grad_data is a view of it (_get), so the DDP bucket size the timing uses, plan/ddp_buckets.h,
// adds no bytes), with L the largest layer's parameters on the
// rank, S the chunk's, g the gathered dtype's bytes (e, or 1 for linear weights with FP8
// all-gather) and r the reduction dtype's bytes (4: FSDP's fp32 reduce_dtype; e: DeepSpeed's
// ZeRO-3):
//   FSDP2 without pipeline, as torchtitan 9dec370 wraps the model (--fsdp-wrap root;
//     parallelize_llama.apply_fsdp:
//     fully_shard on each block, the last block with reshard_after_forward=False, then on the
//     model, whose own parameters, the embedding, final norm and output layer, R, form the root
//     group), with B the largest block's parameters and H the output weight's:
//     - the root group is gathered first (the root's pre-forward) and never resharded after the
//       forward (FSDPState._lazy_init sets the root group's post_forward_mesh_info = None); its
//       post_backward runs in the root's final callback (its inputs, token ids, need no grad),
//       so its e-byte gathered parameters (e R, embedding and head are not Float8 linears) are
//       held through the step and the head's e-byte gradient (e H) from the head's backward on;
//     - at a block's backward, reshard after forward: e R + e H, the block's gathered parameters
//       and the next one's prefetch (2gB), its unsharded gradient (eB) and the reduce-scatter
//       input (rB); no reshard: e R + e H, every block gathered (g (S - R)) and one block's
//       gradient and reduce-scatter input ((e + r)B);
//     - at the loss (before any block's backward: the last block's pre-backward comes after it):
//       e R and the blocks the forward left gathered: the last one (gB, torchtitan's default),
//       none (--reshard-after-forward always), all (never: g (S - R)). The stage peak takes the
//       larger moment (memory_model.cpp).
//   FSDP2 without pipeline, as torchtitan wraps the model since 2025-07-28 (--fsdp-wrap separate,
//     the default; torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76c6): the
//     embedding (E) a group resharded after the forward per the policy, [final norm, output]
//     (H' = the head's parameters) a group resharded after the forward only under "always",
//     every block alike (no kept last block), and a root with no parameters of its own:
//     - at a block's backward, reshard after forward: 2gB + eB as above, and the reduce-scatter
//       input of the group before: the head's r H' at the last block's backward (its
//       post-backward resharded it and reduce-scattered its gradient, whose input stays until the
//       next group's post-backward), a block's r B after: r max(B, H'); no reshard: the
//       embedding's group (e E) and every block (g (S - E - H')) gathered, the same eB +
//       r max(B, H');
//     - at the loss: e H' (kept since its forward; 0 under "always"), and under "never" e E and
//       every block, g (S - E - H');
//     - with tied embeddings (one chunk holding both) [embedding, norm, output] is one group kept
//       through the step: the root's terms with R its parameters, no kept last block;
//     - the head's own backward (its gathered parameters, gradient and reduce-scatter input
//       beside the prefetched last block) is not a moment of its own: the loss's transient beside
//       e H' is taken instead (8 T V/t against (2e + r) H' + g B on torchtitan's Llama rows).
//   Megatron's ZeRO-3 (eventsim's, no root group): the same with the largest layer L for B and
//     no root terms: 2gL + (e + r)L with reshard, gS + (e + r)L without.
//   with pipeline parallelism (PyTorch pipelining with FSDP): gradient sync and reshard after
//     backward are off until the last micro-batch, so the chunk stays gathered (gS) and its
//     gradients accumulate unsharded in the reduction dtype (rS, from the chunk's first backward
//     on: placed against the held activations by the order walk, accumulated_gradients.h), and
//     a group's autograd gradients (eL) live until post_backward adds them into the fp32 ones.
//     Here gS + eL; the reduce-scatters run after the step's last backward, when no activations
//     are held (each group's rL input beside the remaining accumulated gradients: below the
//     peak).
//   The reduce-scatter as FSDP2 runs it (torch.distributed.fsdp _fsdp_collectives.foreach_reduce
//     and _fsdp_param_group.post_backward, PyTorch 2.5-2.6): the rL input is allocated in the
//     compute stream, the e-byte gradients copied (cast) into it and then dropped, the rL/G output
//     allocated in the reduce-scatter stream becomes (or is added into) the sharded gradient, and
//     the input is kept (ReduceScatterState) until the next group's post_backward, so through the
//     next group's backward: (e + r)L at once, never two inputs.
//   ZeRO-2 as DeepSpeed runs it (Megatron-LM's DDP has no ZeRO-2; plan/zero2_buckets.h): the
//     gradients are reduced bucket by bucket in every micro-batch's backward (the timing's op
//     lists hold those reductions), so only the rank's partition outlives its bucket, in the
//     model dtype (e/G a parameter, not 4/G; zero2StepGradientBytes below); the IPG
//     buffers, torch.empty(reduce_bucket_size) in the model dtype, one, two with overlap_comm
//     (--dp-overlap): (1 or 2) x bucket x e, the bucket --dp-bucket-mb's bytes or DeepSpeed's
//     default 5e8 elements.
//     Under --grad-reduce-sync step none: each bucket is a buffer of its own from its first
//     gradient to its reduction's end, in the model dtype while it fills and in the wire dtype
//     from its issue (the cast), the one being filled among them
//     (modeler/pending_reductions.h; the walk's peak: pendingReductionPeak below).
// Transients, each at its own moment of the step (the stage peak adds the largest):
//   recompute: the block whose activations are rebuilt for its backward, what it saves without
//     recomputation less what it kept;
//   loss (last stage): beside the held fp32 logits (layer_ops), Megatron's vocabulary-parallel
//     cross-entropy upcasts the e-byte logits and works in place, e T V/t more; PyTorch's
//     cross_entropy(pred.float()) (torchtitan) makes, beside the held fp32 log-softmax output,
//     nll_loss's fp32 gradient and log_softmax_backward's fp32 output, 8 T V/t (its forward, the
//     e-byte logits and their fp32 copy, e + 4, is less); under TP torchtitan's loss_parallel
//     runs DTensor's decomposition, whose backward holds zeros_like(x), exp(x) and their sum,
//     12 T V/t (its forward x, x - max and exp(x - max) beside the logits, e + 12 less the
//     output not yet made, is less for e <= 4);
//   embedding gradient (first stage, Megatron): the word embedding's dense e-byte gradient
//     (V/t x h) before it is added to the fp32 main gradient;
//   sequence parallel: a column-parallel GEMM's all-gathered input and, in its backward, the input
//     gradient before its reduce-scatter, 2 e T h (FSDP: e T h, the gradient only: DTensor TP
//     saves the gathered input as the linear's activation, LayerShape::saves_gathered_input).
//     Megatron-LM (tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication,
//     000c4ac) gathers into the process-wide GlobalMemoryBuffer ("mpu": allocated once, reused by
//     every layer, never freed), and its backward's grad_input = grad_output.matmul(weight) (full
//     sequence x h) lives from the dgrad GEMM to the function's return: at a gradient hook's
//     instant, after the linear's backward has returned, only the kept buffer is held, e T h
//     (sequenceParallelGradInputBytes is the part that is not; bucketMoment below);
//   context parallel, by --cp-comm-type (ops/cp_comm.h), with k = e T (g d / t) the rank's K (g
//     query groups, d head size) and q = e T (a d / t) its Q: the ring (p2p) the K and V chunk
//     being received while the current one is used, and in the backward their gradients,
//     2 x 2 x 2 k; the a2a the send copy and receive buffer of Q, K, V, 2 (q + 2k); allgather's
//     backward the gathered K and V and their full-length gradients (Transformer Engine's k_ag,
//     v_ag, dk, dv), 4 C k; a2a+p2p the larger of its ring's (over C / A ranks, the same 8k) and
//     its a2a's;
//   context parallel under FSDP (PyTorch's ring attention, torch.distributed.tensor.experimental,
//     as torchtitan runs it): with k' = e T (a d / t) the rank's K at the query heads' width
//     (torchtitan repeats K and V to every query head before SDPA), its backward holds fp32
//     dQ, dK, dV accumulators (6 k'), fp32 dK|dV concatenated and permuted to the next rank (send
//     and receive, 8 k'), one step's 16-bit dQ, dK, dV (3 k'), and the K and V it attends to: all
//     C ranks' gathered once (--cp-comm-type allgather: the rotater's default in Dec 2024, 2 C k')
//     or the ring's pair sent and received (any other type: ALL_TO_ALL, 4 k');
//   MoE (per MoE layer): the permuted token copies of one micro-batch (T_r k c tokens, T_r the
//     rank's tokens, k the top-k, c the capacity factor or load imbalance) as the all-to-all's
//     send and receive buffers, 2 e T_r k c h.
// Under FSDP a block's gathers (SP, CP) are ordinary allocations of its forward or backward, so
// the stage peak adds the larger of the loss (or embedding) transient and the block's recompute
// plus its gathers; Megatron's SP gathers land in a global buffer kept for the step, so there
// the largest of each kind adds (memory_model.cpp).
// Buffers live through the step:
//   pipeline (Megatron): one received activation and one received gradient in flight, 2 e T_r h;
//   pipeline (torch.distributed.pipelining, FSDP), with a = e T_r h one micro-batch's stage input
//     or output and m micro-batches: each chunk that receives keeps m receive buffers made once
//     (the in-flight ones are its first layer's saved input, already held), and their .grad, the
//     input gradients it sent back, until the next step clears them, m - in flight of each by the
//     last time the peak is held: 2 (m R - n) a for R receiving chunks and n in flight; each chunk
//     that sends keeps m gradient receive buffers and, in fwd_cache until their backward, the
//     outputs of its in-flight micro-batches: (m + n / v) a per sending chunk of the v; the last
//     chunk keeps every micro-batch's e-byte logits (output_chunks) until the step ends,
//     m e T V/t;
//   FP8 (models with fp8: true): Transformer Engine caches each linear weight's fp8 copy and its
//     transpose across micro-batches, 2 bytes per block parameter (Megatron); with FSDP's fp8
//     all-gather the gathered weight is already fp8 and the backward makes its transpose, 1 byte
//     per parameter of the largest layer. The per-tensor scales and amax histories are bytes per
//     tensor, not per element, and left out.
//   cuBLAS workspace (the device file's memory.cublas_workspace_mib).
// The optimizer step, a moment of its own after the last backward (no activations held; FSDP2's
// root post-backward callback has freed the last reduce-scatter input, and PyTorch's pipelining
// has reduce-scattered and freed the accumulated gradients and resharded; what pipelining keeps
// to the next step stays, torchPipelineBufferBytes with nothing in flight): foreach AdamW
// (torch/optim/adamw.py _multi_tensor_adamw, PyTorch 2.2 on) allocates exp_avg_sq_sqrt =
// _foreach_sqrt(exp_avg_sqs), a tensor like each exp_avg_sq (fp32, the shard's parameters: 4/G
// bytes a parameter, half the Adam state), then divides, adds eps and applies it in place; it is
// freed when the function returns. Its other intermediates are Python floats (bias corrections,
// step sizes, capturable=False) or absent with torchtitan's settings (float betas: no
// scaled_device_grads; AdamW's weight decay multiplies the parameters in place; no maximize).
// One (device, dtype) group holds every fp32 shard; torchtitan keeps one optimizer per model part
// (OptimizersContainer: one per pipeline chunk on the rank) and steps them one after another, so
// the temporary is the largest chunk's. Fused AdamW (_fused_adamw_) and Megatron's fused Adam
// allocate none.
// Outside PyTorch's allocator: the CUDA context and NCCL's buffers per communicator the rank
// uses (TP, CP, PP, DP, EP, expert-DP groups of more than one rank).

#include <cstdint>
#include <vector>

#include "config/device_config.h"
#include "config/model_config.h"
#include "plan/strategy.h"

namespace evsim {

// FSDP2's reduce dtype as torchtitan sets it (mixed_precision_reduce = "float32"): bytes a gradient
// element is reduce-scattered and accumulated in.
inline constexpr double kFsdpReduceBytes = 4;

// Bytes per parameter of the rank's shard, by part.
struct StateBytesPerParameter {
  double weights = 0, gradients = 0, optimizer = 0;
  double total() const { return weights + gradients + optimizer; }
};
// `zero` the effective ZeRO stage (0 without a shard group), `group` the shard group's ranks;
// `offload_optimizer` moves the optimizer state to the host (Megatron only).
StateBytesPerParameter stateBytesPerParameter(Framework framework, DType dtype, int zero, int group,
                                              bool offload_optimizer);

// What one device of a stage needs of the layers of its chunks.
struct StageLayerFacts {
  int64_t parameters = 0;                // on the rank, all chunks
  int64_t block_parameters = 0;          // of transformer blocks (linear weights and norms)
  int64_t largest_layer_parameters = 0;  // a block, the embedding or the head
  int64_t largest_block_parameters = 0;  // a transformer block
  // FSDP2's root group as torchtitan wraps a model part (fully_shard per block, then the part
  // itself): the part's own parameters, the embedding and/or the head; the device's largest part's.
  int64_t root_parameters = 0;
  // The rank's model parts (chunks; torchtitan calls fully_shard on each, so each is an FSDP root
  // with its own streams) and, where a second part on the rank has a root group (V layouts: the
  // embedding's part and the head's on one rank), that smaller root's parameters.
  int model_parts = 1;
  int64_t other_root_parameters = 0;
  // The head's weight whose e-byte gradient autograd makes at the head's backward (the output
  // weight, or the tied embedding's); 0 without the head.
  int64_t head_gradient_parameters = 0;
  // The embedding's and the head's ([final norm, output]) parameters on the device (the largest
  // part's), FSDP2's groups of their own under the separate wrapping (edgeGroups, memory_components.cpp).
  int64_t embedding_parameters = 0;
  int64_t head_parameters = 0;
  int64_t recompute_transient_bytes = 0;
  bool has_embedding = false, has_head = false, has_moe = false;
};

// The sharded-data-parallel buffers above (0 for Megatron ZeRO-0/1); FSDP2 without PP at a
// block's backward.
int64_t dataParallelBufferBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                                const StageLayerFacts& facts);
// FSDP2 without PP at the loss's moment (above); dataParallelBufferBytes otherwise.
int64_t fsdpLossBufferBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                            const StageLayerFacts& facts);
// The caching allocator's pool of FSDP2's all-gather copy-in stream (0 but for FSDP with ZeRO-3):
// foreach_all_gather allocates each group's all-gather output on that stream, and
// FSDPParamGroup.wait_for_unshard frees the previous group's output (kept in AllGatherState for
// the forward) only when the next one, already allocated, is waited on. The root group is
// gathered first (e R), then the first block's (g B) while the root's is still kept: the pool
// holds e R + g B; every later block's output fits a freed cached block (the root's, split, when
// e R >= g B: the allocator splits large cached blocks; otherwise a second block's, e R + 2 g B).
// The compute stream cannot use them (the allocator serves a request from the requesting
// stream's blocks only); the root's post-forward frees the last output (FSDPState._post_forward),
// so after the forward all are cached and idle. Resharding after the forward without PP, the
// backward gathers again on the same stream (PRE_BACKWARD state), one block ahead
// (_backward_prefetch): at a block's backward (`gather_in_flight`) that output is allocated
// (counted among the DP buffers' 2 g B), the rest idle; at the loss no block's gather has begun.
// Without reshard (PP, or --reshard-after-forward never) the backward's unshard is a no-op
// (FSDPParamGroup.unshard: is_unsharded): all idle. Under PP a model part without the embedding
// or the head has no root group (R = 0): two blocks' outputs, 2 g B. Each model part is its own
// root (torchtitan calls fully_shard on each part): FSDPState._lazy_init runs per root and
// FSDPCommContext.lazy_init creates that root's own copy-in, all-gather and reduce-scatter streams
// (torch.cuda.Stream), and the allocator caches blocks per stream, so a rank's v parts under
// interleaved PP keep v pools, summed: its root part's (if any) and 2 g B for each other part.
// Under the separate wrapping the embedding's group is a part's first (e E in R's place) and the
// head's its last: its output, larger than a block's, fits no freed block while the last block's
// output is in use (one of the pool's blocks may still hold it when the embedding's block is
// free, with the block count's parity: not counted), so it adds e H' when e H' > g B.
// Reserved bytes only: when
// cudaMalloc fails the allocator releases cached blocks of every stream and retries, so they
// never cause an out-of-memory error.
int64_t allGatherStreamPoolBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                                 const StageLayerFacts& facts, bool gather_in_flight);
// foreach AdamW's exp_avg_sq_sqrt at the optimizer step (above): half the Adam state bytes of the
// rank's largest model part, `part_optimizer_bytes`, under --optimizer-impl foreach with FSDP; 0
// otherwise.
int64_t optimizerStepTransientBytes(const Strategy& strategy, double part_optimizer_bytes);
// Megatron-LM's fp32 copy of the gradients its optimizer steps when the main gradients are 16-bit
// (--grad-reduce-in-bf16: grad_reduce_in_fp32 off, `bf16_main_grad`). Megatron-LM d98e8a64dd,
// megatron/core/optimizer: the distributed optimizer's _copy_model_grads_to_main_grads sets
// shard_main_param.grad = shard_model_grad.float() for the rank's shard of every parameter (the
// float16 optimizer's, ZeRO-0, main_param.grad = model_param.main_grad.float() for all of them);
// .float() of an fp32 main gradient returns it, of a bf16 one allocates a new fp32 tensor. One
// optimizer steps every model chunk of the rank, and the copies stay until zero_grad at the next
// train_step's start (set_to_none), so at the step: 4 bytes per parameter the rank's optimizer
// holds, `optimizer_parameters` (its shard under ZeRO >= 1). 0 for FSDP, without the bf16 main
// gradient, and with the optimizer offloaded (its step runs on the host).
int64_t megatronGradientCopyBytes(const Strategy& strategy, bool bf16_main_grad,
                                  double optimizer_parameters);
// ZeRO-2 as DeepSpeed runs it (deepspeedai/DeepSpeed edaa72212, deepspeed/runtime/zero/
// stage_1_and_2.py, the same since v0.14 at least; contiguous_gradients on, its default), for
// the rank's partition of P parameters (its shard of the device's parameters, P/G):
// - the reduced gradients the rank keeps are copied into grads_in_partition (copy_grads_in_
//   partition: torch.empty(total_size, dtype=self.dtype), the model's dtype, e P; with bf16 the
//   engine's default grad_accum_dtype is the model's, and stage 2 never uses the grad_accum
//   attribute), allocated at the backward's first reduced bucket. The epilogue
//   (independent_gradient_partition_epilogue) keeps views of it (all_grad_tensors /
//   averaged_gradients) and _release_ipg_buffers drops the name, so every later backward of the
//   step allocates a fresh one and the epilogue adds it into the first (accumulated_grad.add_)
//   and drops it: e P among the model states (stateBytesPerParameter), and e P more through the
//   backward of every micro-batch after the first (zero2LaterBackwardPartitionBytes: m >= 2);
//   counted at the backward's moment whatever the micro-batch (under 1F1B with m > P the
//   held-activation peak recurs at later backwards);
// - fp32 gradients exist only at the step: per parameter group, flat_grad_partition =
//   flatten(averaged_gradients) (a new e P) and single_grad_partition = flat.to(fp32) (a new 4 P)
//   while grads_in_partition is still held; the flat copy is deleted, the fp32 one set as
//   single_partition_of_fp32_groups[i].grad for the optimizer and dropped after it
//   ("get rid of the fp32 gradients"): (e + 4) P at the step (zero2StepGradientBytes; e P for an
//   fp32 model, whose .to(fp32) is the same tensor). Megatron-DeepSpeed's second group (biases
//   and norms, no weight decay) is small: its share is counted with the first.
// With the optimizer offloaded (cpu_offload) DeepSpeed moves the gradients to the host and
// neither exists on the device: 0. Both 0 unless `zero` is 2.
int64_t zero2LaterBackwardPartitionBytes(const ModelConfig& model, const Strategy& strategy,
                                         int zero, double partition_parameters,
                                         int64_t micro_batches);
int64_t zero2StepGradientBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                               double partition_parameters);
// --grad-reduce-sync step (ZeRO-2, modeler/timing_engine.h): a bucket holds its unsharded
// gradients from its first gradient (while it is being filled, in the model dtype) until its
// queued reduction ends (in the reduction's wire dtype, its event's message bytes, from the cast
// at its issue on); modeler/pending_reductions.h says when each part begins and ends. No IPG
// buffer besides. What they add to the stage's peak comes from the timeline: each micro-batch
// chunk's saved activations held from its forward's end to its backward's end, each bucket's
// parts over their intervals; at one instant frees come first, then allocations, then the frees
// of what an allocation there was copied from (`freed_after_allocations`: a cast's source lives
// until its copy exists). The buckets add max over time of (activations + buckets) less the
// activations' own peak (the backlog that builds in the cool-down meets few held activations). A
// queue bound K leaves at most K closed buckets pending beside the one being filled.
// The walk tells two kinds of instant apart, because what else is held differs:
// - a plateau, the bytes between two instants: inside a task, where a linear's backward holds its
//   SP dgrad output beside the kept gather buffer (the full SP term, 2 e T h for Megatron);
// - a cast instant, between the allocation of a bucket's wire copy and the free of its filled
//   source (both held: the walk's highest point around an issue). The cast runs in the bucket's
//   gradient hook, which fires after the linear's backward has returned, so the dgrad output is
//   freed: only the kept gather buffer (e T h) is held (docs/VALIDATION.md, session 25, step29;
//   session 26, sp29). A bucket issued in the wire's own dtype allocates nothing at its issue, so
//   its instant is no higher than the plateau around it.
// Without a timeline (the search's memory check, a plan's estimate alone) the least first bucket
// a device's chunks fill, in the model dtype (memory_model.h's setLeastFirstBuckets), a
// plateau: take the moment the walk's held activations peak (a forward's end); the next gradient
// task on the device (B: only without a split backward or fused tasks) starts before any
// activation is freed (tasks run one after another, and only B frees) and opens its chunk's
// first bucket at its start, so the walk's plateaus reach at least the activations' peak plus
// that bucket. That bucket fills through its whole gradient task, inside which the SP gathers'
// transients come and go, so the full SP term holds beside it; the walk's stage figure, the
// larger of its plateau with the full term and its cast instant with the kept buffer alone, is
// never below it.
struct HeldBytes {
  double start_us = 0;
  double end_us = 0;
  int64_t bytes = 0;
  bool freed_after_allocations = false;  // freed after the allocations at end_us (above)
};
// What the pending reductions add above the held activations' peak, at each kind of instant
// (above); each at least 0.
struct PendingReductionPeak {
  int64_t plateau_bytes = 0;  // the most over the plateaus
  int64_t cast_bytes = 0;     // the most over the cast instants (0: none)
};
PendingReductionPeak pendingReductionPeak(const std::vector<HeldBytes>& activations,
                                          const std::vector<HeldBytes>& pending);
// The part of tensorContextBufferBytes a linear's backward holds only until it returns: the SP
// input gradient (Megatron's grad_input, DTensor's gathered gradient), e T h with sequence
// parallelism and without --tp-comm-overlap (whose gathers land in userbuffers); 0 otherwise.
int64_t sequenceParallelGradInputBytes(const ModelConfig& model, const Strategy& strategy);
// The backward moment's communication transient and pending buckets, at the larger of the walk's
// two kinds of instant: a plateau holds the full transient `comm` beside `pending.plateau_bytes`;
// a cast instant `comm_at_cast` (the transient without the SP input gradient) beside
// `pending.cast_bytes`. A tie is the plateau's.
struct BucketMoment {
  int64_t comm_transient_bytes = 0;
  int64_t pending_reduction_bytes = 0;
  bool at_cast = false;
};
BucketMoment bucketMoment(int64_t comm, int64_t comm_at_cast, const PendingReductionPeak& pending);
// torch.distributed.pipelining's merge of the last stage's outputs (framework fsdp with PP): the
// schedule's step() ends, after every backward, with `return self._merge_outputs(stage.
// output_chunks)` on the stage holding the last chunk, merge_chunks' default spec concatenating
// the m micro-batches' e-byte logits along the batch (torch.cat): m e T V/t beside output_chunks,
// until torchtitan's train step drops the unused result, before the optimizer step. A moment of
// its own after the backward with the step's buffers; 0 elsewhere.
int64_t pipelineOutputMergeBytes(const ModelConfig& model, const Strategy& strategy,
                                 int64_t micro_batches, bool has_head);
// The loss transient of the last stage (0 elsewhere).
int64_t lossTransientBytes(const ModelConfig& model, const Strategy& strategy, bool has_head);
// Megatron's word-embedding gradient transient on the first stage (0 elsewhere, and for FSDP,
// whose unsharded gradients are the data-parallel buffers).
int64_t embeddingGradientBytes(const ModelConfig& model, const Strategy& strategy,
                               bool has_embedding);
// Sequence-parallel and context-parallel communication buffers of one layer.
int64_t tensorContextBufferBytes(const ModelConfig& model, const Strategy& strategy);
// PyTorch's context parallelism (framework fsdp) in one attention backward, with k the bytes of
// the rank's K at the query heads' width (torchtitan repeats K and V to every query head before
// SDPA): see the header comment; 0 without CP.
double torchContextParallelBytes(double k, const Strategy& strategy);
// --tp-comm-overlap: Transformer Engine's userbuffers, registered outside PyTorch's allocator
// (initialize_ub with Megatron's shape [s*b/C, h]): one buffer of the whole shape per overlapped
// GEMM TE names (qkv/proj/fc1/fc2 fprop, dgrad and wgrad: 12), each in the model dtype, or 1 byte
// for the 8 all-gather buffers when the GEMMs run in fp8. 0 without the overlap. The SP gathers
// then land in these, so tensorContextBufferBytes leaves them out.
int64_t userBufferBytes(const ModelConfig& model, const Strategy& strategy);
// MoE dispatch buffers of one MoE layer (0 without MoE blocks on the stage).
int64_t moeDispatchBytes(const ModelConfig& model, const Strategy& strategy, bool has_moe);
// Pipeline send/receive buffers (0 without pipeline parallelism), Megatron's.
int64_t pipelineBufferBytes(const ModelConfig& model, const Strategy& strategy);
// What torch.distributed.pipelining holds on one device (framework fsdp with PP): see the header
// comment. `in_flight` is the device's peak count of held chunk activations.
struct TorchPipelineDevice {
  int64_t micro_batches = 1;
  int chunks = 1;  // virtual stages on the device
  bool has_first_chunk = false, has_last_chunk = false;
  int in_flight = 0;
};
int64_t torchPipelineBufferBytes(const ModelConfig& model, const Strategy& strategy,
                                 const TorchPipelineDevice& device);
// FP8 weight copies and transposes (0 without fp8).
int64_t fp8WeightBytes(const ModelConfig& model, const Strategy& strategy,
                       const StageLayerFacts& facts);
// NCCL communicators a rank of `strategy` uses.
int communicatorCount(const Strategy& strategy);

}  // namespace evsim

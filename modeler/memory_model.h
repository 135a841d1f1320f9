#pragma once
// Peak memory of one device of each pipeline stage for one training iteration, so that `eventsim
// search` can rule out strategies that would not fit and `eventsim simulate` can report it.
//
// Model states (Megatron-LM megatron/training/theoretical_memory_usage.py, without the distributed
// optimizer), per parameter of the stage's TP shard (StagePlan::parameters):
//   fp16/bf16 mixed precision with Adam: 18 bytes = 2 (16-bit weight) + 4 (fp32 main gradient)
//                                                  + 4 (fp32 master weight) + 4 + 4 (Adam m, v);
//   fp32 model with Adam:                16 bytes = 4 (weight) + 4 (gradient) + 4 + 4 (Adam m, v);
//                                        no master copy is needed.
//
// Activations are the saved bytes of each chunk's forward ops (ops/layer_ops.h says what each op
// keeps; ops/layer_footprint.h sums them): the memory model never writes a block formula. For
// GPT blocks those sums are Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models", Table 2, tensor parallel without sequence parallelism, no recomputation),
// per transformer block and micro-batch, with e the bytes of the model dtype and f the FFN size:
//   s*b*h * [ (4e + 2) + (4e + 2e*f/h) / t ] + (2e + 1) * a*s^2*b / t
// which for e = 2 and f = 4h is the paper's s*b*h*(10 + 24/t + 5*a*s/(h*t)) (and 34 + 5as/h at
// t = 1). The "+2" and "+1" are the 1-byte dropout masks. A decoder block with cross-attention adds
// one more attention sub-block: s*b*h * [ (2e + 1) + 4e/t ] + (2e + 1) * a*s^2*b / t (encoder and
// decoder sequence lengths are the same in our configs).
//
// Techniques (Korthikanti et al. 2022 Table 2, generalised to e and f as above):
//   sequence parallel: the part not split by TP, s*b*h*(4e + 2), is split by t too, so with e = 2
//     and f = 4h a block holds s*b*h/t*(34 + 5*a*s/h);
//   selective recomputation: the attention-score terms (2e + 1)*a*s^2*b/t are dropped (recomputed),
//     s*b*h*(10 + 24/t) (34/t with SP);
//   full recomputation: only the block input is kept, e*s*b*h (2*s*b*h at e = 2; /t with SP). The
//     one block whose activations are rebuilt during its backward is the recompute transient
//     (memory_components.h).
// With SP the embedding output and its mask, and the final layernorm's input, are s/t tokens too.
//
// Model states under ZeRO over D ranks (per parameter, mixed precision; fp32 in brackets):
//   none 18 [16]; ZeRO-1 (Megatron's distributed optimizer: master weights and Adam moments
//   sharded) 6 + 12/D [8 + 8/D]; ZeRO-2 (+ gradients) 2 + 16/D [4 + 12/D]; ZeRO-3 (+ weights)
//   18/D [16/D].
// With context parallelism the shards are over D x C ranks (Megatron's data-parallel group with
// CP); under expert parallelism E the routed experts' parameters (E times fewer per device, by
// their op lists) shard over the expert-data-parallel group of D x C / E ranks.
//
// Extras per micro-batch (Megatron's compute_activation_memory "small contributions"):
//   first stage: token and position ids 8*s*b, the embedding output e*s*b*h and its dropout mask
//                s*b*h;
//   last stage:  the final layernorm's input and the LM head's input, 2*e*s*b*h, and the fp32
//                logits kept for the cross-entropy backward, 4*s*b*V/t (V the padded vocabulary).
// Activations follow the task graph (task_graph.h): along each device's order, a forward adds its
// chunk's bytes and its backward frees them, so a stage holds the micro-batches in flight as the
// schedule gives them (GPipe: m; DAPPLE/1F1B: min(P - s, m)). With the interleaved schedule a
// device holds v chunks; device 0 holds up to v*P + P - 1 chunk activations: Megatron's factor
// (1 + (P-1)/(P*v)) times P micro-batches of all its layers. When the schedule splits the backward
// (zero-bubble), B frees the chunk's activations but keeps what its W reads, the inputs of the
// weight-gradient GEMMs (both operands: the output gradient and the layer input), until W runs:
// ZB-H1 then holds up to P micro-batches on every stage, ZB-H2 up to 2P-1.
// Offload (Strategy::offload, over the cluster's host link):
//   optimizer: the optimizer state o (fp32 master copy and Adam moments, 12 [8] bytes per
//     parameter) and an fp32 gradient landing buffer (4) live in host memory, sharded like o under
//     ZeRO >= 1; the device keeps w + g (ZeRO-0/1), w + g/D (ZeRO-2), (w + g)/D (ZeRO-3);
//   activations: every micro-batch's saved activations live in host memory (what the device would
//     otherwise hold, above); the device holds two layers' worth, the largest layer of its chunks:
//     the one being computed and the one being copied out (forward) or prefetched (backward).
// A node's host memory holds the host bytes of all its GPUs: gpus_per_node times the largest
// per-device figure, against the node's host_memory less the same headroom.
// Framework (Strategy::framework): the model states above are Megatron-LM's; FSDP2's, the
// buffers, transients and overheads beside the activations are modeler/memory_components.h's.
//
// A stage's peak, on one device (all figures per stage, in StageMemory):
//   allocated = weights + gradients + optimizer state              (persistent)
//             + held activations (above)
//             + the largest activation transient (recompute, loss, embedding gradient)
//             + the largest communication transient (SP/CP gathers, MoE dispatch)
//             + data-parallel shard buffers + pipeline buffers + FP8 copies + cuBLAS workspace.
//   That is the backward's moment; the optimizer step is another (memory_components.h: the
//   states, foreach AdamW's temporary, what pipelining keeps, the workspace), and allocated is
//   the larger of the two (reserved likewise).
//   The transients of each kind come at different moments of the step (a block's recompute, the
//   loss at the start of the backward, one layer's gather), so only the largest of a kind counts.
//   Under FSDP the gathers are the block's own allocations, so the loss and the block's recompute
//   with its gathers never coincide: the larger of the two counts (memory_components.h).
//   reserved  = persistent + (1 + f) x the rest + other streams' idle blocks: PyTorch's caching
//             allocator keeps freed blocks
//             and splits them for later requests of other sizes, so what it has reserved from
//             the device exceeds what is allocated at the peak by a share f of the bytes that
//             come and go (the device file's memory.allocator_fragmentation). The model states
//             are allocated once, in large buffers, and do not fragment. It keeps a pool per
//             stream (a block freed by one stream serves only that stream's requests), so a
//             side stream's cached blocks add whole (FSDP's all-gather copy-in stream,
//             memory_components.h; Megatron allocates on the compute stream). It is capped
//             at the device memory less the CUDA context and NCCL's buffers (and never below
//             allocated): there cudaMalloc fails and the allocator frees its cached blocks and
//             retries (c10/cuda/CUDACachingAllocator.cpp), so max_memory_reserved cannot pass it.
//   device    = allocated + the CUDA context + NCCL's buffers per communicator (outside PyTorch's
//             allocator; the device file's memory block); this is what must fit in the device
//             memory less the headroom. Not the reserved peak: when cudaMalloc fails the caching
//             allocator frees its cached unsplit blocks and retries (c10/cuda/
//             CUDACachingAllocator.cpp), so a run dies only when what is allocated, the split
//             blocks it cannot free and the memory outside it exceed the device.
// The headroom (--memory-headroom, default kDefaultMemoryHeadroom) is what is left for what is
// still not modelled: those split blocks, the PyTorch-version spread of the same run (about 5%)
// and kernels' temporary buffers beyond cuBLAS's workspace.

#include <cstdint>
#include <limits>
#include <vector>

#include "common/checked.h"
#include "config/cluster_config.h"
#include "config/device_config.h"
#include "config/model_config.h"
#include "ops/layer_footprint.h"
#include "plan/iteration_plan.h"
#include "plan/task_graph.h"
#include "modeler/accumulated_gradients.h"
#include "modeler/memory_components.h"

namespace evsim {

inline constexpr double kDefaultMemoryHeadroom = 0.05;

// Model-state bytes per parameter for mixed-precision Adam (18) or fp32 Adam (16).
int64_t modelStateBytesPerParameter(DType dtype);
// Under ZeRO stage `zero_stage` over `dp` ranks (formulas above); zero_stage 0 gives the above.
// With `offload_optimizer` the device's share only (weights and gradients).
double modelStateBytesPerParameter(DType dtype, int zero_stage, int dp,
                                   bool offload_optimizer = false);
// What optimizer offload puts in host memory per parameter: the optimizer state and an fp32
// gradient buffer, both sharded over `dp` ranks under ZeRO >= 1.
double hostStateBytesPerParameter(DType dtype, int zero_stage, int dp);

// Activation bytes of one transformer block for one micro-batch of `micro_batch` sequences, on one
// of `tp` tensor-parallel devices: the saved bytes of its forward ops.
int64_t blockActivationBytes(const ModelConfig& model, const TransformerBlock& block,
                             int64_t micro_batch, int tp, Recompute recompute = Recompute::kNone,
                             bool sequence_parallel = false);

// Per device stage (pp coordinate), over all its chunks.
struct StageMemory {
  int stage = 0;
  int64_t parameters = 0;         // on one device of the stage (sum over its chunks)
  int64_t model_state_bytes = 0;  // weights + gradients + optimizer state
  int64_t weight_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  int64_t activation_bytes_per_micro_batch = 0;  // blocks + embedding/head extras, all chunks
  int in_flight = 0;                             // micro-batch chunk activations held at once
  // Peak held activations on the device: activation_bytes_per_micro_batch * in_flight without
  // interleaving or offload; two of the largest layer's with activation offload.
  int64_t activation_bytes = 0;
  // Transients (memory_components.h); the peak adds the largest activation transient and the
  // largest communication transient.
  int64_t recompute_bytes = 0, loss_bytes = 0, embedding_gradient_bytes = 0;
  int64_t tp_cp_buffer_bytes = 0, moe_dispatch_bytes = 0;
  int64_t activation_transient_bytes = 0;  // max(recompute, loss, embedding gradient)
  int64_t comm_transient_bytes = 0;        // max(SP/CP buffers, MoE dispatch)
  // Buffers through the step.
  int64_t dp_buffer_bytes = 0, pp_buffer_bytes = 0, fp8_bytes = 0, workspace_bytes = 0;
  // --grad-reduce-sync step (ZeRO-2): what the gradient buckets, the one being filled and the
  // queued ones, add above the held activations' peak (modeler/pending_reductions.h); the step
  // waits for them all, so not at the step. `peak_at_bucket_cast` when that is at a bucket's cast,
  // where comm_transient_bytes leaves out the SP input gradient (memory_components.h,
  // bucketMoment); otherwise at a plateau, with the full transient.
  int64_t pending_reduction_bytes = 0;
  bool peak_at_bucket_cast = false;
  // The optimizer step, after the last backward (memory_components.h): foreach AdamW's temporary
  // (0 but for FSDP with --optimizer-impl foreach) and what is allocated then (model states, that
  // temporary, what the pipelining runtime keeps to the next step, the workspace). The fields
  // above are the backward's moment (held activations and their transients and buffers).
  int64_t optimizer_step_bytes = 0;
  // Megatron's fp32 copy of the stepped gradients under --grad-reduce-in-bf16, and pipelining's
  // merge of the last stage's outputs (FSDP with PP), moments after the backward
  // (memory_components.h): the step's allocation is the states, the larger of (the temporary
  // plus the gradient copy) and the output merge, the kept buffers and the workspace (the copy
  // lives through the step with the temporary; the merge is dropped before the step).
  int64_t gradient_copy_bytes = 0;
  int64_t output_merge_bytes = 0;
  int64_t step_allocated_bytes = 0;
  // PyTorch's max_memory_allocated: the larger of the two moments; `peak_at_optimizer_step` when
  // it is the step's (the components above then are not what it adds up).
  int64_t allocated_bytes = 0;
  bool peak_at_optimizer_step = false;
  // Reserved in another stream's pool of the caching allocator and idle at the peak, so beyond
  // what the compute stream's allocations can use (FSDP's all-gather copy-in stream:
  // allGatherStreamPoolBytes in memory_components.h). Part of reserved_bytes only.
  int64_t stream_pool_bytes = 0;
  int64_t reserved_bytes = 0;   // PyTorch's max_memory_reserved
  int communicators = 0;        // NCCL communicators of the rank
  int64_t overhead_bytes = 0;   // CUDA context + NCCL buffers (outside the allocator)
  int64_t userbuffer_bytes = 0;  // --tp-comm-overlap's userbuffers (part of overhead_bytes)
  int64_t peak_bytes = 0;       // allocated + overhead: what the device must hold
  // In host memory, per device: offloaded optimizer state and activations (0 without offload).
  int64_t host_state_bytes = 0;
  int64_t host_activation_bytes = 0;
  int64_t hostBytes() const { return saturatingAdd(host_state_bytes, host_activation_bytes); }
  // The summary's "buffers": everything allocated but model states and activations.
  int64_t bufferBytes() const;
  // Held activations and the activation transient.
  int64_t activationPeakBytes() const;
};

// Host memory a node offers to its GPUs' offloaded state (the cluster's node.host_memory).
struct HostCapacity {
  int64_t bytes_per_node = 0;
  int gpus_per_node = 1;
};
HostCapacity hostCapacity(const ClusterConfig& cluster);  // 0 bytes without host_memory

struct MemoryEstimate {
  std::vector<StageMemory> stages;
  int64_t peak_bytes = 0;  // max over stages of StageMemory::peak_bytes (device bytes)
  int peak_stage = 0;
  int64_t allocated_peak_bytes = 0;  // max over stages
  int64_t reserved_peak_bytes = 0;   // max over stages
  int64_t capacity_bytes = 0;        // device memory
  int64_t usable_bytes = 0;          // capacity * (1 - headroom)
  double headroom = kDefaultMemoryHeadroom;
  // Offload: host bytes of one node (gpus_per_node x the largest device's) and what it offers.
  int64_t host_peak_bytes = 0;
  int64_t host_usable_bytes = 0;

  bool fitsDevice() const { return peak_bytes <= usable_bytes; }
  bool fitsHost() const { return host_peak_bytes <= host_usable_bytes; }
  bool fits() const { return fitsDevice() && fitsHost(); }
  // Usable device bytes left at the peak (negative: out of memory).
  int64_t marginBytes() const { return usable_bytes - peak_bytes; }
};

// Per-stage peak memory of `plan`. `headroom` in [0, 1): the share of device memory set aside.
MemoryEstimate estimateMemory(const IterationPlan& plan, double headroom = kDefaultMemoryHeadroom);
// The same with, per device stage, what its timeline's pending ZeRO-2 reductions add to the peak
// (--grad-reduce-sync step; DeviceChunkSums::pending_reductions).
MemoryEstimate estimateMemory(const IterationPlan& plan, double headroom,
                              const std::vector<PendingReductionPeak>& pending_reductions);

// What the memory model needs of one model chunk (virtual stage), so that a search can check
// memory before (or instead of) building the plan.
struct ChunkMemoryInput {
  int64_t parameters = 0;         // StagePlan::parameters
  int64_t expert_parameters = 0;  // the routed experts' part (StagePlan::expert_parameters)
  // Per micro-batch: the saved bytes of the chunk's forward ops (from the plan's op lists, or
  // the same sums from layer footprints).
  int64_t activation_bytes = 0;
  // Per micro-batch: what a split backward's W tasks read and B therefore keeps (the inputs of the
  // chunk's weight-gradient GEMMs, LayerFootprint::weight_grad_input_bytes); unused otherwise.
  int64_t weight_grad_input_bytes = 0;
  // Per micro-batch: the saved bytes of the chunk's largest layer (a block, the embedding or the
  // head), what activation offload keeps on the device twice; unused otherwise.
  int64_t largest_layer_bytes = 0;
  // Of the chunk's layers (addLayerFacts): the blocks' parameters, the largest layer's parameters
  // (a block, the embedding or the head), the largest block's recompute transient, MoE blocks.
  int64_t block_parameters = 0;
  int64_t largest_layer_parameters = 0;
  int64_t recompute_transient_bytes = 0;
  bool has_moe = false;
  // The largest block's parameters, FSDP2's root group of the chunk (its embedding and head) and
  // the head's output weight (StageLayerFacts).
  int64_t largest_block_parameters = 0;
  int64_t root_parameters = 0;
  int64_t head_gradient_parameters = 0;
  // The embedding's and the head's ([final norm, output]) parameters, FSDP2's groups of their own
  // under Strategy::fsdp_wrap separate (0 where the chunk has none).
  int64_t embedding_parameters = 0;
  int64_t head_parameters = 0;
  // ZeRO-2's gradient arrivals as the chunk's backward makes them (plan/zero2_buckets.h's
  // Zero2ChunkGradients, with `parameters` their sum and the embedding's the trailing one): a
  // least first one (a head that owns its output weight and has no multi-token prediction
  // begins with the output weight's gradient, its wgrad GEMM before the final norm's backward;
  // otherwise 0) and a most later one (a block's parameters, the head's less that first one).
  int64_t first_gradient_elements = 0;
  int64_t later_gradient_elements = 0;
};

// Fills the layer facts of `chunk` for blocks [first_layer, end_layer) (and the embedding and the
// head when it has them): `footprint` under the strategy, `unrecomputed` the same without
// recomputation (nullptr when the strategy recomputes nothing). `recomputed`, when given, says per
// block whether it recomputes (--recompute-every, plan/layer_checkpoint.h): only those have a
// recompute transient.
void addLayerFacts(const ModelConfig& model, const ModelFootprint& footprint,
                   const ModelFootprint* unrecomputed, int first_layer, int end_layer,
                   bool has_embedding, bool has_head, ChunkMemoryInput& chunk,
                   const std::vector<char>* recomputed = nullptr);

// The same estimate from the chunks (one per virtual stage, P*v, in virtual-stage order), with
// setLeastFirstBuckets under ZeRO-2 with step reductions: `plan`'s overload without a timeline's
// walk gives identical figures.
MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t micro_batches, int64_t capacity_bytes,
                              const std::vector<ChunkMemoryInput>& chunks,
                              double headroom = kDefaultMemoryHeadroom,
                              const HostCapacity& host = {},
                              const MemoryOverheads& overheads = MemoryOverheads{});

// What the estimate takes from the chunks of one device (its P x v chunks summed, its activation
// peak over the schedule's order): the same for every ZeRO stage, offload and DP overlap, so a
// search computes it once for the candidates that differ only in those.
struct DeviceChunkSums {
  StageLayerFacts facts;  // parameters, block parameters, largest layer, first/last/MoE
  int64_t expert_parameters = 0;
  int64_t largest_layer_bytes = 0;  // the saved bytes of the largest layer of its chunks
  int64_t activation_bytes_per_micro_batch = 0;
  ActivationPeak peak;  // held activations at the schedule's peak
  int64_t micro_batches = 1;  // of the step (torch.distributed.pipelining's buffers count them)
  int chunks = 1;             // virtual stages on the device
  // The chunk (torchtitan: a model part with its own optimizer) whose shard holds the most
  // parameters, dense / G + experts / G_e with the strategy's shard groups: its parameters and
  // routed experts' part, for the optimizer step's temporary.
  int64_t step_part_parameters = 0, step_part_expert_parameters = 0;
  // FSDP with pipeline parallelism only (has_accumulation): the moment of the device's order with
  // the most held activations plus fp32 accumulated gradients (accumulated_gradients.h), each
  // chunk's 4 bytes a parameter from its first backward on. The held-activation peak above may
  // come before any backward, with none of them.
  bool has_accumulation = false;
  AccumulatedGradientPeak accumulation;
  // --grad-reduce-sync step: what the device's pending reductions add to its peak, at a plateau and
  // at a cast instant. From a timeline in simulate (pendingReductionPeak); without one (the
  // search's memory check, an estimate of a plan alone) the least of its chunks' first buckets
  // while they fill (setLeastFirstBuckets) as a plateau's, no cast, which no timeline's walk goes
  // below: the backward that runs first after the held activations' peak starts with them all
  // still held and opens its chunk's first bucket (memory_components.h). {0, 0} from
  // deviceChunkSums.
  PendingReductionPeak pending_reductions;
};
std::vector<DeviceChunkSums> deviceChunkSums(const Strategy& strategy, int64_t micro_batches,
                                             const std::vector<ChunkMemoryInput>& chunks);
// The same with the device orders' activation states given (scheduleActivationStates(strategy's
// schedule, {P, v, micro_batches, strategy.microbatch_group})): a caller that keeps them need not
// ask the shared cache, which does not keep the largest.
std::vector<DeviceChunkSums> deviceChunkSums(const Strategy& strategy, int64_t micro_batches,
                                             const std::vector<ChunkMemoryInput>& chunks,
                                             const std::vector<ActivationStates>& states);
// The same into `out` (resized to P), with `scratch`'s vectors for the per-chunk sizes: a caller
// that computes the sums for every class of candidates (the closed-form tier, a class every
// ~10-30 candidates) keeps both and allocates nothing once they have grown (its three vectors per
// call were ~9.6% of Llama 3 70B's search's heap allocations on 1,024 GPUs, session 26).
struct DeviceChunkScratch {
  std::vector<int64_t> chunk_bytes, chunk_held_bytes, chunk_gradient_bytes;
};
void deviceChunkSums(const Strategy& strategy, int64_t micro_batches,
                     const std::vector<ChunkMemoryInput>& chunks,
                     const std::vector<ActivationStates>& states, std::vector<DeviceChunkSums>& out,
                     DeviceChunkScratch& scratch);
// --grad-reduce-sync step, without a timeline: sets each device's pending_reductions (of
// `devices`, deviceChunkSums(strategy, ..., chunks)) to the least over its chunks of the
// model-dtype bytes of the chunk's first ZeRO-2 bucket while it fills (plan/zero2_buckets.h's
// zero2FirstBucketAtLeast over the chunk's arrival facts), the bucket its every gradient task
// opens at its start (modeler/pending_reductions.h). 0 where the walk's first bucket need not be
// that one: a split backward (its W tasks fill the buckets, after B has freed activations),
// fused tasks, and routed experts whose expert-data-parallel group is one rank (their part of a
// bucket has no reduction, so the first listed bucket may be a later one). Independent of the ZeRO
// stage and of --grad-reduce-sync, so candidates that differ only in those share it; read by
// stageMemory under ZeRO-2 with step only, so the callers set it for those alone (computed for
// every chunk of every class it cost 2% of the search's closed-form tier: bench/RESULTS.md,
// session 26, tally34).
void setLeastFirstBuckets(const ModelConfig& model, const Strategy& strategy,
                          const std::vector<ChunkMemoryInput>& chunks,
                          std::vector<DeviceChunkSums>& devices);
// estimateMemory from deviceChunkSums(strategy, micro_batches, chunks): identical figures.
MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t capacity_bytes, const std::vector<DeviceChunkSums>& devices,
                              double headroom = kDefaultMemoryHeadroom,
                              const HostCapacity& host = {},
                              const MemoryOverheads& overheads = MemoryOverheads{});
// What a search's memory check reads of that estimate: the same peak, its stage and fits(), without
// the per-stage detail (the model states' split, the reserved bytes), which it never shows.
struct MemoryPeak {
  int64_t peak_bytes = 0;
  int peak_stage = 0;
  bool fits = false;
  // False when peak_bytes is only a lower bound of the peak (and peak_stage its stage): the
  // candidate is out of memory all the same (below).
  bool exact = true;
};
// With `bound_from` below int64's maximum, a cheap lower bound of every stage's peak is taken
// first (stagePeakLowerBound, stage_memory.h): when its largest already exceeds the usable device
// bytes and is at least `bound_from`, that bound is returned (fits false, exact false) without the
// full per-stage computation. A caller that needs the peaks of out-of-memory candidates only
// below some figure (a search's closest OOM candidate) passes it; fits is the same either way.
MemoryPeak estimateMemoryPeak(const ModelConfig& model, const Strategy& strategy,
                              int64_t capacity_bytes, const std::vector<DeviceChunkSums>& devices,
                              double headroom = kDefaultMemoryHeadroom,
                              const HostCapacity& host = {},
                              const MemoryOverheads& overheads = MemoryOverheads{},
                              int64_t bound_from = std::numeric_limits<int64_t>::max());

}  // namespace evsim

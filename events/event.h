#pragma once
// Events: the unique units of work that eventprof measures and the modeler looks up.
//
// A compute event is (op, named integer dimensions, GEMM layout, dtype); a communication event is
// (collective, message bytes, dtype, group placement). Each has a stable, readable signature, e.g.
//   "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16"
//   "allreduce bytes=4194304 group=4 nodes=2 rpn=2 dtype=bf16"
//   "p2p bytes=2097152 group=2 nodes=2 rpn=1 dtype=bf16"
// which is the key of the profile database. Signatures are parsed back by parseEventSignature, so
// an event file or a profile is self-describing.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "events/dtype.h"

namespace evsim {

// Communication kinds are described in events/collective.h (one file each in events/collectives/).
enum class EventKind {
  kCompute,
  kP2P,
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast
};

std::string_view eventKindName(EventKind kind);  // "compute", or the collective's name
bool isCommunication(EventKind kind);

// How a communication group sits on the cluster.
struct Placement {
  int group_size = 1;      // ranks in the group
  int nodes = 1;           // distinct nodes the group spans
  int ranks_per_node = 1;  // most ranks of the group on one node
  bool interNode() const { return nodes > 1; }
  bool operator==(const Placement&) const = default;
};

struct Dim {
  std::string name;
  int64_t value = 0;
  bool operator==(const Dim&) const = default;
};

struct Event {
  EventKind kind = EventKind::kCompute;
  std::string op;         // compute: "gemm", "bgemm", "softmax_fwd", ...; comm: the collective
  std::vector<Dim> dims;  // compute shape, in signature order (empty for communication)
  std::string layout;     // GEMM operand layout "nn", "nt", "tn" (empty for others)
  DType dtype = DType::kFp16;
  // Communication: all-reduce, broadcast, p2p: the buffer each rank contributes / sends;
  // reduce-scatter, all-gather, all-to-all: the FULL (unsharded) buffer, nccl-tests' "size" (each
  // rank holds bytes / group), so nccl-tests' bus-bandwidth factors (events/collective.h) apply.
  int64_t message_bytes = 0;
  Placement placement;  // communication only

  double flops = 0;          // floating-point operations per execution (compute)
  int64_t memory_bytes = 0;  // bytes read + written per execution (compute), for roofline estimates

  std::string signature() const;
  int64_t dim(std::string_view name) const;  // throws Error when absent
  bool hasDim(std::string_view name) const;
};

// The compute ops eventsim knows, with the dims each takes (in signature order):
//   gemm m n k (+layout)          C[m,n] = op(A)[m,k] * op(B)[k,n]; layout "nt" = B transposed
//   bgemm batch m n k (+layout)   `batch` independent GEMMs of that shape (strided)
//   layernorm_fwd/bwd rows cols   softmax_fwd/bwd rows cols (fused scale + mask + softmax)
//   cross_entropy_fwd/bwd rows cols (cols = this rank's vocabulary shard)
//   gelu_fwd/bwd elems  dropout_fwd/bwd elems  add elems
//   embedding_fwd/bwd tokens hidden vocab (vocab = this rank's shard)
//   adam params                    one mixed-precision Adam step over `params` fp32 master weights
//   cpu_adam params                the same step on the host CPU (optimizer offload)
//   offload_d2h/h2d elems          a copy to / from pinned host memory (offload, prefetch)
//   rmsnorm_fwd/bwd rows cols      swiglu_fwd/bwd elems (outputs; input 2 x elems)
//   rope_fwd/bwd tokens heads dim  flash_attn_fwd/bwd batch groups seq dim causal
//   fp8_quantize elems copies block scale_bytes
//                                  a 16-bit tensor of `elems` cast to fp8 `copies` times (1, or 2
//                                  with the transposed copy a Hopper wgrad GEMM needs), one scale
//                                  of `scale_bytes` per `block` elements per copy (block = elems:
//                                  one per-tensor scale); amax elems: a 16-bit tensor's max |x|
//   memory_pass read_bytes write_bytes
//                                  one memory-bound kernel that reads and writes those bytes
//                                  (eager PyTorch's pointwise ops and reductions, FSDP2's copies:
//                                  ops/eager_ops.h); the dtype only names the model's
const std::vector<std::string>& computeOpNames();

// What computes an op: its family and whether it is a backward pass. The backends' kernel
// factories (kernels/cpu, kernels/cuda) switch on the family, so the op list lives once, in the
// table of events/compute_op_rules.cpp, beside each op's dims and cost rule.
enum class OpFamily {
  kGemm,
  kSoftmax,
  kLayerNorm,
  kElementwise,
  kEmbedding,
  kCrossEntropy,
  kAdam,
  kRmsNorm,
  kSwiGlu,
  kRope,
  kAttention,   // fused (Flash) attention
  kMoeRouting,  // mixture-of-experts router (softmax + top-k) and token (un)permutation
  kHostCopy,    // offload_d2h / offload_h2d: a copy over the host link (no kernel: a DMA engine)
  kHostAdam,    // cpu_adam: the optimizer step on the host CPU (no GPU work at all)
  kFp8Cast,     // fp8_quantize and amax: FP8 training's scaling and cast kernels
  kMemoryPass,  // memory_pass: one eager PyTorch kernel or copy, known by its bytes alone
};
struct ComputeOpKind {
  OpFamily family = OpFamily::kElementwise;
  bool backward = false;
};
// InputError naming the event's signature for an event that is not a compute op eventsim knows;
// `backend` names who asked ("CPU", "CUDA").
ComputeOpKind computeOpKind(const Event& event, std::string_view backend);
// True for gemm and bgemm (the ops with a GEMM model); false for the memory-bound ones.
bool isGemmOp(std::string_view op);
// True for the events whose FLOPs are model FLOPs (MFU's numerator, as Megatron and NeMo count
// them): the matrix products, GEMMs and fused attention. Norms, activations, casts and the
// optimizer count operations per element that no peak is quoted for.
bool countsModelFlops(const Event& event);

// Builds a compute event, filling flops and memory traffic from the op's cost rule. Throws
// InputError naming `where` for an unknown op, wrong dims or non-positive sizes.
Event makeCompute(std::string_view op, std::vector<Dim> dims, std::string_view layout, DType dtype,
                  std::string_view where = "event");
Event makeGemm(int64_t m, int64_t n, int64_t k, std::string_view layout, DType dtype);
Event makeBatchedGemm(int64_t batch, int64_t m, int64_t n, int64_t k, std::string_view layout,
                      DType dtype);
Event makeCommunication(EventKind kind, int64_t message_bytes, Placement placement, DType dtype);

// Parses a signature back into an Event (flops and bytes recomputed from the dims). Throws
// InputError naming `where` when it is not a signature eventsim writes.
Event parseEventSignature(std::string_view signature, std::string_view where);

}  // namespace evsim

#pragma once
// One op as a device runs it: which unique event, on which stream, for which layer. Stage op lists
// are built once per stage and reused for every micro-batch and every replica.

#include <cstdint>
#include <string_view>
#include <vector>

namespace evsim {

// Streams are the trace threads of a device, and name the group a collective runs in. Compute, TP,
// PP and EP communication block each other (Megatron runs them in order); DP gradient reduction
// may overlap the backward, and context parallelism's K/V ring exchange overlaps the attention
// step it feeds (OpInstance::overlap_ops). The host stream is work off the GPU's engines (offload
// to host memory): copies over the host link, on a copy engine beside the layers they are issued
// before, and the host CPU's optimizer step.
enum class Stream { kCompute, kTpComm, kPpComm, kDpComm, kCpComm, kEpComm, kHost };
inline constexpr int kStreamCount = 7;
// "compute", "tp-comm", "pp-comm", "dp-comm", "cp-comm", "ep-comm", "host"
std::string_view streamName(Stream stream);

// kRecompute marks, in traces and CSV, a forward op re-run inside a backward task (activation
// recomputation); schedules never produce it as a task phase. kWeightGrad is the weight-gradient
// task of schedules that split the backward (zero-bubble): its ops are the weight_grad ones.
enum class Phase { kForward, kBackward, kGradSync, kOptimizer, kRecompute, kWeightGrad };
// "forward", "backward", "grad-sync", "optimizer", "recompute", "weight-grad"
std::string_view phaseName(Phase phase);

inline constexpr int kEmbeddingLayer = -1;  // `layer` of ops outside transformer blocks
inline constexpr int kHeadLayer = -2;

struct OpInstance {
  int event = -1;  // index into the plan's event table
  Stream stream = Stream::kCompute;
  int layer = kEmbeddingLayer;  // global transformer block index, or kEmbeddingLayer/kHeadLayer
  std::string_view name;        // op name within the layer, e.g. "qkv_gemm" (static storage)
  bool recompute = false;  // a forward op re-run in the backward task (activation recomputation)
  // A backward op that only computes a weight gradient (a linear's wgrad GEMM): zero-bubble
  // schedules defer it to a separate W task; every other backward op is the input-gradient B.
  bool weight_grad = false;
  // Issued from inside one framework call by this many torch calls (Transformer Engine's ring
  // loop, counted in ops/cp_ring_host.h): its host time is host_calls x the device's
  // host_call_us instead of a framework op's host_op_us (modeler/op_offsets.h). 0: a framework
  // op. A float in the padding after the flags: the op stays 64 bytes.
  float host_calls = 0;
  // Parameter elements this op owns on one rank (a GEMM's weight and bias, a norm's gain), on
  // forward ops only: a chunk's parameters are the sum over its forward list.
  int64_t weights = 0;
  // Activation bytes this forward op keeps until its backward, per micro-batch on one rank: a
  // chunk's activation memory is the sum over its forward list (layer_footprint.h).
  int64_t saved_bytes = 0;
  // Runs concurrently with the next `overlap_ops` ops of the list (a CP ring exchange beside the
  // attention step it feeds, a backward one also beside that step's dQ accumulation; an activation offload or prefetch beside a whole layer): the op
  // after them starts when they and it have finished (a task ends when all have). 0: in order.
  int overlap_ops = 0;
  // With overlap_ops = 1: runs at once with the next op although that op is on the same stream
  // (DeepEP's RDMA hop beside its NVLink hop, two parts of one kernel on separate SMs, pipelined
  // chunk by chunk; ops/moe_dispatch.h): not queued behind it as the overlapping ops of one
  // stream otherwise are (modeler/op_offsets.h), so the pair lasts as long as the longer.
  bool pipelined_with_next = false;
  // Issued by the same framework call as an earlier op of the list (Transformer Engine's further
  // chunks of one overlapped GEMM and their transfers, launched from C++): no host issue time of
  // its own (op_offsets.h).
  bool issued_with_previous = false;
  // A weight of a routed expert (expert parallelism shards these; their gradients are reduced
  // over the expert-data-parallel group).
  bool expert = false;
};

using OpList = std::vector<OpInstance>;

}  // namespace evsim

#pragma once
// A GPU: its datasheet figures and, optionally, a calibrated device model — what a kernel and a
// collective really get, fitted to measurements (modeler/device_model.h turns these into times).
//
// A cluster names a device file (configs/devices/<name>.yaml) or, as before, gives an inline
// `device:` with datasheet figures only. Device file format (every model parameter carries where
// its value came from: "datasheet ...", "fitted: <from what>", "measured: <how>" or
// "assumed: <why>"):
//
//   name: a100-sxm4-80gb
//   gpu: NVIDIA A100-SXM4-80GB
//   datasheet:
//     source: "NVIDIA A100 datasheet"
//     peak_tflops: {fp16: 312, bf16: 312, fp32: 19.5}   # dense, per GPU
//     memory_bandwidth_gb_s: 2039
//     memory_gib: 79.15     # what CUDA reports as the device's total, not the datasheet's GB
//     sm_count: 108
//   model:                                               # optional: without it, roofline only
//     gemm_efficiency: {value: 0.8, source: "fitted: ..."}        # of peak, full waves, large k
//     gemm_tile_overhead_k: {value: 64, source: "..."}           # per-tile prologue/epilogue, in k
//     gemm_kernel_us: {value: 4, source: "..."}                  # fixed time per GEMM kernel
//     gemm_by_dtype:                                             # optional: a GEMM dtype's own
//       fp8: {efficiency: {value: 0.78, source: "..."},          #   tile efficiency and overhead
//             tile_overhead_k: {value: 276, source: "..."}}      #   (others: the two above)
//     memory_efficiency: {value: 0.8, source: "..."}             # of datasheet bandwidth
//     memory_efficiency_by_op:                                   # optional, per memory-bound op
//       dropout_fwd: {value: 0.6, source: "measured: ..."}        #   (others: memory_efficiency)
//     memory_kernel_us: {value: 3, source: "..."}                # fixed time per memory-bound op
//     host_op_us: {value: 10, source: "..."}                     # framework issue time per op
//     host_call_us: {value: 7, source: "..."}                    # one torch call's, inside a
//                                                                #   framework call (TE's ring)
//     uncertainty_pct: {value: 9, source: "..."}                 # fit's typical error, for bands
//     fused_attention:                                           # optional: flash attention's
//       fa2:                                                     #   own tile model per kernel
//         kernel: "FlashAttention-2 (PyTorch SDPA)"              #   (fa2, fa3, cudnn) and pass
//         forward: {efficiency: {value: 0.43, source: ".."}, softmax_dim: {..},
//                   cta_overhead_tiles: {..}}
//         backward: {...}
//     clocks:                                                    # optional: the SM clock the
//       fit_mhz: {value: 1980, source: "..."}                    #   fit's kernels ran at, and
//       sustained_mhz: {value: 1830, source: "..."}              #   a long GEMM stream's
//     allreduce_curves:                                          # NCCL inside one node
//       - {group: 8, floor_us: 94, ll_latency_us: 37, ll_busbw_gb_s: 155,
//          simple_latency_us: 99, simple_busbw_gb_s: 231, source: "fitted: ..."}
//   overlap_slowdown:                                    # optional (also in an inline device):
//     nvlink: {value: 1.19, source: "..."}               #   compute beside a collective inside
//     network: {value: 1.10, source: "..."}              #   a node / one that crosses nodes

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/dtype.h"

namespace evsim {

// One model parameter and where its value came from.
struct SourcedValue {
  double value = 0;
  std::string source;
};

// NCCL all-reduce time inside one node over `group` ranks, in bus-bandwidth terms (nccl-tests):
// NCCL picks the faster of a low-latency protocol (LL/LL128: little start-up, lower bandwidth) and
// the bandwidth protocol (Simple), and nothing finishes under the launch-and-sync floor:
//   t(bytes) = max(floor, min(ll_latency + factor*bytes/ll_busbw,
//                             simple_latency + factor*bytes/simple_busbw))
struct CollectiveCurve {
  int group = 2;
  double floor_us = 0;
  double ll_latency_us = 0;
  double ll_busbw_gb_s = 0;
  double simple_latency_us = 0;
  double simple_busbw_gb_s = 0;
  std::string source;
};

// A GEMM dtype's own tile parameters (FP8 kernels are not BF16 ones at twice the rate: an FP8
// tile consumes k twice as fast while its prologue and epilogue take as long, and block-scaled
// kernels promote partial sums on CUDA cores every 128 of k).
struct GemmTileParams {
  SourcedValue efficiency;
  SourcedValue tile_overhead_k;
};

// A fused (flash) attention kernel's tile model, one pass (modeler/device_model.h): the share of
// the peak its tensor-core products reach, the per-tile softmax work in head-dim channels (exp and
// rescaling on the CUDA cores, the same whatever the head dim), and each CTA's prologue and
// epilogue in tiles.
struct AttentionPassParams {
  SourcedValue efficiency;
  SourcedValue softmax_dim;
  SourcedValue cta_overhead_tiles;
};
struct FusedAttentionParams {
  std::string kernel;  // which kernel was fitted, in words (FlashAttention-2 in PyTorch SDPA, ...)
  AttentionPassParams forward, backward;
};

// The fused-attention kernels a device file can fit, and a run selects (--attention-kernel, the
// cluster's attention_kernel, else the framework's: docs/KERNELS.md).
enum class AttentionKernel { kFa2, kFa3, kCudnn };
std::string_view attentionKernelName(AttentionKernel kernel);  // "fa2", "fa3", "cudnn"
AttentionKernel parseAttentionKernel(std::string_view text, std::string_view where);

// Tensor-core kernels run at whatever SM clock the power limit leaves them. A fit made from short
// kernels saw the boost clock; a training step streams GEMMs for minutes at the board's power
// limit and sustains a lower one. Compute-bound time scales by fit_mhz / sustained_mhz
// (modeler/device_model.h); memory-bound time does not (HBM's clock is not lowered under the
// power cap, and a streaming kernel's time is bytes over bandwidth). A fit made from whole
// training steps (the A100's) already ran at the sustained clock: fit_mhz = sustained_mhz.
struct ClockParams {
  SourcedValue fit_mhz;
  SourcedValue sustained_mhz;
  double computeSlowdown() const { return fit_mhz.value / sustained_mhz.value; }
};

struct DeviceModelParams {
  SourcedValue gemm_efficiency;
  SourcedValue gemm_tile_overhead_k;
  std::map<DType, GemmTileParams> gemm_by_dtype;  // GEMM dtypes with their own fit
  SourcedValue gemm_kernel_us;
  SourcedValue memory_efficiency;
  // Kernels of different memory-bound ops reach different bandwidths (a fused dropout or a
  // two-pass LayerNorm backward); an op listed here uses its own efficiency instead of
  // memory_efficiency. Keys are compute op names other than gemm and bgemm.
  std::map<std::string, SourcedValue> memory_efficiency_by_op;
  SourcedValue memory_kernel_us;
  SourcedValue host_op_us;
  // One torch call's host time when issued from inside a framework call rather than as a
  // framework op (Transformer Engine's ring loop: ops/cp_ring_host.h).
  SourcedValue host_call_us;
  SourcedValue uncertainty_pct;
  std::vector<CollectiveCurve> allreduce_curves;  // sorted by group; may be empty
  // Without an entry for the run's kernel, fused attention runs at the GEMM tiles' efficiency
  // (optimistic).
  std::map<AttentionKernel, FusedAttentionParams> fused_attention;
  std::optional<ClockParams> clocks;  // absent: compute runs at the fit's clock (factor 1)
  double computeSlowdown() const { return clocks ? clocks->computeSlowdown() : 1.0; }
};

// How much slower a compute op runs while a collective or P2P transfer is in flight on its GPU
// (NCCL's kernels take SMs and HBM bandwidth): the time factor (>= 1) of the overlapped part of
// the op, per traffic kind: `nvlink` for a group inside one node, `network` for one that crosses
// nodes (modeler/overlap_slowdown.h applies it). Absent from the device file: 1, 1 (no slowdown),
// with the source saying so.
struct OverlapSlowdown {
  // A factor above this is a unit mistake (a percentage) in a device file, not a GPU measurement.
  static constexpr double kMax = 10;
  SourcedValue nvlink{1.0, "none given: compute beside communication at full speed"};
  SourcedValue network{1.0, "none given: compute beside communication at full speed"};
  bool given = false;  // read from the device file (written back by deviceConfigYaml)
  double factor(bool inter_node) const { return inter_node ? network.value : nvlink.value; }
};

// What a training process holds on the device beside its tensors, and how PyTorch's caching
// allocator pads them (modeler/memory_model.h uses these). A device file may give them under
// `memory:` (each {value, source}); without it the defaults below apply, each saying so.
struct MemoryOverheads {
  // The CUDA context and loaded kernel modules: outside PyTorch's allocator (nvidia-smi sees it,
  // max_memory_reserved does not), inside CUDA's total (DeviceSpec::memory_gib): counted once.
  SourcedValue cuda_context_mib{
      600, "assumed: CUDA 12 context with lazy module loading, PyTorch + NCCL + cuBLAS modules"};
  // cuBLAS/cuBLASLt workspace per stream, allocated through PyTorch's caching allocator.
  SourcedValue cublas_workspace_mib{
      32, "assumed: PyTorch's default CUBLAS_WORKSPACE_CONFIG on Hopper, :4096:8 = 32 MiB"};
  // NCCL's internal buffers per communicator a rank belongs to (cudaMalloc by NCCL, outside the
  // allocator): NCCL_BUFFSIZE 4 MiB per channel and peer for the Simple protocol, plus LL/LL128.
  SourcedValue nccl_mib_per_communicator{
      256, "assumed: NCCL 2.18+ defaults, ~16 ring channels x 2 peers x (4 MiB Simple + LL128)"};
  // Reserved above allocated, as a share of the bytes that come and go within an iteration
  // (activations, transients, buffers): freed blocks of one size are kept by the caching allocator
  // and split for later requests of other sizes, so the reserved peak exceeds the allocated peak.
  SourcedValue allocator_fragmentation{
      0.10,
      "assumed: PyTorch caching allocator without expandable segments, reserved/allocated "
      "of the dynamic bytes in published training logs 1.05-1.15"};
};

struct DeviceSpec {
  std::string id;    // the device file's `name` (e.g. a100-sxm4-80gb); "" for an inline spec
  std::string name;  // the GPU's product name
  std::map<DType, double> peak_tflops;
  double memory_bandwidth_gb_s = 0;
  double memory_gib = 0;  // CUDA's total (cudaMemGetInfo), not the datasheet's: device_config.cpp
  int sm_count = 0;              // 0 for an inline datasheet spec (no tile model)
  std::string file;              // the device file it came from ("" for an inline spec)
  std::string datasheet_source;  // where the datasheet figures came from
  std::optional<DeviceModelParams> model;
  OverlapSlowdown overlap_slowdown;
  MemoryOverheads memory;  // the file's `memory:` block, or the defaults

  // Throws InputError when the spec has no peak for `dtype`.
  double peakTflops(DType dtype) const;
  int64_t memoryBytes() const;
};

// Loads a device file. Throws InputError naming the file and key on anything missing or invalid.
DeviceSpec loadDeviceConfig(const std::string& path);
DeviceSpec parseDeviceConfig(const std::string& yaml_text, const std::string& origin);
// The device file text for `spec` (which must have a model and an id), as loadDeviceConfig reads
// it back.
std::string deviceConfigYaml(const DeviceSpec& spec);

class YamlReader;
// An inline `device:` mapping of a cluster file (datasheet figures only).
DeviceSpec readInlineDevice(const YamlReader& device);

}  // namespace evsim

#pragma once
// The device model: how long an event takes on a cluster's GPU and network without measuring it,
// from the device's datasheet and, when its device file has one, a calibrated model
// (config/device_config.h; fitted by `eventsim calibrate`, docs/CALIBRATION.md). All times in µs.
//
// Calibrated (the device file has `model:`):
//   GEMM (gemm, and bgemm: `batch` independent GEMMs in one kernel) on 128x128 output tiles, one
//     tile per SM at a time (wave quantization on sm_count):
//       tiles  = batch * ceil(m/128) * ceil(n/128)
//       split  = split-K when the tiles leave SMs idle: min(floor(sm/tiles), ceil(k/256)), >= 1
//       waves  = ceil(tiles * split / sm)
//       tile_us = (k/split + tile_overhead_k) * 2 * tm * tn / (peak/sm * gemm_efficiency)
//                 with tm = min(128, m rounded up to 16) (tensor-core fragments; n alike);
//                 a dtype listed under gemm_by_dtype (FP8 and its row/block/MX-scaled forms)
//                 takes its own gemm_efficiency and tile_overhead_k, and runs at the peak of
//                 peakDType(dtype)
//       time   = max(waves * tile_us, bytes / (bandwidth * memory_efficiency)) + gemm_kernel_us
//     a gemm with dim sm_margin (Transformer Engine's set_sm_margin beside a userbuffers
//     reduce-scatter) has sm = sm_count - sm_margin in split and waves, the per-SM rate
//     unchanged; the datasheet roofline ignores it (no SMs in it)
//   sustained clock: with the device file's `clocks`, every compute-bound term (GEMM tiles,
//     attention tiles, a memory-bound op's flops/peak) takes fit_mhz / sustained_mhz longer: the
//     fit's kernels ran at fit_mhz, a training step's GEMM stream at the power limit sustains
//     sustained_mhz. Byte terms and the fixed per-kernel times do not change (HBM keeps its
//     clock under the power cap)
//   fused attention (flash_attn_*, mla_attn_*) with the device file's fused_attention model of
//     the run's kernel (ClusterConfig::attentionKernel: fa2, fa3 or cudnn):
//       n = ceil(seq/128) query tiles per head, each a CTA walking n key tiles (causal:
//       n(n+1)/2 per head, diagonal whole); per tile 2*128*128*(gq*qk_dim + gv*v_dim +
//       (gq+gv)*softmax_dim) flops, gq, gv = 1, 1 forward and 3, 2 backward; rate = peak *
//       efficiency of the pass / clock slowdown; time = max(batch * (visited +
//       n*cta_overhead_tiles) * tile / rate, the longest CTA (n + overhead) tiles on one SM,
//       memory) + gemm_kernel_us. Without a fit of the run's kernel: the scores GEMMs at GEMM
//       efficiency (causal halved)
//   other compute ops (memory-bound): max(flops / peak, bytes / (bandwidth * efficiency))
//     + memory_kernel_us, efficiency = the op's memory_efficiency_by_op, else memory_efficiency
//   host-side ops (offload, either model): a copy over the host link takes latency + bytes / its
//     bandwidth; the host's Adam (cpu_adam) streams its bytes through the node's host memory at
//     bandwidth / gpus_per_node (the node's GPUs step at once)
//   host: every op inside a task costs host_op_us of framework time to issue; a kernel cannot
//     start before the host has issued it (see hostUs; the simulation applies it per task). An
//     op issued from inside one framework call (Transformer Engine's ring loop: OpInstance::
//     host_calls, counted in ops/cp_ring_host.h) costs its calls x host_call_us instead
//   collectives inside a node, where the device file has NCCL all-reduce curves (measured inside
//     one node), from the curve of the largest fitted group <= n (else the smallest):
//     t = max(floor, min(ll_latency*r + factor*bytes/ll_busbw, simple_latency*r +
//     factor*bytes/simple_busbw)), factor the nccl-tests bus-bandwidth factor of the collective
//     over n ranks, r = its latency steps over the curve's all-reduce steps (events/collective.h)
//   every other collective (across nodes, or without curves): NCCL's algorithms and protocols on
//     the cluster's topology, the cheapest (modeler/network/nccl_tuner.h, docs/NETWORK.md)
// Datasheet only (an inline device, or no `model:`): the roofline max(flops/peak, bytes/bw), and
//   collectives as above.

#include <cstdint>
#include <string>

#include "config/cluster_config.h"
#include "events/event.h"
#include "modeler/network/nccl_tuner.h"

namespace evsim {

class DeviceModel {
 public:
  explicit DeviceModel(const ClusterConfig& cluster) : cluster_(cluster), network_(cluster) {}

  // Time of one execution of `event` on the device (compute) or its group (communication).
  double estimateUs(const Event& event) const;
  // Host (framework) time to issue `event` inside a task: 0 without a calibrated model.
  double hostUs(const Event& event) const;
  // Host time of one torch call made from inside a framework call (ops/cp_ring_host.h): 0
  // without a calibrated model.
  double hostCallUs() const;

  // True when the device file carries a fitted model (not the datasheet roofline).
  bool calibrated() const { return cluster_.device.model.has_value(); }

  // The pieces, public for tests and `eventsim calibrate`.
  // sm_margin: SMs left to a communication kernel (the gemm event's optional dim): the tiles
  // spread over sm_count - sm_margin SMs, each at its usual rate (InputError when none is left).
  double gemmUs(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype, int64_t memory_bytes,
                int64_t sm_margin = 0) const;
  double memoryBoundUs(double flops, int64_t memory_bytes, DType dtype,
                       const std::string& op = "") const;
  double communicationUs(const Event& event) const;
  // A fused (flash) attention op: its kernel's tile model, or the batched GEMMs it runs inside.
  double fusedAttentionUs(const Event& event) const;
  // An offload copy and the host's Adam (above): InputError when the cluster lacks the
  // node.host_link or node.host_memory they are timed by.
  double hostCopyUs(const Event& event) const;
  double hostAdamUs(const Event& event) const;

 private:
  double rooflineUs(double flops, int64_t memory_bytes, DType dtype) const;
  double intraNodeCurveUs(EventKind kind, int group, int64_t bytes) const;

  const ClusterConfig& cluster_;
  NcclTuner network_;
};

// The curve time of a collective (see above), exposed for the fit and tests.
double curveUs(const CollectiveCurve& curve, EventKind kind, int group, int64_t bytes);

}  // namespace evsim

// The device model's formulas; device_model.h states them and their units.
#include "modeler/device_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/units.h"
#include "events/collective.h"
#include "events/comm_factors.h"

namespace evsim {

namespace {

constexpr int64_t kTile = 128;       // output tile edge of the GEMM kernels modelled
constexpr int64_t kFragment = 16;    // tensor-core fragment edge: the least a tile can shrink to
constexpr int64_t kMinSplitK = 256;  // split-K never cuts the reduction finer than this
constexpr double kFlopsPerUs(double tflops) { return tflops * kFlopsPerTflop / kUsPerSecond; }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Latency-bound steps of a collective over n ranks (events/collective.h).
double ringSteps(EventKind kind, int n) { return collectiveOf(kind).latency_steps(n); }

}  // namespace

double curveUs(const CollectiveCurve& c, EventKind kind, int group, int64_t bytes) {
  const double volume = busBandwidthFactor(kind, group) * double(bytes);
  const double latency_scale = ringSteps(kind, group) / ringSteps(EventKind::kAllReduce, c.group);
  const double ll = c.ll_latency_us * latency_scale + volume / bytesPerUs(c.ll_busbw_gb_s);
  const double simple =
      c.simple_latency_us * latency_scale + volume / bytesPerUs(c.simple_busbw_gb_s);
  return std::max(c.floor_us, std::min(ll, simple));
}

double DeviceModel::rooflineUs(double flops, int64_t memory_bytes, DType dtype) const {
  const DeviceSpec& d = cluster_.device;
  double compute_us = flops / kFlopsPerUs(d.peakTflops(dtype));
  double memory_us = double(memory_bytes) / bytesPerUs(d.memory_bandwidth_gb_s);
  return std::max(compute_us, memory_us);
}

double DeviceModel::memoryBoundUs(double flops, int64_t memory_bytes, DType dtype,
                                  const std::string& op) const {
  const DeviceSpec& d = cluster_.device;
  if (!d.model) return rooflineUs(flops, memory_bytes, dtype);
  const auto own = d.model->memory_efficiency_by_op.find(op);
  const double efficiency = own != d.model->memory_efficiency_by_op.end()
                                ? own->second.value
                                : d.model->memory_efficiency.value;
  // Only the compute term slows with the sustained clock; HBM bandwidth does not.
  double compute_us = flops / kFlopsPerUs(d.peakTflops(dtype)) * d.model->computeSlowdown();
  double memory_us = double(memory_bytes) / bytesPerUs(d.memory_bandwidth_gb_s * efficiency);
  return std::max(compute_us, memory_us) + d.model->memory_kernel_us.value;
}

double DeviceModel::gemmUs(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype,
                           int64_t memory_bytes, int64_t sm_margin) const {
  const DeviceSpec& d = cluster_.device;
  // Checked before the roofline too: a margin that leaves no SM is refused whether the device is
  // fitted or not (a device file without an SM count has no SMs to leave: the roofline ignores it).
  if (sm_margin > 0 && d.sm_count > 0 && sm_margin >= d.sm_count) {
    EVSIM_THROW(InputError, "gemm m={} n={} k={}: sm_margin={} leaves none of {}'s {} SMs", m, n,
                k, sm_margin, d.id, d.sm_count);
  }
  if (!d.model) return rooflineUs(2.0 * double(batch) * m * n * k, memory_bytes, dtype);
  const DeviceModelParams& p = *d.model;
  // A dtype with its own tile fit (FP8 and its scaled forms) uses it; others the base fit.
  const auto own = p.gemm_by_dtype.find(dtype);
  const double efficiency =
      own != p.gemm_by_dtype.end() ? own->second.efficiency.value : p.gemm_efficiency.value;
  const double overhead_k = own != p.gemm_by_dtype.end() ? own->second.tile_overhead_k.value
                                                         : p.gemm_tile_overhead_k.value;
  // Tile counts in double: shapes from user input may be too large for int64 products. The
  // tiles run on the SMs the launch gets (all but a communication kernel's margin), each SM at
  // its share of the whole device's peak.
  const double sm = double(d.sm_count) - double(sm_margin);
  const double tiles = double(batch) * std::ceil(double(m) / kTile) * std::ceil(double(n) / kTile);
  double split = 1;
  if (tiles < sm)
    split = std::max(1.0, std::min(std::floor(sm / tiles), std::ceil(double(k) / kMinSplitK)));
  const double waves = std::ceil(tiles * split / sm);
  const double tm =
      std::min<double>(kTile, double(ceilDiv(std::min<int64_t>(m, kTile), kFragment) * kFragment));
  const double tn =
      std::min<double>(kTile, double(ceilDiv(std::min<int64_t>(n, kTile), kFragment) * kFragment));
  const double per_sm_flops_per_us = kFlopsPerUs(d.peakTflops(dtype)) / d.sm_count;
  // The tiles run at the sustained clock of a training step's GEMM stream (device_config.h).
  const double tile_us = (double(k) / split + overhead_k) * 2.0 * tm * tn /
                         (per_sm_flops_per_us * efficiency) * p.computeSlowdown();
  const double memory_us =
      double(memory_bytes) / bytesPerUs(d.memory_bandwidth_gb_s * p.memory_efficiency.value);
  return std::max(waves * tile_us, memory_us) + p.gemm_kernel_us.value;
}

double DeviceModel::intraNodeCurveUs(EventKind kind, int group, int64_t bytes) const {
  const std::vector<CollectiveCurve>& curves = cluster_.device.model->allreduce_curves;
  const CollectiveCurve* chosen = &curves.front();
  for (const CollectiveCurve& c : curves) {
    if (c.group <= group) chosen = &c;
  }
  return curveUs(*chosen, kind, group, bytes);
}

double DeviceModel::communicationUs(const Event& event) const {
  const DeviceSpec& d = cluster_.device;
  // The curves are measured inside one node; a P2P "group" is its two ends.
  if (d.model && !d.model->allreduce_curves.empty() && !event.placement.interNode()) {
    return intraNodeCurveUs(event.kind, std::max(event.placement.group_size, 2),
                            event.message_bytes);
  }
  return network_.timeUs(event.kind, event.placement, event.message_bytes);
}

double DeviceModel::estimateUs(const Event& event) const {
  if (isCommunication(event.kind)) return communicationUs(event);
  if (event.op == "gemm") {
    return gemmUs(1, event.dim("m"), event.dim("n"), event.dim("k"), event.dtype,
                  event.memory_bytes, event.hasDim("sm_margin") ? event.dim("sm_margin") : 0);
  }
  if (event.op == "bgemm") {
    return gemmUs(event.dim("batch"), event.dim("m"), event.dim("n"), event.dim("k"), event.dtype,
                  event.memory_bytes);
  }
  const OpFamily family = computeOpKind(event, "device model").family;
  if (family == OpFamily::kAttention) return fusedAttentionUs(event);
  if (family == OpFamily::kHostCopy) return hostCopyUs(event);
  if (family == OpFamily::kHostAdam) return hostAdamUs(event);
  return memoryBoundUs(event.flops, event.memory_bytes, event.dtype, event.op);
}

double DeviceModel::fusedAttentionUs(const Event& event) const {
  const bool backward = computeOpKind(event, "device model").backward;
  // MLA (mla_attn_*): QK^T, its recompute, dQ and dK over qk_dim channels; PV, dV and dP over
  // v_dim.
  const int64_t batch = event.dim("batch"), seq = event.dim("seq");
  const bool mla = event.hasDim("v_dim");
  const int64_t qk_dim = mla ? event.dim("qk_dim") : event.dim("dim");
  const int64_t v_dim = mla ? event.dim("v_dim") : qk_dim;
  const double qk_gemms = backward ? 3 : 1, v_gemms = backward ? 2 : 1;
  const bool causal = event.dim("causal") != 0;
  const DeviceSpec& d = cluster_.device;
  const double kernel_us = d.model ? d.model->gemm_kernel_us.value : 0;
  const double memory_us = memoryBoundUs(0, event.memory_bytes, event.dtype, event.op);
  const FusedAttentionParams* fitted = nullptr;
  if (d.model) {
    const auto it = d.model->fused_attention.find(cluster_.attentionKernel());
    if (it != d.model->fused_attention.end()) fitted = &it->second;
  }
  if (fitted != nullptr) {
    // The kernel's own tile model (device_config.h, fitted by scripts/gpu/fit_attention.py): a
    // CTA per 128-query tile of a head walks the 128-key tiles it needs (causal: up to the
    // diagonal, which it computes whole), each tile the pass's products plus the softmax work,
    // and pays a prologue/epilogue of cta_overhead_tiles; the CTAs spread over the SMs, none
    // shorter than the longest one.
    const AttentionPassParams& a = backward ? fitted->backward : fitted->forward;
    const double n = std::ceil(double(seq) / kTile);
    const double visited = causal ? n * (n + 1) / 2 : n * n;
    const double tile_flops =
        2.0 * kTile * kTile *
        (qk_gemms * qk_dim + v_gemms * v_dim + (qk_gemms + v_gemms) * a.softmax_dim.value);
    const double rate =
        kFlopsPerUs(d.peakTflops(event.dtype)) * a.efficiency.value / d.model->computeSlowdown();
    const double ovh = a.cta_overhead_tiles.value;
    const double all_us = double(batch) * (visited + n * ovh) * tile_flops / rate;
    const double longest_cta_us = (n + ovh) * tile_flops / (rate / d.sm_count);
    return std::max(std::max(all_us, longest_cta_us), memory_us) + kernel_us;
  }
  // No fitted kernel: the batched GEMMs of the unfused path at cuBLAS's efficiency: QK^T and PV
  // forward; the backward recomputes QK^T and adds dV, dP, dQ and dK (FlashAttention-2, Dao 2023:
  // 5 GEMMs), each with the flops of the scores GEMM (batch x seq x seq x dim), the causal mask
  // skipping the tiles above the diagonal (half the work). Optimistic: measured flash kernels
  // reach well under GEMM efficiency (docs/KERNELS.md).
  const double qk_us = gemmUs(batch, seq, seq, qk_dim, event.dtype, 0) - kernel_us;
  const double v_us =
      v_dim == qk_dim ? qk_us : gemmUs(batch, seq, seq, v_dim, event.dtype, 0) - kernel_us;
  return std::max((qk_us * qk_gemms + v_us * v_gemms) * (causal ? 0.5 : 1.0), memory_us) +
         kernel_us;
}

double DeviceModel::hostCopyUs(const Event& event) const {
  if (!cluster_.host_link) {
    EVSIM_THROW(InputError, "'{}': cluster {} has no node.host_link to time it ({})",
                event.signature(), cluster_.name, cluster_.source);
  }
  return cluster_.host_link->latency_us +
         double(event.memory_bytes) / bytesPerUs(cluster_.host_link->bandwidth_gb_s);
}

double DeviceModel::hostAdamUs(const Event& event) const {
  if (!cluster_.host_memory) {
    EVSIM_THROW(InputError, "'{}': cluster {} has no node.host_memory to time it ({})",
                event.signature(), cluster_.name, cluster_.source);
  }
  // The host's Adam streams its state through host memory, whose bandwidth the node's GPUs'
  // steps share (they all step at once).
  const double share_gb_s = cluster_.host_memory->bandwidth_gb_s / cluster_.gpus_per_node;
  return double(event.memory_bytes) / bytesPerUs(share_gb_s);
}

double DeviceModel::hostCallUs() const {
  return cluster_.device.model ? cluster_.device.model->host_call_us.value : 0.0;
}

double DeviceModel::hostUs(const Event&) const {
  return cluster_.device.model ? cluster_.device.model->host_op_us.value : 0.0;
}

}  // namespace evsim

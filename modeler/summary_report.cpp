#include "modeler/summary_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/strings.h"
#include "common/units.h"
#include "modeler/json_schema.h"
#include "modeler/memory_model.h"
#include "modeler/pending_reductions.h"
#include "ops/parameter_counts.h"

namespace evsim {

namespace {

// [{"dtype": "fp8", "peak_tflops": 1979, "mfu": 0.21}, {"dtype": "bf16", ...}]: the GEMM dtype's
// peak first (the "mfu" field), the model dtype's after it for FP8 runs.
nlohmann::json mfuJson(const std::vector<MfuFigure>& figures) {
  nlohmann::json out = nlohmann::json::array();
  for (const MfuFigure& f : figures) {
    out.push_back({{"dtype", dtypeName(f.dtype)}, {"peak_tflops", f.peak_tflops}, {"mfu", f.mfu}});
  }
  return out;
}

nlohmann::json deviceJson(const DeviceMetrics& d) {
  return {{"compute_ms", d.compute_us / kUsPerMs},
          {"overlap_slowdown_ms", d.overlap_slowdown_us / kUsPerMs},
          {"tp_comm_ms", d.tp_comm_us / kUsPerMs},
          {"exposed_tp_comm_ms", d.exposed_tp_comm_us / kUsPerMs},
          {"pp_comm_ms", d.pp_comm_us / kUsPerMs},
          {"dp_comm_ms", d.dp_comm_us / kUsPerMs},
          {"exposed_dp_comm_ms", d.exposed_dp_comm_us / kUsPerMs},
          {"cp_comm_ms", d.cp_comm_us / kUsPerMs},
          {"exposed_cp_comm_ms", d.exposed_cp_comm_us / kUsPerMs},
          {"ep_comm_ms", d.ep_comm_us / kUsPerMs},
          {"offload_ms", d.offload_us / kUsPerMs},
          {"exposed_offload_ms", d.exposed_offload_us / kUsPerMs},
          {"idle_ms", d.idle_us / kUsPerMs},
          {"utilization", d.utilization},
          {"bubble_fraction", d.bubble_fraction}};
}

// The EP all-to-all, exposed CP ring and exposed offload columns appear only for strategies that
// have them.
std::string deviceRow(const std::string& label, const DeviceMetrics& d, const Strategy& st) {
  std::string extra;
  if (st.ep > 1) extra += fmt::format(" {:>11.3f}", d.ep_comm_us / kUsPerMs);
  if (st.cp > 1) extra += fmt::format(" {:>11.3f}", d.exposed_cp_comm_us / kUsPerMs);
  if (st.offload != Offload::kNone) {
    extra += fmt::format(" {:>11.3f}", d.exposed_offload_us / kUsPerMs);
  }
  return fmt::format(
      "  {:<10} {:>11.3f} {:>11.3f} {:>11.3f} {:>11.3f}{} {:>11.3f} {:>9.1f}% {:>8.1f}%\n", label,
      d.compute_us / kUsPerMs, d.exposed_tp_comm_us / kUsPerMs, d.pp_comm_us / kUsPerMs,
      d.exposed_dp_comm_us / kUsPerMs, extra, d.idle_us / kUsPerMs, 100 * d.utilization,
      100 * d.bubble_fraction);
}

// The iteration time's uncertainty from the estimated share of op time: the device model's
// typical error (its fit's residuals, uncertainty_pct) applied to that share. Measured and
// derived times carry no model error. Without a fitted model the band is unknown.
struct UncertaintyBand {
  std::optional<double> band_us;
  std::string basis;
};

UncertaintyBand uncertaintyBand(const Simulation& sim) {
  const double estimated = sim.summary.provenance_share[static_cast<int>(Provenance::kEstimated)];
  const DeviceSpec& device = sim.plan.cluster.device;
  if (estimated <= 0) return {0.0, "no estimated op time"};
  if (!device.model) {
    return {std::nullopt,
            fmt::format("unknown: {:.0f}% of op time from the datasheet roofline of {}, which has "
                        "no fitted model",
                        100 * estimated, device.name)};
  }
  const SourcedValue& u = device.model->uncertainty_pct;
  return {
      sim.summary.iteration_us * estimated * u.value / 100,
      fmt::format("{:.0f}% of op time estimated by the device model of {} (+-{:.1f}%, {})",
                  100 * estimated, device.id.empty() ? device.name : device.id, u.value, u.source)};
}

// Which fused-attention fit and which clocks the device model times kernels with ("" when the
// device has neither).
std::string kernelModelLine(const ClusterConfig& cluster) {
  const std::optional<DeviceModelParams>& m = cluster.device.model;
  if (!m) return "";
  std::string out;
  if (!m->fused_attention.empty()) {
    const auto it = m->fused_attention.find(cluster.attentionKernel());
    out = it != m->fused_attention.end()
              ? fmt::format("attention {} ({})", attentionKernelName(it->first), it->second.kernel)
              : fmt::format("attention {}: no fit, the unfused GEMMs",
                            attentionKernelName(cluster.attentionKernel()));
  }
  if (m->clocks && m->computeSlowdown() != 1.0) {
    out += fmt::format("{}compute at the sustained {:.0f} MHz of the fit's {:.0f} (x{:.3f})",
                       out.empty() ? "" : "; ", m->clocks->sustained_mhz.value,
                       m->clocks->fit_mhz.value, m->computeSlowdown());
  }
  return out;
}

}  // namespace

// One stage's memory by component (bytes), memory_model.h's terms.
nlohmann::json stageMemoryJson(const StageMemory& m) {
  nlohmann::json out = {{"weights_bytes", m.weight_bytes},
          {"gradients_bytes", m.gradient_bytes},
          {"optimizer_bytes", m.optimizer_bytes},
          {"activations_bytes", m.activation_bytes},
          {"activations_in_flight", m.in_flight},
          {"recompute_transient_bytes", m.recompute_bytes},
          {"loss_transient_bytes", m.loss_bytes},
          {"embedding_gradient_bytes", m.embedding_gradient_bytes},
          {"tp_cp_buffer_bytes", m.tp_cp_buffer_bytes},
          {"moe_dispatch_bytes", m.moe_dispatch_bytes},
          {"dp_buffer_bytes", m.dp_buffer_bytes},
          {"pp_buffer_bytes", m.pp_buffer_bytes},
          {"fp8_weight_bytes", m.fp8_bytes},
          {"workspace_bytes", m.workspace_bytes},
          {"optimizer_step_transient_bytes", m.optimizer_step_bytes},
          {"step_gradient_copy_bytes", m.gradient_copy_bytes},
          {"output_merge_bytes", m.output_merge_bytes},
          {"optimizer_step_allocated_bytes", m.step_allocated_bytes},
          {"peak_at_optimizer_step", m.peak_at_optimizer_step},
          {"allocated_bytes", m.allocated_bytes},
          {"stream_pool_bytes", m.stream_pool_bytes},
          {"reserved_bytes", m.reserved_bytes},
          {"nccl_communicators", m.communicators},
          {"overhead_bytes", m.overhead_bytes},
          {"device_bytes", m.peak_bytes}};
  if (m.pending_reduction_bytes > 0) {  // --grad-reduce-sync step only
    out["pending_reduction_bytes"] = m.pending_reduction_bytes;
    out["peak_at_bucket_cast"] = m.peak_at_bucket_cast;
  }
  return out;
}

// "weights 10.2, grads 4.1, optimizer 6.3, activations 38.0, buffers 3.1 -> allocated 61.7 /
// reserved 66.0; allocated + overhead 1.1 = 62.8 of 79.1 GiB"
std::string memoryBreakdownText(const StageMemory& m, const MemoryEstimate& e) {
  auto gib = [](int64_t bytes) { return static_cast<double>(bytes) / kBytesPerGiB; };
  if (m.peak_at_optimizer_step) {
    // No activations then: the states, the moment's transient (foreach AdamW's temporary,
    // Megatron's fp32 gradient copy or pipelining's output merge) and what stays to the next step.
    const int64_t step = m.optimizer_step_bytes + m.gradient_copy_bytes;
    const bool merge = m.output_merge_bytes > step;
    const int64_t transient = merge ? m.output_merge_bytes : step;
    const char* what = merge ? "at the output merge" : "at the optimizer step";
    const char* label = merge                      ? "merged outputs"
                        : m.gradient_copy_bytes > 0 ? "fp32 gradient copy"
                                                    : "foreach temporary";
    const int64_t buffers = m.step_allocated_bytes - m.model_state_bytes - transient;
    return fmt::format(
        "{}: weights {:.1f}, grads {:.1f}, optimizer {:.1f}, {} {:.1f}, buffers {:.1f} -> "
        "allocated {:.1f} / reserved {:.1f}; allocated + overhead {:.1f} = {:.1f} of {:.1f} GiB",
        what, gib(m.weight_bytes), gib(m.gradient_bytes), gib(m.optimizer_bytes), label,
        gib(transient), gib(buffers), gib(m.allocated_bytes), gib(m.reserved_bytes),
        gib(m.overhead_bytes), gib(m.peak_bytes), gib(e.capacity_bytes));
  }
  return fmt::format(
      "weights {:.1f}, grads {:.1f}, optimizer {:.1f}, activations {:.1f}, buffers {:.1f} -> "
      "allocated {:.1f} / reserved {:.1f}; allocated + overhead {:.1f} = {:.1f} of {:.1f} GiB",
      gib(m.weight_bytes), gib(m.gradient_bytes), gib(m.optimizer_bytes),
      gib(m.activationPeakBytes()), gib(m.bufferBytes()), gib(m.allocated_bytes),
      gib(m.reserved_bytes), gib(m.overhead_bytes), gib(m.peak_bytes), gib(e.capacity_bytes));
}

namespace {

// Exposed communication per kind, mean device (ms): what compute does not hide. TP and EP
// collectives and pipeline sends block their device; DP is its exposed part less ZeRO's, which is
// all exposed.
std::vector<std::pair<const char*, double>> exposedCommMs(const DeviceMetrics& d) {
  return {{"tp", d.exposed_tp_comm_us / kUsPerMs},
          {"cp", d.exposed_cp_comm_us / kUsPerMs},
          {"ep", d.ep_comm_us / kUsPerMs},
          {"pp", d.pp_comm_us / kUsPerMs},
          {"dp", (d.exposed_dp_comm_us - d.zero_comm_us) / kUsPerMs},
          {"zero", d.zero_comm_us / kUsPerMs}};
}

nlohmann::json linksJson(const Simulation& sim, const LinkUsage& links) {
  nlohmann::json busiest = nlohmann::json::array();
  for (const LinkLoad* l : busiestLinks(links, kBusiestLinks)) {
    busiest.push_back({{"resource", l->name},
                       {"capacity_gb_s", l->capacity_bytes_per_us / 1e3},
                       {"bytes", l->bytes},
                       {"utilization", l->utilization(links.iteration_us)}});
  }
  return {{"sharing", sim.plan.cluster.topology.link_sharing}, {"busiest", busiest}};
}

std::string linksText(const Simulation& sim, const LinkUsage* links) {
  std::string out = "  exposed comm (ms)  ";
  for (const auto& [kind, ms] : exposedCommMs(sim.summary.mean_device)) {
    if (ms > 0) out += fmt::format(" {} {:.3f}", kind, ms);
  }
  out += " (mean device)\n";
  if (links == nullptr) return out;
  out += fmt::format("  busiest links       (mean utilization; link sharing {})\n",
                     sim.plan.cluster.topology.link_sharing ? "on" : "off");
  for (const LinkLoad* l : busiestLinks(*links, kBusiestLinks)) {
    out += fmt::format("    {:<32} {:5.1f}%  {} at {:.0f} GB/s\n", l->name,
                       100 * l->utilization(links->iteration_us), formatBytes(l->bytes),
                       l->capacity_bytes_per_us / 1e3);
  }
  return out;
}

nlohmann::json exposedCommJson(const DeviceMetrics& d) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [kind, ms] : exposedCommMs(d)) out[kind] = ms;
  return out;
}

}  // namespace

std::string_view memoryVerdict(int64_t peak_bytes, int64_t usable_bytes, int64_t capacity_bytes) {
  if (peak_bytes <= usable_bytes) return "fits";
  return peak_bytes <= capacity_bytes ? "over_headroom" : "oom";
}

std::string_view memoryVerdict(const MemoryEstimate& memory) {
  return memoryVerdict(memory.peak_bytes, memory.usable_bytes, memory.capacity_bytes);
}

std::string memoryVerdictText(const MemoryEstimate& memory) {
  const auto bytes = [](int64_t b) { return formatBytes(static_cast<double>(b)); };
  const int64_t to_card = memory.capacity_bytes - memory.peak_bytes;
  const std::string head =
      fmt::format("{} on stage {} of {}", bytes(memory.peak_bytes), memory.peak_stage,
                  bytes(memory.capacity_bytes));
  const std::string usable = fmt::format("{} usable with {:.0f}% headroom",
                                         bytes(memory.usable_bytes), 100 * memory.headroom);
  const std::string_view verdict = memoryVerdict(memory);
  if (verdict == "fits") {
    return fmt::format("{}: fits ({}, margin {}; {} to the card)", head, usable,
                       bytes(memory.marginBytes()), bytes(to_card));
  }
  if (verdict == "over_headroom") {
    return fmt::format(
        "{}: fits the card ({} to spare) but not the headroom ({}, {} over) -- the headroom is "
        "held back for the model's error, not a limit of the card",
        head, bytes(to_card), usable, bytes(-memory.marginBytes()));
  }
  return fmt::format("{}: OOM, {} over the card ({}, {} over)", head, bytes(-to_card), usable,
                     bytes(-memory.marginBytes()));
}

nlohmann::json summaryJson(const Simulation& sim, double memory_headroom, const LinkUsage* links) {
  const SimulationSummary& s = sim.summary;
  const Strategy& st = sim.plan.strategy;
  const MemoryEstimate memory =
      estimateMemory(sim.plan, memory_headroom, pendingReductionPeaks(sim));  // per device
  const UncertaintyBand band = uncertaintyBand(sim);
  nlohmann::json stages = nlohmann::json::array();
  for (const StageSummary& stage : s.stages) {
    nlohmann::json j = deviceJson(stage.device);
    j["stage"] = stage.stage;
    j["layers"] = stage.num_layers;
    j["peak_activations_in_flight"] = stage.peak_activations;
    j["peak_memory_bytes"] = memory.stages.at(stage.stage).peak_bytes;
    j["memory"] = stageMemoryJson(memory.stages.at(stage.stage));
    stages.push_back(j);
  }
  nlohmann::json provenance;
  for (int i = 0; i < kProvenanceCount; ++i) {
    provenance[std::string(provenanceName(static_cast<Provenance>(i)))] = s.provenance_share[i];
  }
  return {{"schema_version", kJsonSchemaVersion},
          {"model", sim.plan.model.name},
          {"parameters_total", totalParameters(sim.plan.model)},
          {"parameters_active", activeParameters(sim.plan.model)},
          {"cluster", sim.plan.cluster.name},
          {"strategy", st.name()},
          {"context_parallel", st.cp},
          {"cp_comm_type", cpCommName(st.cp_comm)},
          {"hierarchical_cp_sizes", st.cp_a2a > 0 ? nlohmann::json({st.cp_a2a, st.cp / st.cp_a2a})
                                                  : nlohmann::json(nullptr)},
          {"expert_parallel", st.ep},
          {"expert_tensor_parallel", st.expertTp()},
          {"micro_batch", st.micro_batch},
          {"global_batch", st.global_batch},
          {"micro_batches", sim.plan.micro_batches},
          {"schedule", scheduleName(st.schedule)},
          {"dp_overlap", st.dp_overlap},
          {"overlap_param_gather", st.overlap_param_gather},
          {"grad_reduce_in_bf16", st.grad_reduce_in_bf16},
          {"grad_reduce_sync", gradReduceSyncName(st.grad_reduce_sync)},
          {"grad_reduce_queue", st.grad_reduce_queue},
          {"optimizer_impl", optimizerImplName(st.optimizer_impl)},
          {"tp_comm_overlap", st.tp_comm_overlap},
          {"moe_dispatcher", moeDispatcherName(st.moe_dispatcher)},
          {"moe_a2a_overlap", st.moe_a2a_overlap},
          {"virtual_stages", sim.plan.chunksPerDevice()},  // ZB-V: 2 (its layout's chunks)
          {"microbatch_group", st.schedule == Schedule::kInterleaved
                                   ? nlohmann::json(st.microbatchGroup())
                                   : nlohmann::json(nullptr)},
          {"recompute", recomputeName(st.recompute)},
          {"swiglu_kernel", st.swiglu_recompute_product ? "xformers" : "megatron"},
          {"sequence_parallel", st.sequence_parallel},
          {"zero", st.zero_stage},
          {"offload", offloadName(st.offload)},
          {"stage_layers",
           st.stage_layers.empty() ? nlohmann::json(nullptr) : nlohmann::json(st.stage_layers)},
          {"iteration_time_ms", s.iteration_us / kUsPerMs},
          {"iteration_time_uncertainty_ms",
           band.band_us ? nlohmann::json(*band.band_us / kUsPerMs) : nlohmann::json(nullptr)},
          {"uncertainty_basis", band.basis},
          {"throughput_samples_per_s", s.samples_per_s},
          {"throughput_tokens_per_s", s.tokens_per_s},
          {"model_tflops_per_gpu", s.flops_per_gpu_per_s / kFlopsPerTflop},
          {"mfu", s.mfu},
          {"mfu_by_peak", mfuJson(s.mfu_by_peak)},
          {"bubble_fraction", s.bubble_fraction},
          {"critical_stage", s.critical_stage},
          {"devices",
           {{"count", st.gpus()},
            {"simulated", sim.plan.pipelines.size() * sim.plan.deviceStages()},
            {"min", deviceJson(s.min_device)},
            {"mean", deviceJson(s.mean_device)},
            {"max", deviceJson(s.max_device)}}},
          {"stages", stages},
          {"framework", frameworkName(st.framework)},
          {"reshard_after_forward", st.zero_stage == 3 && st.gradGroupSize() > 1
                                        ? nlohmann::json(st.reshardsAfterForward())
                                        : nlohmann::json(nullptr)},
          {"fsdp_wrap", st.framework == Framework::kFsdp
                            ? nlohmann::json(fsdpWrapName(st.fsdp_wrap))
                            : nlohmann::json(nullptr)},
          {"peak_memory_bytes", memory.peak_bytes},
          {"peak_memory_stage", memory.peak_stage},
          {"allocated_memory_bytes", memory.allocated_peak_bytes},
          {"reserved_memory_bytes", memory.reserved_peak_bytes},
          {"memory_headroom", memory.headroom},
          {"memory_margin_bytes", memory.marginBytes()},
          {"memory_verdict", memoryVerdict(memory)},
          {"fits_device_memory", memory.peak_bytes <= memory.capacity_bytes},
          {"device_margin_bytes", memory.capacity_bytes - memory.peak_bytes},
          {"device_memory_bytes", memory.capacity_bytes},
          {"usable_memory_bytes", memory.usable_bytes},
          {"host_memory_bytes_per_node", memory.host_peak_bytes},
          {"usable_host_memory_bytes_per_node", memory.host_usable_bytes},
          {"provenance", provenance},
          {"exposed_comm_ms", exposedCommJson(s.mean_device)},
          {"links", links ? linksJson(sim, *links) : nlohmann::json(nullptr)}};
}

std::string summaryText(const Simulation& sim, double memory_headroom, const LinkUsage* links) {
  const SimulationSummary& s = sim.summary;
  const IterationPlan& p = sim.plan;
  const Strategy& st = p.strategy;
  std::string out =
      fmt::format("{} on {} ({} x {}): {} b={} B={} m={} {}{}\n", p.model.name, p.cluster.name,
                  st.gpus(), p.cluster.device.name, st.name(), st.micro_batch, st.global_batch,
                  p.micro_batches, scheduleName(st.schedule), st.techniques());
  const UncertaintyBand band = uncertaintyBand(sim);
  out += fmt::format("  iteration time     {:.3f} ms", s.iteration_us / kUsPerMs);
  if (!band.band_us) {
    out += " (+-? estimated: no fitted device model)";
  } else if (*band.band_us > 0) {
    out += fmt::format(" (+-{:.3f} ms estimated)", *band.band_us / kUsPerMs);
  }
  out += fmt::format("\n  uncertainty        {}\n", band.basis);
  if (const std::string kernels = kernelModelLine(sim.plan.cluster); !kernels.empty()) {
    out += fmt::format("  kernel model       {}\n", kernels);
  }
  out += fmt::format("  throughput         {:.2f} samples/s, {:.0f} tokens/s\n", s.samples_per_s,
                     s.tokens_per_s);
  out += fmt::format("  model FLOP/s/GPU   {:.2f} TFLOP/s, MFU {}\n",
                     s.flops_per_gpu_per_s / kFlopsPerTflop, mfuText(s.mfu_by_peak));
  out += fmt::format("  pipeline bubble    {:.1f}%   critical stage {}\n", 100 * s.bubble_fraction,
                     s.critical_stage);
  if (p.stages.size() > 1) {
    // The split the plan used (balanced or given), in virtual-stage order: it decides the bubble.
    std::vector<int> layers;
    for (const StagePlan& stage : p.stages) layers.push_back(stage.num_layers);
    out += fmt::format("  stage layers       {} (blocks per model chunk, virtual-stage order)\n",
                       fmt::join(layers, ","));
  }
  if (s.max_device.overlap_slowdown_us > 0) {
    const OverlapSlowdown& f = p.cluster.device.overlap_slowdown;
    out += fmt::format(
        "  overlap slowdown   +{:.3f} ms per device (mean) from compute beside communication "
        "(x{:g} NVLink, x{:g} network; --overlap-slowdown off leaves it out)\n",
        s.mean_device.overlap_slowdown_us / kUsPerMs, f.nvlink.value, f.network.value);
  }
  out += linksText(sim, links);
  out += fmt::format(
      "  provenance         measured {:.1f}%, derived {:.1f}%, estimated {:.1f}% of op time\n",
      100 * s.provenance_share[0], 100 * s.provenance_share[1], 100 * s.provenance_share[2]);
  const MemoryEstimate memory = estimateMemory(p, memory_headroom, pendingReductionPeaks(sim));
  out += fmt::format("  peak memory/GPU    {}\n", memoryVerdictText(memory));
  out += fmt::format("  memory ({}, stage {}) {}\n", frameworkName(st.framework), memory.peak_stage,
                     memoryBreakdownText(memory.stages.at(memory.peak_stage), memory));
  if (st.offload != Offload::kNone) {
    out += fmt::format("  host memory/node   {} of {} usable{}\n",
                       formatBytes(static_cast<double>(memory.host_peak_bytes)),
                       formatBytes(static_cast<double>(memory.host_usable_bytes)),
                       memory.fitsHost() ? "" : " -- would not fit");
  }
  out += fmt::format(
      "  devices            {} ({} simulated: {} stage(s) x {} pipeline class(es))\n", st.gpus(),
      p.pipelines.size() * p.deviceStages(), p.deviceStages(), p.pipelines.size());
  std::string extra_heads;
  if (st.ep > 1) extra_heads += fmt::format(" {:>11}", "ep-comm");
  if (st.cp > 1) extra_heads += fmt::format(" {:>11}", "cp-exposed");
  if (st.offload != Offload::kNone) extra_heads += fmt::format(" {:>11}", "offload-exp");
  out += fmt::format("\n  per device (ms)    {:>11} {:>11} {:>11} {:>11}{} {:>11} {:>10} {:>9}\n",
                     "compute", st.tp_comm_overlap ? "tp-exposed" : "tp-comm", "pp-comm",
                     "dp-exposed", extra_heads, "idle", "util",
                     "bubble");
  out += deviceRow("min", s.min_device, st);
  out += deviceRow("mean", s.mean_device, st);
  out += deviceRow("max", s.max_device, st);
  for (const StageSummary& stage : s.stages) {
    out += deviceRow(fmt::format("stage {}", stage.stage), stage.device, st);
  }
  out += "\n  peak memory/GPU   ";
  for (const StageMemory& stage : memory.stages) {
    out += fmt::format(" s{} {}", stage.stage, formatBytes(static_cast<double>(stage.peak_bytes)));
  }
  out += "\n";
  return out;
}

}  // namespace evsim

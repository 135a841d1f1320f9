#include "modeler/cli/search_output.h"

#include <fmt/format.h>

#include "common/units.h"
#include "modeler/simulation.h"
#include "modeler/summary_report.h"

namespace evsim {

namespace {

std::string csvQuote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string provenanceText(const CandidateResult& r) {
  return fmt::format("{:.0f}/{:.0f}/{:.0f}", 100 * r.provenance_share[0],
                     100 * r.provenance_share[1], 100 * r.provenance_share[2]);
}

nlohmann::json candidateJson(const CandidateResult& r, const SearchReport& report) {
  const Strategy& s = r.strategy;
  bool valid = r.status != CandidateStatus::kInvalid;
  bool ok = r.status == CandidateStatus::kOk;
  nlohmann::json j = {{"rank", ok ? nlohmann::json(r.rank) : nlohmann::json()},
                      {"strategy", s.name()},
                      {"tp", s.tp},
                      {"pp", s.pp},
                      {"dp", s.dp},
                      {"cp", s.cp},
                      {"cp_comm_type", cpCommName(s.cp_comm)},
                      {"ep", s.ep},
                      {"etp", s.expertTp()},
                      {"micro_batch", s.micro_batch},
                      {"schedule", scheduleName(s.schedule)},
                      {"virtual_stages", s.virtual_stages},
                      {"recompute", recomputeName(s.recompute)},
                      {"sequence_parallel", s.sequence_parallel},
                      {"zero", s.zero_stage},
                      {"framework", frameworkName(s.framework)},
                      {"fsdp_wrap", s.framework == Framework::kFsdp
                                        ? nlohmann::json(fsdpWrapName(s.fsdp_wrap))
                                        : nlohmann::json(nullptr)},
                      {"dp_overlap", s.dp_overlap},
                      {"overlap_param_gather", s.overlap_param_gather},
                      {"grad_reduce_in_bf16", s.grad_reduce_in_bf16},
                      {"grad_reduce_sync", gradReduceSyncName(s.grad_reduce_sync)},
                      {"grad_reduce_queue", s.grad_reduce_queue},
                      {"optimizer_impl", optimizerImplName(s.optimizer_impl)},
                      {"tp_comm_overlap", s.tp_comm_overlap},
                      {"offload", offloadName(s.offload)},
                      {"stage_layers", s.stage_layers.empty() ? nlohmann::json(nullptr)
                                                              : nlohmann::json(s.stage_layers)},
                      {"status", candidateStatusName(r.status)}};
  j["micro_batches"] = valid ? nlohmann::json(r.micro_batches) : nlohmann::json();
  j["iteration_time_ms"] = ok ? nlohmann::json(r.iteration_us / kUsPerMs) : nlohmann::json();
  j["throughput_samples_per_s"] = ok ? nlohmann::json(r.samples_per_s) : nlohmann::json();
  j["throughput_tokens_per_s"] =
      ok ? nlohmann::json(r.samples_per_s * static_cast<double>(report.tokens_per_sample))
         : nlohmann::json();
  j["time_vs_best"] = ok ? nlohmann::json(report.timeVsBest(r)) : nlohmann::json();
  j["equivalent_plans"] = r.equivalents;
  j["bubble_fraction"] = ok ? nlohmann::json(r.bubble_fraction) : nlohmann::json();
  j["model_tflops_per_gpu"] = ok ? nlohmann::json(r.model_tflops_per_gpu) : nlohmann::json();
  j["mfu"] = ok ? nlohmann::json(r.mfu) : nlohmann::json();  // of the report's mfu_peak
  j["peak_memory_bytes"] = valid ? nlohmann::json(r.peak_memory_bytes) : nlohmann::json();
  j["peak_memory_stage"] = valid ? nlohmann::json(r.peak_memory_stage) : nlohmann::json();
  j["memory_headroom_bytes"] =
      valid ? nlohmann::json(report.usable_bytes - r.peak_memory_bytes) : nlohmann::json();
  // As simulate's: an "oom" status above the usable share may still fit the card.
  j["memory_verdict"] =
      valid ? nlohmann::json(memoryVerdict(r.peak_memory_bytes, report.usable_bytes,
                                           report.capacity_bytes))
            : nlohmann::json();
  j["device_margin_bytes"] =
      valid ? nlohmann::json(report.capacity_bytes - r.peak_memory_bytes) : nlohmann::json();
  if (ok) {
    nlohmann::json provenance;
    for (int i = 0; i < kProvenanceCount; ++i) {
      provenance[std::string(provenanceName(static_cast<Provenance>(i)))] = r.provenance_share[i];
    }
    j["provenance"] = provenance;
  } else {
    j["provenance"] = nullptr;
  }
  if (!valid) j["violation"] = r.violation;
  return j;
}

nlohmann::json countsJson(const SearchReport& report) {
  nlohmann::json counts = {{"candidates", report.total()},
                           {"valid", report.valid},
                           {"ok", report.ok},
                           {"oom", report.oom},
                           {"invalid", report.invalid}};
  counts["invalid_by_rule"] = report.invalid_by_rule;
  if (report.pruned) {
    // Pruned search: how many candidates each tier saw, and why the others went no further.
    counts["closed_form"] = report.closed_form;
    counts["simulated"] = report.simulated;
    counts["pruned_by_bound"] = report.pruned_by_bound;
    counts["listed"] = report.candidates.size();
  }
  return counts;
}

nlohmann::json adviceJson(const std::optional<FitAdvice>& advice) {
  if (!advice) return nullptr;
  return {{"change", advice->change},
          {"strategy", advice->strategy.name()},
          {"micro_batch", advice->strategy.micro_batch},
          {"peak_memory_bytes", advice->peak_memory_bytes}};
}

void writeCsv(const SearchReport& report, std::ostream& out) {
  out << "rank,strategy,tp,pp,dp,cp,ep,micro_batch,schedule,virtual_stages,recompute,sequence_"
         "parallel,"
         "zero,dp_overlap,overlap_param_gather,tp_comm_overlap,offload,status,iteration_time_ms,"
         "throughput_samples_per_s,throughput_tokens_per_s,time_vs_best,bubble_fraction,peak_"
         "memory_bytes,"
         "memory_headroom_bytes,measured_share,derived_share,estimated_share,violation,"
         "equivalent_plans,cp_comm_type\n";
  report.candidates.forEach([&](const CandidateResult& r) {
    const Strategy& s = r.strategy;
    bool valid = r.status != CandidateStatus::kInvalid;
    bool ok = r.status == CandidateStatus::kOk;
    out << (ok ? std::to_string(r.rank) : "") << ',' << s.name() << ',' << s.tp << ',' << s.pp
        << ',' << s.dp << ',' << s.cp << ',' << s.ep << ',' << s.micro_batch << ','
        << scheduleName(s.schedule) << ',' << s.virtual_stages << ',' << recomputeName(s.recompute)
        << ',' << (s.sequence_parallel ? "on" : "off") << ',' << s.zero_stage << ','
        << (s.dp_overlap ? "on" : "off") << ',' << (s.overlap_param_gather ? "on" : "off") << ','
        << (s.tp_comm_overlap ? "on" : "off") << ',' << offloadName(s.offload) << ','
        << candidateStatusName(r.status) << ',';
    if (ok) {
      out << fmt::format("{:.6f},{:.6f},{:.1f},{:.6f},{:.6f}", r.iteration_us / kUsPerMs,
                         r.samples_per_s,
                         r.samples_per_s * static_cast<double>(report.tokens_per_sample),
                         report.timeVsBest(r), r.bubble_fraction);
    } else {
      out << ",,,,";
    }
    out << ',';
    if (valid)
      out << r.peak_memory_bytes << ',' << (report.usable_bytes - r.peak_memory_bytes);
    else
      out << ',';
    out << ',';
    if (ok) {
      out << fmt::format("{:.6f},{:.6f},{:.6f}", r.provenance_share[0], r.provenance_share[1],
                         r.provenance_share[2]);
    } else {
      out << ",,";
    }
    out << ',' << (valid ? "" : csvQuote(r.violation)) << ',';
    std::string equivalents;
    for (const std::string& e : r.equivalents) equivalents += (equivalents.empty() ? "" : ";") + e;
    out << (equivalents.empty() ? "" : csvQuote(equivalents)) << ',' << cpCommName(s.cp_comm)
        << '\n';
    return true;
  });
}

}  // namespace evsim

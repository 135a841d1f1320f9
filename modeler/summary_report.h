#pragma once
// The simulation summary as users read it (text) and programs read it (JSON). JSON keys:
// iteration_time_ms, throughput_samples_per_s, throughput_tokens_per_s, model_tflops_per_gpu, mfu,
// bubble_fraction, critical_stage, devices {count, min, mean, max: {compute_ms, tp_comm_ms,
// pp_comm_ms, dp_comm_ms, exposed_dp_comm_ms, idle_ms, utilization, bubble_fraction}},
// virtual_stages (v), stages [...] (one per device stage, over all its chunks), provenance
// {measured, derived, estimated} (shares of op time), and the memory model's peak_memory_bytes
// (overall and per stage), peak_memory_stage, device_memory_bytes, usable_memory_bytes and
// memory_verdict (memoryVerdict).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "modeler/link_usage.h"
#include "modeler/memory_model.h"
#include "modeler/simulation.h"

namespace evsim {

// `links` (link_usage.h), when given, adds the busiest links: "links": {"sharing": bool,
// "busiest": [{"resource", "capacity_gb_s", "bytes", "utilization"}, ...]} (utilisation: the mean
// over the iteration; at most kBusiestLinks). Both always carry the exposed communication per kind
// (mean device): "exposed_comm_ms": {"tp", "cp", "ep", "pp", "dp", "zero"}.
inline constexpr size_t kBusiestLinks = 5;

// The device memory verdict: "fits" (within the usable share), "over_headroom" (above the usable
// share, within the card: the headroom is held back for the model's error and the allocator, not a
// limit of the card, and published plans run there, e.g. Meta's Llama 3.1 405B), or "oom" (above
// the card's memory).
std::string_view memoryVerdict(const MemoryEstimate& memory);
// The same from the peak, usable and device bytes (a search candidate's).
std::string_view memoryVerdict(int64_t peak_bytes, int64_t usable_bytes, int64_t capacity_bytes);
// The summary's line for the verdict, e.g. "78.68 GiB on stage 1 of 79.11 GiB: fits the card
// (439.68 MiB to spare) but not the headroom (75.15 GiB usable with 5% headroom, 3.53 GiB over)
// -- ...": the margin to the usable share and to the card, both said plainly.
std::string memoryVerdictText(const MemoryEstimate& memory);

nlohmann::json summaryJson(const Simulation& sim, double memory_headroom = kDefaultMemoryHeadroom,
                           const LinkUsage* links = nullptr);
std::string summaryText(const Simulation& sim, double memory_headroom = kDefaultMemoryHeadroom,
                        const LinkUsage* links = nullptr);

}  // namespace evsim

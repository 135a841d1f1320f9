// `eventsim search`'s output on standard output (search_print.h): the text table and the JSON
// report. Apart from search_command.cpp (options and the run) because the two change for
// different reasons: a column or a line here, a flag or a check there.
#include "modeler/cli/search_print.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "common/units.h"
#include "modeler/cli/search_output.h"
#include "modeler/json_schema.h"
#include "modeler/simulation.h"
#include "modeler/summary_report.h"
#include "modeler/time_to_train.h"

namespace evsim {

namespace {

// The techniques of a candidate for the table: "v3 rc=sel sp z1", "-" when none.
std::string shortTechniques(const Strategy& s) {
  const std::string text = s.techniques(Strategy::TechniqueStyle::kShort);
  return text.empty() ? "-" : text.substr(1);
}

double gib(int64_t bytes) { return static_cast<double>(bytes) / kBytesPerGiB; }

// The peaks each candidate's "mfu" is against (the first) and, for FP8 models, the bf16 one.
nlohmann::json mfuPeaksJson(const ModelConfig& model, const ClusterConfig& cluster) {
  nlohmann::json peaks = nlohmann::json::array();
  for (const MfuFigure& f : mfuFigures(cluster.device, model, 0)) {
    peaks.push_back({{"dtype", dtypeName(f.dtype)}, {"peak_tflops", f.peak_tflops}});
  }
  return peaks;
}

// --train-tokens: the whole run at this candidate's iteration time (ok candidates only).
std::optional<TimeToTrain> runTime(const SearchArgs& args, const ModelConfig& model,
                                   const CandidateResult& r) {
  if (!args.train_run.given() || r.status != CandidateStatus::kOk) return std::nullopt;
  return timeToTrain(*args.train_run.tokens(), args.run.global_batch * model.seq_length,
                     r.iteration_us, args.gpus, args.train_run.gpu_hour_cost);
}

// One row of the JSON's "candidates", with its time to train under --train-tokens.
nlohmann::json rowJson(const SearchArgs& args, const ModelConfig& model, const SearchReport& report,
                       const CandidateResult& r) {
  nlohmann::json j = candidateJson(r, report);
  if (std::optional<TimeToTrain> t = runTime(args, model, r))
    j["time_to_train"] = timeToTrainJson(*t);
  return j;
}

}  // namespace

// The report as JSON; its "candidates" empty unless `with_candidates` (printJson streams them).
nlohmann::json reportJson(const SearchArgs& args, const ModelConfig& model,
                          const ClusterConfig& cluster, const SearchReport& report,
                          const std::optional<FitAdvice>& advice, bool with_candidates) {
  nlohmann::json candidates = nlohmann::json::array();
  if (with_candidates) {
    report.candidates.forEach([&](const CandidateResult& r) {
      candidates.push_back(rowJson(args, model, report, r));
      return true;
    });
  }
  const CandidateResult* best = report.best();
  return {{"schema_version", kJsonSchemaVersion},
          {"model", model.name},
          {"cluster", cluster.name},
          {"device", cluster.device.name},
          {"gpus", args.gpus},
          {"global_batch", args.run.global_batch},
          {"device_memory_bytes", report.capacity_bytes},
          {"usable_memory_bytes", report.usable_bytes},
          {"memory_headroom", report.headroom},
          {"mfu_peaks", mfuPeaksJson(model, cluster)},
          {"counts", countsJson(report)},
          {"best", best ? nlohmann::json(best->strategy.name()) : nlohmann::json()},
          {"simulate_command",
           best ? nlohmann::json(simulateCommand(args, best->strategy)) : nlohmann::json()},
          {"closest_oom",
           report.closest_oom ? candidateJson(*report.closest_oom, report) : nlohmann::json()},
          {"fit_advice", adviceJson(advice)},
          {"candidates", candidates}};
}

// --json on stdout: what reportJson(...).dump(2) prints, byte for byte, with the candidates
// streamed into their place one at a time, so that they are never all in memory.
void printJson(const SearchArgs& args, const ModelConfig& model, const ClusterConfig& cluster,
               const SearchReport& report, const std::optional<FitAdvice>& advice,
               std::ostream& out) {
  nlohmann::json j = reportJson(args, model, cluster, report, advice, /*with_candidates=*/false);
  const std::string placeholder = "\"@candidates@\"";
  j["candidates"] = "@candidates@";
  const std::string text = j.dump(2);
  const size_t at = text.find(placeholder);
  out << text.substr(0, at);
  if (report.candidates.empty()) {
    out << "[]";
  } else {
    // dump(2) puts the array's elements 4 spaces in ("candidates" is a member of the top object).
    out << "[\n";
    bool first = true;
    report.candidates.forEach([&](const CandidateResult& r) {
      std::string row = rowJson(args, model, report, r).dump(2);
      if (!first) out << ",\n";
      first = false;
      out << "    ";
      for (char c : row) {
        out << c;
        if (c == '\n') out << "    ";
      }
      return true;
    });
    out << "\n  ]";
  }
  out << text.substr(at + placeholder.size()) << "\n";
}

namespace {

void printRowHeader() {
  fmt::print(
      "{:>4}  {:<10} {:>3}  {:<11} {:<24} {:>11} {:>11} {:>8} {:>6} {:>7} {:>7} {:>10} {:>10}  "
      "{:<11} {}\n",
      "rank", "strategy", "b", "schedule", "techniques", "iter (ms)", "tokens/s", "TFLOP/s", "MFU",
      "vs best", "bubble", "peak GiB", "margin GiB", "m/d/e %", "status");
}

// "ok", or "ok (same timeline: gpipe; dapple rc=sel)" for a row that stands for equivalent plans.
std::string okStatus(const CandidateResult& r) {
  if (r.equivalents.empty()) return "ok";
  return fmt::format("ok (same timeline: {})", fmt::join(r.equivalents, "; "));
}

void printOkRow(const CandidateResult& r, const SearchReport& report) {
  const Strategy& s = r.strategy;
  fmt::print(
      "{:>4}  {:<10} {:>3}  {:<11} {:<24} {:>11.3f} {:>11.0f} {:>8.1f} {:>5.1f}% {:>6.2f}x "
      "{:>6.1f}% {:>10.2f} {:>10.2f}  {:<11} {}\n",
      r.rank, s.name(), s.micro_batch, scheduleName(s.schedule), shortTechniques(s),
      r.iteration_us / kUsPerMs, r.samples_per_s * static_cast<double>(report.tokens_per_sample),
      r.model_tflops_per_gpu, 100 * r.mfu, report.timeVsBest(r), 100 * r.bubble_fraction,
      gib(r.peak_memory_bytes), gib(report.usable_bytes - r.peak_memory_bytes), provenanceText(r),
      okStatus(r));
}

void printOomRow(const CandidateResult& r, const SearchReport& report) {
  const Strategy& s = r.strategy;
  fmt::print(
      "{:>4}  {:<10} {:>3}  {:<11} {:<24} {:>11} {:>11} {:>8} {:>6} {:>7} {:>7} {:>10.2f} "
      "{:>10.2f}  {:<11} OOM (stage {})\n",
      "-", s.name(), s.micro_batch, scheduleName(s.schedule), shortTechniques(s), "-", "-", "-",
      "-", "-", "-", gib(r.peak_memory_bytes), gib(report.usable_bytes - r.peak_memory_bytes), "-",
      r.peak_memory_stage);
}

std::string candidateText(const Strategy& s) {
  return fmt::format("{} b={} {}{}", s.name(), s.micro_batch, scheduleName(s.schedule),
                     s.techniques());
}

}  // namespace

// The table of candidates that fit (at most --top), then the rejected ones: every one with
// --show-rejected (at most --top OOM rows), else one line for the OOM and one per invalid rule
// (count and an example), so the output stays a screen long whatever the space.
void printText(const SearchArgs& args, const ModelConfig& model, const ClusterConfig& cluster,
               const SearchReport& report, const std::optional<FitAdvice>& advice) {
  fmt::print(
      "Search: {} on {} ({} GPUs of {}, {:.1f} GiB; usable {:.1f} GiB with {:.0f}% headroom), "
      "B={}\n",
      model.name, cluster.name, args.gpus, cluster.device.name, gib(report.capacity_bytes),
      gib(report.usable_bytes), 100 * report.headroom, args.run.global_batch);
  fmt::print("candidates: {} (valid {}: ok {}, OOM {}; invalid {})\n", report.total(), report.valid,
             report.ok, report.oom, report.invalid);
  fmt::print("{}\n", searchedSpaceText(args));
  if (report.equivalent > 0) {
    fmt::print(
        "equivalent: {} plan(s) simulate to the same timeline as a listed one (same events and "
        "times: a flag without effect here) and are named in its row, not ranked apart\n",
        report.equivalent);
  }
  if (report.pruned) {
    fmt::print(
        "tiers: closed form {} (memory + time bound), simulated {}, pruned by bound {} "
        "(top {}; --exhaustive simulates and lists every candidate)\n",
        report.closed_form, report.simulated, report.pruned_by_bound, args.top);
  }
  fmt::print("\n");
  printRowHeader();
  report.candidates.forEach([&](const CandidateResult& r) {
    if (r.status != CandidateStatus::kOk || (args.top > 0 && r.rank > args.top)) return false;
    printOkRow(r, report);
    return true;
  });
  if (args.top > 0 && report.ok > args.top) {
    fmt::print("  ({} more ok candidates not shown: --top {})\n", report.ok - args.top, args.top);
  }
  if (args.show_rejected) {
    int oom_rows = 0;
    report.candidates.forEach([&](const CandidateResult& r) {
      if (r.status == CandidateStatus::kOk) return true;  // OOM rows follow the ok ones
      if (r.status != CandidateStatus::kOom || (args.top > 0 && oom_rows >= args.top)) return false;
      printOomRow(r, report);
      ++oom_rows;
      return true;
    });
    if (report.oom > oom_rows) {
      fmt::print("  ({} more OOM candidates not shown: --top {})\n", report.oom - oom_rows,
                 args.top);
    }
  } else if (report.closest_oom) {
    const CandidateResult& c = *report.closest_oom;
    // Above the usable share is not above the card: say which when it fits the card. A device
    // peak within the usable share is OOM for the node's host memory (--offload's states).
    const std::string_view verdict =
        memoryVerdict(c.peak_memory_bytes, report.usable_bytes, report.capacity_bytes);
    std::string card;
    if (verdict == "fits") {
      card = ", within the device's share: its node's host memory is what it exceeds";
    } else if (verdict == "over_headroom") {
      card = fmt::format(", fits the card's {:.2f} GiB by {:.2f} but not the {:.0f}% headroom",
                         gib(report.capacity_bytes),
                         gib(report.capacity_bytes - c.peak_memory_bytes), 100 * report.headroom);
    }
    fmt::print(
        "\nOOM ({} candidates): the closest, {}, needs {:.2f} GiB of {:.2f} usable{} "
        "(--show-rejected lists them)\n",
        report.oom, candidateText(c.strategy), gib(c.peak_memory_bytes), gib(report.usable_bytes),
        card);
  }
  if (report.invalid > 0 && args.show_rejected && !report.pruned) {
    // One line per strategy, micro-batch and rule: schedules and techniques often break the same.
    fmt::print("\ninvalid ({} candidates):\n", report.invalid);
    std::map<std::tuple<std::string, int64_t, std::string>, bool> listed;
    int64_t rows = 0, hidden = 0;
    report.candidates.forEach([&](const CandidateResult& r) {
      if (r.status != CandidateStatus::kInvalid) return true;  // the invalid rows come last
      if (!listed.try_emplace({r.strategy.name(), r.strategy.micro_batch, r.violation}, true)
               .second) {
        return true;
      }
      if (args.top > 0 && rows >= args.top) {
        ++hidden;
        return true;
      }
      fmt::print("  {:<10} b={:<3} {}\n", r.strategy.name(), r.strategy.micro_batch, r.violation);
      ++rows;
      return true;
    });
    if (hidden > 0) fmt::print("  ({} more lines not shown: --top {})\n", hidden, args.top);
  } else if (report.invalid > 0) {
    fmt::print("\ninvalid ({} candidates), by rule (count, then an example):\n", report.invalid);
    for (const auto& [rule, count] : report.invalid_by_rule) {
      const auto example = report.invalid_example.find(rule);
      fmt::print("  {:>8}  {}\n", count,
                 example == report.invalid_example.end() ? rule : example->second);
    }
  }
  if (const CandidateResult* best = report.best()) {
    fmt::print(
        "\nbest: {} — {:.3f} ms, {:.2f} samples/s, {:.0f} tokens/s, {:.1f} TFLOP/s/GPU, MFU {}\n",
        candidateText(best->strategy), best->iteration_us / kUsPerMs, best->samples_per_s,
        best->samples_per_s * static_cast<double>(report.tokens_per_sample),
        best->model_tflops_per_gpu,
        mfuText(mfuFigures(cluster.device, model, best->model_tflops_per_gpu * kFlopsPerTflop)));
    if (std::optional<TimeToTrain> t = runTime(args, model, *best)) {
      fmt::print("{}", timeToTrainText(*t));
    }
    fmt::print("full timeline: {} --trace best.json.gz\n", simulateCommand(args, best->strategy));
    return;
  }
  // No valid candidate (the --show-rejected report before the exit-2 line): none was weighed
  // against memory, so "no strategy fits" would name the wrong cause.
  if (report.valid == 0) return;
  fmt::print("\nno strategy fits in {:.1f} GiB per GPU (usable {:.1f} GiB)\n",
             gib(report.capacity_bytes), gib(report.usable_bytes));
  if (advice) {
    fmt::print("smallest change that fits: {} with {} ({:.2f} GiB): search with it in the space\n",
               candidateText(report.closest_oom->strategy), advice->change,
               gib(advice->peak_memory_bytes));
  } else if (report.closest_oom) {
    fmt::print(
        "no single technique or pair (sequence parallelism, recomputation, ZeRO, a smaller "
        "micro-batch) brings the closest candidate under the limit: more GPUs or a larger "
        "device\n");
  }
}

}  // namespace evsim

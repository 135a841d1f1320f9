#include "modeler/cli/search_refusals.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "plan/strategy_space.h"

namespace evsim {

namespace {

// Whether the searched list `list` holds `value`.
template <class List, class Value>
bool has(const List& list, const Value& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

// A value of --ep, --etp or --cp that no candidate of this model can take is skipped by the
// enumeration (plan/strategy_space.cpp) without a word: refused here as simulate refuses it.
void checkSearchedSizesApply(const ModelConfig& model, const StrategySpace& space) {
  const int64_t experts = model.moe.num_experts;
  for (int e : space.expert_parallel) {
    if (e > 1 && experts == 0) {
      EVSIM_THROW(InputError, "--ep {}: {} has no experts (num_experts)", e, model.name);
    }
    if (e > 1 && experts % e != 0) {
      EVSIM_THROW(InputError, "--ep {}: does not divide num_experts={} of {}", e, experts,
                  model.name);
    }
  }
  for (int etp : space.expert_tensor_parallel) {
    if (etp <= 0) continue;  // 0: ETP = M, always tried
    if (experts == 0) {
      EVSIM_THROW(InputError, "--etp {}: {} has no experts (num_experts)", etp, model.name);
    }
    if (model.moe.expert_ffn % etp != 0) {
      EVSIM_THROW(InputError, "--etp {}: does not divide moe_ffn_hidden_size={} of {}", etp,
                  model.moe.expert_ffn, model.name);
    }
  }
  for (int c : space.context_parallel) {
    if (c > 1 && !model.spec.flash_attention) {
      EVSIM_THROW(InputError,
                  "--cp {}: context parallelism needs flash_attention: true in {} (Megatron runs "
                  "ring attention only with fused attention)",
                  c, model.name);
    }
  }
}

// A technique applied "on every candidate with X" where the space holds no X does nothing; the
// report listed it as searched. Refused, as --grad-reduce-sync step without ZeRO-2 is.
void refuseTechniquesWithoutCandidates(const SearchArgs& args, const SearchOptions& options) {
  const StrategySpace& space = options.space;
  if (options.base.cp_comm != CpComm::kP2p &&
      std::none_of(space.context_parallel.begin(), space.context_parallel.end(),
                   [](int c) { return c > 1; })) {
    EVSIM_THROW(InputError,
                "--cp-comm-type {}: applies to candidates with C > 1, and --cp {} has none",
                args.cp_comm_type, fmt::join(space.context_parallel, ","));
  }
  if (args.tp_comm_overlap && !has(space.sequence_parallel, true)) {
    EVSIM_THROW(InputError,
                "--tp-comm-overlap: applies to candidates with sequence parallelism, and {} {} "
                "has none",
                args.tp_comm.empty() ? "--sequence-parallel" : "--tp-comm",
                args.tp_comm.empty() ? args.sequence_parallel : args.tp_comm);
  }
  if (args.overlap_param_gather && (!(has(space.zero_stages, 1) || has(space.zero_stages, 2)) ||
                                    !has(space.dp_overlaps, true))) {
    EVSIM_THROW(InputError,
                "--overlap-param-gather: applies to candidates with ZeRO 1 or 2 and DP overlap, "
                "and --zero {} --dp-overlap {} has none",
                args.zero_stages, args.dp_overlaps);
  }
  if (args.virtual_stages_given && !has(space.schedules, Schedule::kInterleaved)) {
    EVSIM_THROW(InputError, "--virtual-stages {}: only with interleaved in --schedule {}",
                args.virtual_stages, args.schedules);
  }
  // Asked of the schedules' own chunk rules, as the enumeration asks them (strategy_space.h).
  if (space.uneven_stage_shift > 0 &&
      std::none_of(space.schedules.begin(), space.schedules.end(),
                   [&](Schedule s) { return takesUnevenStages(s, space); })) {
    EVSIM_THROW(InputError,
                "--uneven-stages {}: splits pipelines of one model chunk per device, and "
                "--schedule {}{} runs none (interleaved: v chunks, zbv and dualpipev: 2)",
                space.uneven_stage_shift, args.schedules,
                has(space.schedules, Schedule::kInterleaved)
                    ? fmt::format(" --virtual-stages {}", args.virtual_stages)
                    : "");
  }
}

// A search without one valid candidate answers nothing: it is the input that cannot be (the
// report said "no strategy fits in N GiB" with exit code 0 even where no candidate was OOM).
// One line, as `eventsim events --gpus` says it; OOM-only searches keep their report and advice.
void refuseWithoutValidCandidates(const SearchArgs& args, const SearchOptions& options,
                                  const ModelConfig& model, const SearchReport& report) {
  if (report.valid > 0) return;
  if (report.invalid == 0) {
    EVSIM_THROW(InputError,
                "--gpus {}: no candidate in the searched space (no M x P x C x D = {} with C from "
                "--cp {} and E from --ep {} dividing M x D, for --schedule {}{})",
                args.gpus, args.gpus, args.context_parallel,
                args.expert_parallel.empty() ? "1" : args.expert_parallel, args.schedules,
                has(options.space.schedules, Schedule::kInterleaved)
                    ? fmt::format(" with v from --virtual-stages {}", args.virtual_stages)
                    : "");
  }
  auto most = std::max_element(report.invalid_by_rule.begin(), report.invalid_by_rule.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  EVSIM_CHECK(most != report.invalid_by_rule.end(), "{} invalid candidates without a rule",
              report.invalid);
  const auto example = report.invalid_example.find(most->first);
  EVSIM_THROW(InputError,
              "no valid strategy for {} on {} GPUs: all {} candidates break a rule, most often "
              "({} of them) {}",
              model.name, args.gpus, report.invalid, most->second,
              example == report.invalid_example.end() ? most->first : example->second);
}

}  // namespace evsim

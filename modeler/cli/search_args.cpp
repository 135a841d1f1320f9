#include "modeler/cli/search_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/strings.h"
#include "events/event_file.h"
#include "modeler/cli/eventprof_hint.h"
#include "plan/strategy_space.h"

namespace evsim {

std::vector<Schedule> parseSchedules(const std::string& text) {
  std::vector<Schedule> out;
  for (const std::string& part : split(text, ',')) {
    std::string name = trim(part);
    if (name.empty()) EVSIM_THROW(InputError, "--schedule '{}': empty entry", text);
    Schedule s = parseSchedule(name, "--schedule");
    bool seen = false;
    for (Schedule o : out) seen = seen || o == s;
    if (!seen) out.push_back(s);
  }
  if (out.empty()) EVSIM_THROW(InputError, "--schedule '{}': no schedule given", text);
  return out;
}

namespace {

// A comma-separated list of named values (each parsed by `parse`), repeats dropped.
template <typename T>
std::vector<T> parseNamedList(const std::string& text, std::string_view flag,
                              T (*parse)(std::string_view, std::string_view)) {
  std::vector<T> out;
  for (const std::string& part : split(text, ',')) {
    std::string name = trim(part);
    if (name.empty()) EVSIM_THROW(InputError, "{} '{}': empty entry", flag, text);
    T value = parse(name, flag);
    if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
  }
  return out;
}

}  // namespace

std::vector<Recompute> parseRecomputes(const std::string& text) {
  return parseNamedList(text, "--recompute", &parseRecompute);
}

std::vector<Offload> parseOffloads(const std::string& text) {
  return parseNamedList(text, "--offload", &parseOffload);
}

std::vector<bool> parseOnOff(const std::string& text, std::string_view flag) {
  std::vector<bool> out;
  for (const std::string& part : split(text, ',')) {
    std::string name = trim(part);
    if (name != "off" && name != "on") {
      EVSIM_THROW(InputError, "{} '{}': each entry must be off or on, got '{}'", flag, text, name);
    }
    bool on = name == "on";
    if (std::find(out.begin(), out.end(), on) == out.end()) out.push_back(on);
  }
  return out;
}

std::vector<int> parseSmallInts(const std::string& text, std::string_view flag) {
  std::vector<int> out;
  for (int64_t v : parseIntList(text, flag)) {
    int value = static_cast<int>(v);
    if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
  }
  return out;
}

// --tp-comm as the --sequence-parallel values it stands for: rs-ag is Megatron's sequence
// parallelism (each TP all-reduce split into a reduce-scatter and an all-gather, the activations
// between them sharded along the sequence); an rs-ag that gathered right after scattering would be
// a ring all-reduce in two launches, the same bytes (docs/SEARCH.md).
std::string sequenceParallelValues(const SearchArgs& args) {
  if (args.tp_comm.empty()) return args.sequence_parallel;
  std::string out;
  for (const std::string& part : split(args.tp_comm, ',')) {
    const std::string name = trim(part);
    if (name != "allreduce" && name != "rs-ag") {
      EVSIM_THROW(InputError, "--tp-comm '{}': each entry must be allreduce or rs-ag, got '{}'",
                  args.tp_comm, name);
    }
    out += (out.empty() ? "" : ",") + std::string(name == "rs-ag" ? "on" : "off");
  }
  return out;
}

std::string defaultContextParallel(const ModelConfig& model) {
  std::string out = "1";
  if (!model.spec.flash_attention) return out;
  for (int64_t c = 2; model.seq_length / c >= kMinTokensPerCpRank; c *= 2) {
    out += fmt::format(",{}", c);
  }
  return out;
}

namespace {

// The entries of `all` that `given` (a comma-separated flag value) leaves out.
std::vector<std::string> missingFrom(const std::string& given,
                                     const std::vector<std::string>& all) {
  std::vector<std::string> values;
  for (const std::string& part : split(given, ',')) values.push_back(toLower(trim(part)));
  if (std::find(values.begin(), values.end(), "1f1b") != values.end()) values.push_back("dapple");
  std::vector<std::string> out;
  for (const std::string& a : all) {
    if (std::find(values.begin(), values.end(), a) == values.end()) out.push_back(a);
  }
  return out;
}

}  // namespace

std::string searchedSpaceText(const SearchArgs& args) {
  std::string searched =
      fmt::format("searched: b {}; schedules {}", args.micro_batches, args.schedules);
  if (args.schedules.find("interleaved") != std::string::npos) {
    searched += fmt::format(" (v {})", args.virtual_stages);
  }
  const bool fsdp = parseFramework(args.run.framework) == Framework::kFsdp;
  searched += fmt::format("; recompute {}; SP {}; ZeRO {}; DP overlap {}; CP {}", args.recomputes,
                          sequenceParallelValues(args),
                          fsdp ? "FSDP full sharding" : args.zero_stages, args.dp_overlaps,
                          args.context_parallel);
  if (!args.expert_parallel.empty()) searched += fmt::format("; EP {}", args.expert_parallel);
  if (!args.expert_tensor_parallel.empty()) {
    searched += fmt::format("; ETP M,{}", args.expert_tensor_parallel);
  }
  if (args.offloads != "none") searched += fmt::format("; offload {}", args.offloads);
  if (args.cp_comm_type != "p2p") {
    searched += fmt::format("; CP comm {}", args.cp_comm_type);
    if (args.cp_a2a > 0) searched += fmt::format(" (a2a over {})", args.cp_a2a);
  }
  if (args.tp_comm_overlap) searched += "; TP comm overlap where SP";
  if (args.overlap_param_gather) searched += "; param-gather overlap where ZeRO 1/2 + DP overlap";
  if (args.grad_reduce_in_bf16) searched += "; gradients reduced in bf16";
  if (args.grad_reduce_sync == "step") searched += "; ZeRO-2 reductions waited at the step";

  std::vector<std::string> left;
  auto leftOut = [&](std::string_view label, const std::string& given,
                     const std::vector<std::string>& all, std::string_view flag) {
    std::vector<std::string> missing = missingFrom(given, all);
    if (missing.empty()) return;
    left.push_back(
        fmt::format("{}{}{} ({})", label, label.empty() ? "" : " ", fmt::join(missing, ","), flag));
  };
  leftOut("", args.schedules,
          {"gpipe", "dapple", "interleaved", "zbh1", "zbh2", "zbv", "dualpipev"}, "--schedule");
  leftOut("recompute", args.recomputes, {"none", "selective", "full"}, "--recompute");
  leftOut("SP", sequenceParallelValues(args), {"off", "on"}, "--sequence-parallel");
  if (!fsdp) leftOut("ZeRO", args.zero_stages, {"0", "1", "2", "3"}, "--zero");
  leftOut("DP overlap", args.dp_overlaps, {"off", "on"}, "--dp-overlap");
  leftOut("offload", args.offloads, {"none", "optimizer", "activations", "both"}, "--offload");
  if (args.context_parallel != "1") {
    left.push_back(fmt::format("CP comm types but {} (--cp-comm-type)", args.cp_comm_type));
  }
  if (!args.tp_comm_overlap) left.push_back("TP comm overlap (--tp-comm-overlap)");
  if (!args.overlap_param_gather) {
    left.push_back("param-gather overlap (--overlap-param-gather)");
  }
  if (args.uneven_stages == 0) left.push_back("uneven stages (--uneven-stages)");
  // Simulate-only choices: an interleaved group N above P (Megatron requires N >= P, and every N
  // above P holds (v - 1)(N - P) more chunk activations, never less memory) and checkpointing only
  // every N-th block (which blocks depends on each rank's split).
  if (args.schedules.find("interleaved") != std::string::npos) {
    left.push_back("interleaved group N > P (simulate --microbatch-group-size)");
  }
  left.push_back("every N-th block checkpointed (simulate --recompute-every)");
  if (!args.allow_cross_node_tp) left.push_back("TP across nodes (--allow-cross-node-tp)");
  if (left.empty()) return searched;
  return fmt::format("{} — not searched: {}", searched, fmt::join(left, ", "));
}

// The search's own arguments that pick the candidates, as a command line fragment.
std::string spaceCommandLine(const SearchArgs& args) {
  std::string out = fmt::format(
      "--model {} --cluster {} --gpus {} --global-batch {} --micro-batch {} --schedule {}",
      args.run.model, args.run.cluster, args.gpus, args.run.global_batch, args.micro_batches,
      args.schedules);
  if (args.schedules.find("interleaved") != std::string::npos) {
    out += fmt::format(" --virtual-stages {}", args.virtual_stages);
  }
  out += fmt::format(" --recompute {} --sequence-parallel {}", args.recomputes,
                     sequenceParallelValues(args));
  if (parseFramework(args.run.framework) == Framework::kFsdp) {
    out += " --framework fsdp";
    if (args.run.reshard != "default") {
      out += fmt::format(" --reshard-after-forward {}", args.run.reshard);
    }
    if (parseFsdpWrap(args.run.fsdp_wrap) != FsdpWrap::kSeparate) {
      out += fmt::format(" --fsdp-wrap {}", args.run.fsdp_wrap);
    }
    if (args.run.torch_compile != "default") {
      out += fmt::format(" --torch-compile {}", args.run.torch_compile);
    }
    const OptimizerImpl impl = parseOptimizerImpl(args.run.optimizer_impl);
    if (impl != OptimizerImpl::kFused) {
      out += fmt::format(" --optimizer-impl {}", optimizerImplName(impl));  // as simulate spells it
    }
  } else {
    out += fmt::format(" --zero {}", args.zero_stages);
  }
  out += fmt::format(" --dp-overlap {}", args.dp_overlaps);
  if (args.offloads != "none") out += fmt::format(" --offload {}", args.offloads);
  if (args.context_parallel != "1") out += fmt::format(" --cp {}", args.context_parallel);
  if (args.cp_comm_type != "p2p") out += fmt::format(" --cp-comm-type {}", args.cp_comm_type);
  if (args.cp_a2a > 0) out += fmt::format(" --cp-a2a-size {}", args.cp_a2a);
  if (!args.expert_parallel.empty()) out += fmt::format(" --ep {}", args.expert_parallel);
  if (!args.expert_tensor_parallel.empty()) {
    out += fmt::format(" --etp {}", args.expert_tensor_parallel);
  }
  if (args.uneven_stages > 0) out += fmt::format(" --uneven-stages {}", args.uneven_stages);
  if (args.tp_comm_overlap) out += " --tp-comm-overlap";
  if (args.overlap_param_gather) out += " --overlap-param-gather";
  if (args.grad_reduce_in_bf16) out += " --grad-reduce-in-bf16";
  if (args.grad_reduce_sync != "backward") {
    out += fmt::format(" --grad-reduce-sync {}", args.grad_reduce_sync);
  }
  if (args.grad_reduce_queue > 0) out += fmt::format(" --grad-reduce-queue {}", args.grad_reduce_queue);
  if (args.allow_cross_node_tp) out += " --allow-cross-node-tp";
  return out;
}

// One profiling run that covers every candidate. eventprof --gpus enumerates the plain space
// (GPipe/DAPPLE, no techniques) itself; any other space goes through an events file.
std::string unionEventprofHint(const SearchArgs& args, const SearchOptions& options) {
  const StrategySpace& space = options.space;
  bool plain = space.recomputes == std::vector<Recompute>{Recompute::kNone} &&
               space.sequence_parallel == std::vector<bool>{false} &&
               space.zero_stages == std::vector<int>{0} &&
               space.dp_overlaps == std::vector<bool>{false} &&
               space.offloads == std::vector<Offload>{Offload::kNone} &&
               space.context_parallel == std::vector<int>{1} &&
               space.expert_parallel == std::vector<int>{1} &&
               space.expert_tensor_parallel == std::vector<int>{0} && !args.allow_cross_node_tp &&
               space.uneven_stage_shift == 0 &&  // uneven splits have their own Adam events
               !args.tp_comm_overlap && !args.overlap_param_gather &&
               !args.grad_reduce_in_bf16;  // events of their own
  for (Schedule s : space.schedules) {
    plain = plain && (s == Schedule::kGpipe || s == Schedule::kDapple);
  }
  if (plain) {
    return eventprofCommand(fmt::format(
        "--model {} --cluster {} --gpus {} --global-batch {} --micro-batches {} -o profile.yaml",
        args.run.model, args.run.cluster, args.gpus, args.run.global_batch, args.micro_batches));
  }
  return fmt::format("eventsim search {} --write-events events.yaml && {}", spaceCommandLine(args),
                     eventprofCommand("--events events.yaml -o profile.yaml"));
}

// Writes the union of the events of every valid candidate (fitting in memory or not) as an events
// file, before any cost is needed, so the profile can be made for exactly this search.
void writeUnionEvents(const SearchArgs& args, const ModelConfig& model,
                      const ClusterConfig& cluster, const SearchOptions& options) {
  EventTable table = unionOfEvents(model, cluster, options.base, options.space);
  if (table.size() == 0) {
    EVSIM_THROW(InputError, "--write-events {}: no valid strategy, so no events to write",
                args.write_events);
  }
  int64_t op_executions = 0;
  for (const UniqueEvent& u : table.events()) op_executions += u.count;
  const std::vector<std::pair<std::string, std::string>> source = {
      {"model", model.name},
      {"cluster", cluster.name},
      {"gpus", std::to_string(args.gpus)},
      {"global_batch", std::to_string(args.run.global_batch)},
      {"search", spaceCommandLine(args)}};
  writeFileAtomically(args.write_events, eventsFileYaml(table, op_executions, source));
  fmt::print(stderr,
             "wrote the {} events of every valid candidate to {} (for eventprof --events)\n",
             table.size(), args.write_events);
}

std::string simulateCommand(const SearchArgs& args, const Strategy& strategy) {
  std::string out = "eventsim simulate " + args.run.commandLine(strategy);
  if (args.allow_cross_node_tp) out += " --allow-cross-node-tp";
  if (!args.costs.profile.empty()) out += " --profile " + args.costs.profile;
  if (!args.costs.fallback.empty()) out += " --fallback " + args.costs.fallback;
  return out;
}

}  // namespace evsim

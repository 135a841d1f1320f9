// A strategy's names and text: the enums' names and parsers, "2M4P2D" and the techniques line.
// Its checks against a model and cluster: strategy_validation.cpp, strategy_technique_checks.cpp.
#include "plan/strategy.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "common/strings.h"
#include "plan/schedules/schedule_file.h"

namespace evsim {

std::string_view scheduleName(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGpipe:
      return "gpipe";
    case Schedule::kDapple:
      return "dapple";
    case Schedule::kInterleaved:
      return "interleaved";
    case Schedule::kZbh1:
      return "zbh1";
    case Schedule::kZbh2:
      return "zbh2";
    case Schedule::kZbv:
      return "zbv";
    case Schedule::kDualPipeV:
      return "dualpipev";
    case Schedule::kFile: {
      // The path stays alive with the installed file (replaced only by another --schedule).
      static thread_local std::shared_ptr<const ScheduleFile> named;
      named = installedScheduleFile();
      return named ? std::string_view(named->path) : std::string_view("file");
    }
  }
  return "?";
}

std::string_view offloadName(Offload offload) {
  switch (offload) {
    case Offload::kNone:
      return "none";
    case Offload::kOptimizer:
      return "optimizer";
    case Offload::kActivations:
      return "activations";
    case Offload::kBoth:
      return "both";
  }
  return "?";
}

Offload parseOffload(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  for (Offload o : {Offload::kNone, Offload::kOptimizer, Offload::kActivations, Offload::kBoth}) {
    if (lower == offloadName(o)) return o;
  }
  EVSIM_THROW(InputError, "{} '{}': unknown offload (none, optimizer, activations or both)", flag,
              text);
}

std::string_view frameworkName(Framework framework) {
  return framework == Framework::kFsdp ? "fsdp" : "megatron";
}

Framework parseFramework(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "megatron") return Framework::kMegatron;
  if (lower == "fsdp") return Framework::kFsdp;
  EVSIM_THROW(InputError, "{} '{}': unknown framework (megatron or fsdp)", flag, text);
}

std::string_view reshardName(Reshard reshard) {
  switch (reshard) {
    case Reshard::kDefault:
      return "default";
    case Reshard::kAlways:
      return "always";
    case Reshard::kNever:
      return "never";
  }
  return "?";
}

Reshard parseReshard(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "default") return Reshard::kDefault;
  if (lower == "always") return Reshard::kAlways;
  if (lower == "never") return Reshard::kNever;
  EVSIM_THROW(InputError, "{} '{}': unknown policy (default, always or never)", flag, text);
}

std::string_view fsdpWrapName(FsdpWrap wrap) {
  switch (wrap) {
    case FsdpWrap::kSeparate:
      return "separate";
    case FsdpWrap::kRoot:
      return "root";
  }
  return "?";
}

FsdpWrap parseFsdpWrap(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "separate") return FsdpWrap::kSeparate;
  if (lower == "root") return FsdpWrap::kRoot;
  EVSIM_THROW(InputError, "{} '{}': unknown wrapping (separate or root)", flag, text);
}

std::string_view torchCompileName(TorchCompile compile) {
  switch (compile) {
    case TorchCompile::kDefault:
      return "default";
    case TorchCompile::kOn:
      return "on";
    case TorchCompile::kOff:
      return "off";
    case TorchCompile::kBlocks:
      return "blocks";
  }
  return "?";
}

TorchCompile parseTorchCompile(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "default") return TorchCompile::kDefault;
  if (lower == "on") return TorchCompile::kOn;
  if (lower == "off") return TorchCompile::kOff;
  if (lower == "blocks") return TorchCompile::kBlocks;
  EVSIM_THROW(InputError, "{} '{}': unknown setting (on, off, blocks or default)", flag, text);
}

std::string_view optimizerImplName(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kFused:
      return "fused";
    case OptimizerImpl::kForeach:
      return "foreach";
    case OptimizerImpl::kForLoop:
      return "for-loop";
  }
  return "?";
}

OptimizerImpl parseOptimizerImpl(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "fused") return OptimizerImpl::kFused;
  if (lower == "foreach") return OptimizerImpl::kForeach;
  if (lower == "for-loop") return OptimizerImpl::kForLoop;
  EVSIM_THROW(InputError, "{} '{}': unknown implementation (fused, foreach or for-loop)", flag,
              text);
}

Schedule parseSchedule(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower.size() > 4 && lower.ends_with(".csv")) {
    installScheduleFile(loadScheduleCsv(trim(text)));
    return Schedule::kFile;
  }
  if (lower == "gpipe") return Schedule::kGpipe;
  if (lower == "dapple" || lower == "1f1b") return Schedule::kDapple;
  if (lower == "interleaved") return Schedule::kInterleaved;
  if (lower == "zbh1") return Schedule::kZbh1;
  if (lower == "zbh2") return Schedule::kZbh2;
  if (lower == "zbv") return Schedule::kZbv;
  if (lower == "dualpipev") return Schedule::kDualPipeV;
  // DualPipe proper runs two copies of every stage in two directions: a micro-batch's stage
  // depends on its direction, which the pipeline layout (one device per virtual stage) cannot say.
  if (lower == "dualpipe") {
    EVSIM_THROW(InputError,
                "{} '{}': the two-direction DualPipe is not modelled (its cut-in-half form is: "
                "dualpipev)",
                flag, text);
  }
  EVSIM_THROW(InputError,
              "{} '{}': unknown schedule (gpipe, dapple, 1f1b, interleaved, zbh1, zbh2, zbv, "
              "dualpipev or a FILE.csv)",
              flag, text);
}

std::string Strategy::name() const { return fmt::format("{}M{}P{}D", tp, pp, dp); }

std::string Strategy::techniques(TechniqueStyle style) const {
  const bool brief = style == TechniqueStyle::kShort;
  std::string out;
  if (dp_overlap) out += brief ? " ov" : " dp-overlap";
  if (overlap_param_gather) out += brief ? " pg" : " param-gather-overlap";
  if (tp_comm_overlap) out += brief ? " tpo" : " tp-comm-overlap";
  if (grad_reduce_in_bf16) out += brief ? " gbf16" : " grad-reduce-bf16";
  if (reducesAtStep()) {
    out += brief ? " gas" : " grad-reduce-at-step";
    if (grad_reduce_queue > 0) out += fmt::format("(q{})", grad_reduce_queue);
  }
  if (cp > 1) out += fmt::format(" cp{}", cp);
  if (cp > 1 && cp_comm == CpComm::kA2aP2p) {
    out += fmt::format("(a2a{}+p2p)", cp_a2a);
  } else if (cp > 1 && cp_comm != CpComm::kP2p) {
    out += fmt::format("({})", brief && cp_comm == CpComm::kAllGather ? "ag" : cpCommName(cp_comm));
  }
  if (ep > 1) out += fmt::format(" ep{}", ep);
  if (etp > 0 && etp != tp) out += fmt::format(" etp{}", etp);
  if (moe_dispatcher == MoeDispatcher::kDeepEp) out += brief ? " dep" : " deepep";
  if (moe_a2a_overlap) out += brief ? " a2o" : " a2a-overlap";
  if (virtual_stages > 1) out += fmt::format(" v{}", virtual_stages);
  if (microbatch_group > 0) out += fmt::format(" n{}", microbatch_group);
  if (recompute != Recompute::kNone) {
    std::string_view name = recomputeName(recompute);
    if (brief && recompute == Recompute::kSelective) name = "sel";
    if (brief && recompute == Recompute::kSelectiveOp) name = "op";
    out += fmt::format(" rc={}", name);
    if (recompute_every > 1) out += fmt::format("/{}", recompute_every);
  }
  if (swiglu_recompute_product) out += brief ? " xsw" : " xformers-swiglu";
  if (sequence_parallel) out += " sp";
  if (framework == Framework::kFsdp) {
    out += " fsdp";
    if (reshard != Reshard::kDefault) out += fmt::format(" reshard={}", reshardName(reshard));
    if (fsdp_wrap != FsdpWrap::kSeparate) out += fmt::format(" wrap={}", fsdpWrapName(fsdp_wrap));
    if (torch_compile != TorchCompile::kDefault) {
      out += fmt::format(" compile={}", torchCompileName(torch_compile));
    }
    if (optimizer_impl != OptimizerImpl::kFused) {
      out += fmt::format(" adamw={}", optimizerImplName(optimizer_impl));
    }
  } else if (zero_stage > 0) {
    out += fmt::format(" {}{}", brief ? "z" : "zero", zero_stage);
  }
  if (offload != Offload::kNone) {
    out += fmt::format(" {}={}", brief ? "off" : "offload", offloadName(offload));
  }
  if (!stage_layers.empty()) out += fmt::format(" layers={}", fmt::join(stage_layers, ","));
  return out;
}

void parseStrategyText(std::string_view text, Strategy& strategy, std::string_view flag) {
  std::string upper = toLower(trim(text));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int values[3] = {0, 0, 0};  // M, P, D
  const std::string letters = "MPD";
  size_t pos = 0;
  while (pos < upper.size()) {
    size_t digits = pos;
    while (digits < upper.size() && std::isdigit(static_cast<unsigned char>(upper[digits])))
      ++digits;
    if (digits == pos || digits >= upper.size() ||
        letters.find(upper[digits]) == std::string::npos || digits - pos > 6) {
      EVSIM_THROW(InputError, "{} '{}': expected the form 2M4P2D (a number before each of M, P, D)",
                  flag, text);
    }
    int slot = static_cast<int>(letters.find(upper[digits]));
    if (values[slot] != 0)
      EVSIM_THROW(InputError, "{} '{}': {} given twice", flag, text, upper[digits]);
    values[slot] = std::stoi(upper.substr(pos, digits - pos));
    if (values[slot] <= 0) {
      EVSIM_THROW(InputError, "{} '{}': {} must be > 0", flag, text, upper[digits]);
    }
    pos = digits + 1;
  }
  for (int slot = 0; slot < 3; ++slot) {
    if (values[slot] == 0) {
      EVSIM_THROW(InputError, "{} '{}': missing the {} part (form 2M4P2D)", flag, text,
                  letters[slot]);
    }
  }
  strategy.tp = values[0];
  strategy.pp = values[1];
  strategy.dp = values[2];
}

std::string_view gradReduceSyncName(GradReduceSync sync) {
  return sync == GradReduceSync::kStep ? "step" : "backward";
}

GradReduceSync parseGradReduceSync(std::string_view text, std::string_view flag) {
  if (text == "backward") return GradReduceSync::kBackward;
  if (text == "step") return GradReduceSync::kStep;
  EVSIM_THROW(InputError, "{} '{}': must be backward or step", flag, text);
}

std::string_view moeDispatcherName(MoeDispatcher dispatcher) {
  return dispatcher == MoeDispatcher::kDeepEp ? "deepep" : "alltoall";
}

}  // namespace evsim
